package github_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/checkrun"
	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/github/githubfake"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/run"
)

// ingestionDoc is a source ingestion as /v1 reads it.
type ingestionDoc struct {
	ID                string  `json:"id"`
	WorkspaceID       string  `json:"workspace_id"`
	Status            string  `json:"status"`
	HeldReason        *string `json:"held_reason"`
	HeadSHA           string  `json:"head_sha"`
	PullRequestNumber *int    `json:"pull_request_number"`
	Fork              bool    `json:"fork"`
	HeadRepository    *string `json:"head_repository"`
	PlanApprovedBy    *string `json:"plan_approved_by"`
	RunID             *string `json:"run_id"`
}

// forkStack is a stack with one installation, a workspace tracking its
// repository's main branch, and the check runs the app publishes.
type forkStack struct {
	*stack
	ws     string
	checks *githubfake.Checks
	sync   *checkrun.Service
	gh     *github.Service
}

const forkRepo, forkInstallation = 5301, 931

func newForkStack(t *testing.T, forks string, opts ...apitest.Option) *forkStack {
	t.Helper()
	fake := githubfake.Start(t)
	env := apitest.New(t, append([]apitest.Option{withApp(fake)}, opts...)...)
	s := &forkStack{stack: &stack{env: env, fake: fake, owner: env.WithOrganization("forks")}}
	s.checks = githubfake.AttachChecks(fake)
	s.install(t, forkInstallation, forkRepo)
	s.ws = s.workspace(t, "forks")
	body := map[string]any{"repository_id": forkRepo, "tracked_branch": "main", "working_directory": "infra"}
	if forks != "" {
		body["fork_pull_requests"] = forks
	}
	s.source(t, s.ws, body).MustStatus(t, http.StatusCreated)
	app, err := github.NewApp(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	inserter, err := river.NewClient(riverdatabasesql.New(env.DB.DB), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.sync = checkrun.NewService(env.DB, inserter, slog.New(slog.NewTextHandler(io.Discard, nil)), checkrun.Options{
		DashboardURL: env.Config.DashboardURL, Clients: app.CheckClients(), AppID: fake.AppID})
	s.gh = env.Server.Services().GitHub
	return s
}

// forkPull delivers a pull request from a fork whose head is a fresh
// commit, and returns its ingestion and head commit.
func (s *forkStack) forkPull(t *testing.T, number int) (string, string) {
	t.Helper()
	head := s.fake.Commit(forkRepo, fmt.Sprintf("fork-%d", number), fmt.Sprintf("fork change %d", number), mainTF())
	var d deliveryDoc
	s.deliver(t, githubfake.NewDelivery("pull_request", s.fake.PullRequest(t, forkInstallation, forkRepo, githubfake.PullOptions{
		Number: number, Base: "main", HeadRef: "patch", HeadSHA: head, Fork: true, ForkOwner: "mallory"}))).
		MustStatus(t, http.StatusOK).Data(t, &d)
	if len(d.IngestionIDs) != 1 {
		t.Fatalf("fork pull request: %+v", d)
	}
	return d.IngestionIDs[0], head
}

func (s *forkStack) ingestion(t *testing.T, id string) ingestionDoc {
	t.Helper()
	var doc ingestionDoc
	s.owner.Get("/v1/source-ingestions/"+id).MustStatus(t, http.StatusOK).Data(t, &doc)
	return doc
}

// plan is Plan this commit by c with a fresh key.
func plan(c *apitest.Client, id, sha string) *apitest.Response {
	return c.Mutate(http.MethodPost, "/v1/source-ingestions/"+id+"/actions/plan", map[string]string{"commit_sha": sha})
}

// syncAll publishes every pending check as cairn-worker would.
func (s *forkStack) syncAll(t *testing.T) {
	t.Helper()
	var ids []string
	if err := s.env.DB.Select(&ids, `SELECT external_id FROM check_run_publications WHERE pending`); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := s.sync.Sync(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestForkPullRequestIsHeldUntilAPersonPlansIt: by default a pull request
// from a fork downloads nothing and creates no run: its ingestion is held
// (fork_pull_request) with a neutral check on the head commit linking to
// the held pull request's dashboard page, and the workspace lists it. An
// agent, a reader, another organization, a wrong commit and a missing key
// cannot plan it; the owner plans the exact head commit, which records the
// approval, dispatches the ingestion and writes the audit event in one
// transaction, and the ingestion becomes a speculative run of that commit
// pinning who approved it. The held check stays neutral beside the run's
// own.
func TestForkPullRequestIsHeldUntilAPersonPlansIt(t *testing.T) {
	t.Parallel()
	s := newForkStack(t, "")
	ctx := context.Background()
	id, head := s.forkPull(t, 41)
	if err := s.gh.Ingest(ctx, id); err != nil {
		t.Fatal(err)
	}
	held := s.ingestion(t, id)
	if held.Status != "held" || held.HeldReason == nil || *held.HeldReason != "fork_pull_request" || !held.Fork ||
		held.HeadRepository == nil || *held.HeadRepository != "mallory/infra5301" || held.HeadSHA != head || held.RunID != nil {
		t.Fatalf("held ingestion: %+v", held)
	}
	if n := s.fake.Calls(githubfake.RouteTarball) + s.fake.Calls(githubfake.RouteCommit); n != 0 {
		t.Fatalf("a held fork reached the archive or commit routes %d times", n)
	}
	if n := s.count(t, `SELECT count(*) FROM runs`) + s.count(t, `SELECT count(*) FROM configuration_versions`); n != 0 {
		t.Fatalf("a held fork left %d runs and configuration versions", n)
	}
	if n := s.count(t, `SELECT count(*) FROM workflow_dispatches WHERE id = $1 AND status = 'completed'`, github.WorkflowIDOf(id)); n != 1 {
		t.Fatal("a held ingestion's dispatch is still owed")
	}
	s.syncAll(t)
	checks := s.checks.Runs(head)
	if len(checks) != 1 {
		t.Fatalf("%d checks on the head commit: %+v", len(checks), checks)
	}
	c := checks[0]
	page := s.env.Config.DashboardURL + "/workspaces/" + s.ws + "/pull-requests/" + id
	if c.ExternalID != id || c.Status != "completed" || c.Conclusion != "neutral" || c.DetailsURL != page ||
		!strings.Contains(c.Summary, "not planned automatically") || !strings.Contains(c.Summary, head) ||
		!strings.Contains(c.Summary, page) {
		t.Fatalf("held check: %+v", c)
	}
	var list []ingestionDoc
	s.owner.Get("/v1/workspaces/"+s.ws+"/held-source-ingestions").MustStatus(t, http.StatusOK).Data(t, &list)
	if len(list) != 1 || list[0].ID != id {
		t.Fatalf("held list: %+v", list)
	}

	// Who cannot plan it.
	reader := s.env.SignUp("reader")
	s.env.Join(s.owner, reader, "reader")
	if res := plan(reader.Client, id, head); res.Status != http.StatusForbidden {
		t.Fatalf("a reader planned: %d %s", res.Status, res.Body)
	}
	agent := s.env.Anonymous()
	token := s.owner.AgentToken()
	res := agent.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/source-ingestions/" + id + "/actions/plan",
		Body: map[string]string{"commit_sha": head}, Header: map[string]string{"Authorization": "Bearer " + token,
			"Idempotency-Key": apitest.NewKey()}})
	if res.Status != http.StatusForbidden {
		t.Fatalf("the owner's agent planned: %d %s", res.Status, res.Body)
	}
	stranger := s.env.WithOrganization("stranger")
	if res := plan(stranger.Client, id, head); res.Status != http.StatusNotFound {
		t.Fatalf("another organization: %d %s", res.Status, res.Body)
	}
	if res := stranger.Get("/v1/source-ingestions/" + id); res.Status != http.StatusNotFound {
		t.Fatalf("another organization read it: %d", res.Status)
	}
	if res := plan(s.owner.Client, id, strings.Repeat("a", 40)); res.Code() != "SOURCE_INGESTION_COMMIT_MISMATCH" {
		t.Fatalf("another commit: %d %s", res.Status, res.Body)
	}
	if res := s.owner.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/source-ingestions/" + id + "/actions/plan",
		Body: map[string]string{"commit_sha": head}}); res.Code() != "IDEMPOTENCY_KEY_REQUIRED" {
		t.Fatalf("no key: %d %s", res.Status, res.Body)
	}
	if got := s.ingestion(t, id); got.Status != "held" || got.PlanApprovedBy != nil {
		t.Fatalf("a refused plan changed the ingestion: %+v", got)
	}

	// The owner plans the exact commit.
	var planned ingestionDoc
	plan(s.owner.Client, id, head).MustStatus(t, http.StatusOK).Data(t, &planned)
	if planned.Status != "pending" || planned.PlanApprovedBy == nil || *planned.PlanApprovedBy != s.owner.ID {
		t.Fatalf("planned: %+v", planned)
	}
	var raw []byte
	if err := s.env.DB.Get(&raw, `SELECT evidence FROM audit_events WHERE action = 'source_ingestion.plan_approved'
		AND target_id = $1 AND actor_type = 'user' AND actor_id = $2`, id, s.owner.ID); err != nil {
		t.Fatalf("audit event: %v", err)
	}
	var evidence map[string]any
	if err := json.Unmarshal(raw, &evidence); err != nil {
		t.Fatal(err)
	}
	if evidence["workspace_id"] != s.ws || evidence["pull_request_number"] != float64(41) || evidence["commit_sha"] != head ||
		evidence["fork_owner"] != "mallory" || evidence["fork_name"] != "infra5301" {
		t.Fatalf("audit evidence: %v", evidence)
	}
	if n := s.count(t, `SELECT count(*) FROM river_job WHERE kind = 'source_ingestion' AND args->>'source_ingestion_id' = $1
		AND state = 'available'`, id); n != 1 {
		t.Fatalf("%d live ingestion jobs after the plan", n)
	}
	if res := plan(s.owner.Client, id, head); res.Code() != "SOURCE_INGESTION_NOT_HELD" {
		t.Fatalf("planned twice: %d %s", res.Status, res.Body)
	}
	if err := s.gh.Ingest(ctx, id); err != nil {
		t.Fatal(err)
	}
	ready := s.ingestion(t, id)
	if ready.Status != "ready" || ready.RunID == nil || *ready.RunID != run.RunIDOf(id) {
		t.Fatalf("after the plan: %+v", ready)
	}
	var r struct {
		Kind       string `json:"kind"`
		Provenance struct {
			CommitSHA      string  `json:"commit_sha"`
			Fork           bool    `json:"fork"`
			PlanApprovedBy *string `json:"plan_approved_by"`
		} `json:"source_provenance"`
	}
	s.owner.Get("/v1/runs/"+*ready.RunID).MustStatus(t, http.StatusOK).Data(t, &r)
	if r.Kind != "speculative" || r.Provenance.CommitSHA != head || !r.Provenance.Fork || r.Provenance.PlanApprovedBy == nil ||
		*r.Provenance.PlanApprovedBy != s.owner.ID {
		t.Fatalf("the planned run: %+v", r)
	}
	if src := s.pinnedSource(t, *ready.RunID); !src.Fork || src.PlanApprovedBy == nil || *src.PlanApprovedBy != s.owner.ID ||
		src.CommitSHA != head {
		t.Fatalf("pinned source: %+v", src)
	}
	s.syncAll(t)
	var heldCheck, runCheck int
	for _, c := range s.checks.Runs(head) {
		switch c.ExternalID {
		case id:
			heldCheck++
			if c.Conclusion != "neutral" || c.Writes != 1 {
				t.Fatalf("the held check changed: %+v", c)
			}
		case *ready.RunID:
			runCheck++
		}
	}
	if heldCheck != 1 || runCheck != 1 {
		t.Fatalf("checks on the head: %d held, %d of the run", heldCheck, runCheck)
	}
	s.owner.Get("/v1/workspaces/"+s.ws+"/held-source-ingestions").MustStatus(t, http.StatusOK).Data(t, &list)
	if len(list) != 0 {
		t.Fatalf("a planned pull request is still listed as held: %+v", list)
	}
}

// TestPlanHeldRefusesAnythingButAPerson: the service itself refuses an
// agent acting for an owner and a token, whatever their permissions.
func TestPlanHeldRefusesAnythingButAPerson(t *testing.T) {
	t.Parallel()
	s := newForkStack(t, "")
	ctx := context.Background()
	id, head := s.forkPull(t, 7)
	if err := s.gh.Ingest(ctx, id); err != nil {
		t.Fatal(err)
	}
	all := access.PermissionsOf(access.RoleOwner)
	for name, p := range map[string]access.Principal{
		"agent": {Kind: access.KindUser, ID: s.owner.ID, OrganizationID: s.owner.OrganizationID, Permissions: all,
			Agent: &access.Agent{ClientID: "c", GrantID: "g", Write: true}},
		"service account": {Kind: access.KindServiceAccount, ID: "sa_x", OrganizationID: s.owner.OrganizationID, Permissions: all},
		"code host":       access.CodeHost(s.owner.OrganizationID),
	} {
		err := db.WithTx(ctx, s.env.DB, func(tx *sqlx.Tx) error {
			_, err := s.gh.PlanHeld(ctx, tx, p, id, head)
			return err
		})
		if !errors.Is(err, fault.ErrForbidden) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if got := s.ingestion(t, id); got.Status != "held" {
		t.Fatalf("after refusals: %+v", got)
	}
}

// TestForkPlansAreThrottledPerRepository: with fork plans allowed, fork
// pull requests become speculative runs until the repository has had
// CAIRN_FORK_RUNS_PER_HOUR of them in the last hour, also when many
// ingestions finish at once; the next is held (fork_runs_throttled) with a
// neutral check. A person's plan is never throttled, and an hour later
// automatic plans resume.
func TestForkPlansAreThrottledPerRepository(t *testing.T) {
	t.Parallel()
	s := newForkStack(t, "plan", func(st *apitest.Settings) { st.Config.ForkRunsPerHour = 2 })
	ctx := context.Background()
	var ids []string
	for n := range 5 {
		id, _ := s.forkPull(t, 100+n)
		ids = append(ids, id)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.gh.Ingest(ctx, id)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ready := s.count(t, `SELECT count(*) FROM source_ingestions WHERE status = 'ready' AND run_id IS NOT NULL`)
	throttled := s.count(t, `SELECT count(*) FROM source_ingestions WHERE status = 'held' AND held_reason = 'fork_runs_throttled'`)
	if ready != 2 || throttled != 3 || s.count(t, `SELECT count(*) FROM runs WHERE kind = 'speculative'`) != 2 {
		t.Fatalf("5 fork pull requests under a limit of 2: %d runs, %d throttled", ready, throttled)
	}
	var heldID, heldHead string
	if err := s.env.DB.QueryRow(`SELECT id, head_sha FROM source_ingestions WHERE status = 'held' ORDER BY id LIMIT 1`).
		Scan(&heldID, &heldHead); err != nil {
		t.Fatal(err)
	}
	s.syncAll(t)
	var found bool
	for _, c := range s.checks.Runs(heldHead) {
		if c.ExternalID == heldID {
			found = c.Conclusion == "neutral" && strings.Contains(c.Summary, "fork_runs_throttled") &&
				strings.Contains(c.Title, "limit")
		}
	}
	if !found {
		t.Fatalf("no neutral throttled check on %s: %+v", heldHead, s.checks.Runs(heldHead))
	}
	// A person's plan passes the limit.
	plan(s.owner.Client, heldID, heldHead).MustStatus(t, http.StatusOK)
	if err := s.gh.Ingest(ctx, heldID); err != nil {
		t.Fatal(err)
	}
	if got := s.ingestion(t, heldID); got.Status != "ready" {
		t.Fatalf("a person's plan was throttled: %+v", got)
	}
	// Still throttled for automatic plans; an hour later they resume.
	id, _ := s.forkPull(t, 200)
	if err := s.gh.Ingest(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := s.ingestion(t, id); got.Status != "held" {
		t.Fatalf("within the hour: %+v", got)
	}
	later := s.gh.WithClock(func() time.Time { return time.Now().Add(github.ForkRunWindow + time.Minute) })
	id, _ = s.forkPull(t, 201)
	if err := later.Ingest(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := s.ingestion(t, id); got.Status != "ready" {
		t.Fatalf("an hour later: %+v", got)
	}
}

// TestForkSettingIsASourceSettingsVersion: fork_pull_requests is part of
// the immutable version, hold by default, and nothing but hold or plan.
func TestForkSettingIsASourceSettingsVersion(t *testing.T) {
	t.Parallel()
	s := newForkStack(t, "")
	var doc struct {
		Current struct {
			Version          int    `json:"version"`
			ForkPullRequests string `json:"fork_pull_requests"`
		} `json:"current"`
	}
	s.owner.Get("/v1/workspaces/"+s.ws+"/source").MustStatus(t, http.StatusOK).Data(t, &doc)
	if doc.Current.ForkPullRequests != "hold" {
		t.Fatalf("default: %+v", doc)
	}
	if res := s.source(t, s.ws, map[string]any{"repository_id": forkRepo, "tracked_branch": "main",
		"fork_pull_requests": "always"}); res.Status/100 != 4 {
		t.Fatalf("an unknown setting: %d %s", res.Status, res.Body)
	}
	s.source(t, s.ws, map[string]any{"repository_id": forkRepo, "tracked_branch": "main", "fork_pull_requests": "plan"}).
		MustStatus(t, http.StatusCreated)
	s.owner.Get("/v1/workspaces/"+s.ws+"/source").MustStatus(t, http.StatusOK).Data(t, &doc)
	if doc.Current.ForkPullRequests != "plan" || doc.Current.Version != 2 {
		t.Fatalf("after saving plan: %+v", doc)
	}
}
