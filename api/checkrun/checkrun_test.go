package checkrun_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/checkrun"
	cairngithub "github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/github/githubfake"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// TestStateFollowsSpec: every run status maps to the check state SPEC §6
// names for it.
func TestStateFollowsSpec(t *testing.T) {
	t.Parallel()
	for status, want := range map[run.Status]string{
		run.StatusPending:             "queued",
		run.StatusPlanQueued:          "queued",
		run.StatusPlanning:            "in_progress",
		run.StatusAwaitingApproval:    "in_progress",
		run.StatusPolicyOverride:      "in_progress",
		run.StatusApplyQueued:         "in_progress",
		run.StatusApplying:            "in_progress",
		run.StatusRecoveryRequired:    "in_progress",
		run.StatusPlannedAndFinished:  "completed/success",
		run.StatusApplied:             "completed/success",
		run.StatusCredentialsRequired: "completed/neutral",
		run.StatusErrored:             "completed/failure",
		run.StatusPolicySoftFailed:    "completed/failure",
		run.StatusRecovered:           "completed/failure",
		run.StatusCanceled:            "completed/cancelled",
		run.StatusRejected:            "completed/cancelled",
		run.StatusExpired:             "completed/cancelled",
		run.Status("unheard_of"):      "completed/failure",
	} {
		status, conclusion := checkrun.State(status)
		got := status
		if conclusion != "" {
			got += "/" + conclusion
		}
		if got != want {
			t.Errorf("%s: check %s, want %s", status, got, want)
		}
		if (status == checkrun.StatusCompleted) != (conclusion != "") {
			t.Errorf("%s: status %s with conclusion %q", status, status, conclusion)
		}
	}
}

// harness is a real API over a fresh database, a fake code host with one
// installation, repository and commit, and a check-run service publishing
// to it.
type harness struct {
	env    *apitest.Env
	user   *apitest.User
	ws     string
	fake   *githubfake.Server
	checks *githubfake.Checks
	svc    *checkrun.Service
	target checkrun.Target
	client *github.Client
	logs   *lockedBuffer
}

// lockedBuffer collects the service's log lines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	env := apitest.New(t)
	u := env.WithOrganization("Checks")
	var p struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "P"}).MustStatus(t, http.StatusCreated).Data(t, &p)
	var w struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": p.ID, "name": "network",
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).
		MustStatus(t, http.StatusCreated).Data(t, &w)

	fake := githubfake.Start(t)
	checks := githubfake.AttachChecks(fake)
	fake.AddRepository(githubfake.Repository{ID: 501, Owner: "acme", Name: "infra"})
	fake.AddInstallation(githubfake.Installation{ID: 77, AccountLogin: "acme", Repositories: []int64{501}})
	sha := fake.Commit(501, "main", "network: widen the subnet", map[string]string{"main.tf": "# test\n"})
	cfg := apitest.TestConfig()
	cfg.GitHubAppID, cfg.GitHubPrivateKey, cfg.GitHubAPIURL = fake.AppID, config.Secret(fake.KeyPEM), fake.URL
	cfg.GitHubWebhookSecret = "test-webhook-secret-0123456789"
	app, err := cairngithub.NewApp(cfg)
	if err != nil || app == nil {
		t.Fatalf("code-host app: %v", err)
	}
	clients := app.CheckClients()
	inserter, err := river.NewClient(riverdatabasesql.New(env.DB.DB), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	svc := checkrun.NewService(env.DB, inserter, slog.New(slog.NewJSONHandler(logs, nil)), checkrun.Options{
		DashboardURL: "https://dash.example.test/", Clients: clients, Backoff: time.Millisecond, Lease: 5 * time.Second,
		AppID: fake.AppID})
	gh, err := clients(context.Background(), 77)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{env: env, user: u, ws: w.ID, fake: fake, checks: checks, svc: svc, client: gh, logs: logs,
		target: checkrun.Target{InstallationID: 77, RepositoryID: 501, RepositoryOwner: "acme", RepositoryName: "infra", HeadSHA: sha}}
}

// newRun creates a real plan-and-apply run through /v1; it stays queued
// (no worker runs here).
func (h *harness) newRun(t *testing.T) run.Run {
	t.Helper()
	var cv struct{ ID string }
	h.user.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + h.ws + "/configuration-versions",
		Body:   devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "a" {}`}),
		Header: map[string]string{"Content-Type": "application/gzip", "Idempotency-Key": apitest.NewKey()}}).
		MustStatus(t, http.StatusCreated).Data(t, &cv)
	var created struct{ ID string }
	h.user.Mutate(http.MethodPost, "/v1/runs", map[string]string{"workspace_id": h.ws, "configuration_version_id": cv.ID,
		"kind": "plan_and_apply"}).MustStatus(t, http.StatusCreated).Data(t, &created)
	r, err := h.env.Server.V1Services().Runs.RunOwner(context.Background(), created.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (h *harness) track(t *testing.T, r run.Run) {
	t.Helper()
	if err := db.WithTx(context.Background(), h.env.DB, func(tx *sqlx.Tx) error {
		return h.svc.Track(context.Background(), tx, r, h.target)
	}); err != nil {
		t.Fatal(err)
	}
}

// trackAndLoseCreate tracks a run and syncs it once, the create reaching
// the code host but its answer lost on the way back.
func (h *harness) trackAndLoseCreate(t *testing.T, r run.Run) {
	t.Helper()
	h.track(t, r)
	h.fake.Inject(githubfake.RouteCreateCheckRun, githubfake.Fault{Lose: true})
	if err := h.svc.Sync(context.Background(), r.ID); err == nil {
		t.Fatal("a sync whose create answer was lost succeeded")
	}
}

func (h *harness) cancel(t *testing.T, runID string) {
	t.Helper()
	h.user.Mutate(http.MethodPost, "/v1/runs/"+runID+"/actions/cancel", nil).MustStatus(t, http.StatusOK)
}

// only returns the one check run on the commit for runID.
func (h *harness) only(t *testing.T, runID string) githubfake.CheckRun {
	t.Helper()
	var mine []githubfake.CheckRun
	for _, c := range h.checks.Runs(h.target.HeadSHA) {
		if c.ExternalID == runID {
			mine = append(mine, c)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("%d check runs for %s, want exactly one: %+v", len(mine), runID, mine)
	}
	return mine[0]
}

func pending(t *testing.T, h *harness, runID string) bool {
	t.Helper()
	var p bool
	if err := h.env.DB.Get(&p, `SELECT pending FROM check_run_publications WHERE run_id = $1`, runID); err != nil {
		t.Fatal(err)
	}
	return p
}

func syncJobs(t *testing.T, h *harness, runID string) int {
	t.Helper()
	var n int
	if err := h.env.DB.Get(&n, `SELECT count(*) FROM river_job WHERE kind = 'check_run_sync' AND args->>'run_id' = $1`, runID); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCheckFollowsTheRunAndCancelCommitsFirst: a tracked run's check is
// created queued with the run as external ID and a link to its dashboard
// page; a sync with nothing new sends nothing; a cancel while the code
// host fails commits anyway, leaves the check pending, and the reconciler
// publishes it once the code host is back.
func TestCheckFollowsTheRunAndCancelCommitsFirst(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	r := h.newRun(t)
	h.track(t, r)
	if syncJobs(t, h, r.ID) != 1 {
		t.Fatal("tracking a run queued no sync job in its transaction")
	}
	if err := h.svc.Sync(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	c := h.only(t, r.ID)
	if c.Status != "queued" || c.DetailsURL != "https://dash.example.test/runs/"+r.ID || c.Name != "Cairn: network" ||
		!strings.Contains(c.Summary, r.ID) || c.Title == "" {
		t.Fatalf("check after the first sync: %+v", c)
	}

	// Identical payload: neither the observer nor a sync sends anything.
	for range 2 {
		if err := h.svc.Sync(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.WithTx(ctx, h.env.DB, func(tx *sqlx.Tx) error { return h.svc.RunSaved(ctx, tx, r) }); err != nil {
		t.Fatal(err)
	}
	if pending(t, h, r.ID) || syncJobs(t, h, r.ID) != 1 || h.only(t, r.ID).Writes != 1 ||
		h.fake.Calls(githubfake.RouteUpdateCheckRun) != 0 {
		t.Fatalf("an identical payload was re-sent or re-queued: writes %d, updates %d, jobs %d",
			h.only(t, r.ID).Writes, h.fake.Calls(githubfake.RouteUpdateCheckRun), syncJobs(t, h, r.ID))
	}

	// The code host fails; the cancel commits regardless.
	h.fake.Inject(githubfake.RouteUpdateCheckRun, githubfake.Fault{Status: http.StatusBadGateway}, githubfake.Fault{Status: http.StatusServiceUnavailable})
	h.cancel(t, r.ID)
	if !pending(t, h, r.ID) || syncJobs(t, h, r.ID) != 2 {
		t.Fatal("the cancel did not mark the check pending with a sync job in its transaction")
	}
	if err := h.svc.Sync(ctx, r.ID); err == nil {
		t.Fatal("a sync against a failing code host succeeded")
	}
	after, err := h.env.Server.V1Services().Runs.RunOwner(ctx, r.ID)
	if err != nil || after.Status != run.StatusCanceled {
		t.Fatalf("run after a failed check sync: %s, %v", after.Status, err)
	}
	var lastError string
	if err := h.env.DB.Get(&lastError, `SELECT last_error FROM check_run_publications WHERE run_id = $1`, r.ID); err != nil || lastError != "provider_status_502" {
		t.Fatalf("recorded failure %q, %v", lastError, err)
	}
	// The reconciler replays it (the second fault, then success).
	for i := 0; pending(t, h, r.ID); i++ {
		if i == 5 {
			t.Fatal("the reconciler never published the cancel")
		}
		time.Sleep(5 * time.Millisecond)
		if _, _, err := h.svc.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c = h.only(t, r.ID)
	if c.Status != "completed" || c.Conclusion != "cancelled" || c.CompletedAt == nil ||
		strings.Join(c.History, ",") != "queued,completed/cancelled" {
		t.Fatalf("check after the cancel: %+v", c)
	}
	// Nothing is pending any more: the reconciler sends nothing.
	updates := h.fake.Calls(githubfake.RouteUpdateCheckRun)
	if _, _, err := h.svc.Reconcile(ctx); err != nil || h.fake.Calls(githubfake.RouteUpdateCheckRun) != updates {
		t.Fatalf("the reconciler replayed a published check: %v", err)
	}
}

// TestLostCreateAnswerLeadsToOneCheck: the create reaches the code host
// but its answer is lost; the next sync finds the check among the
// commit's (on the second page, behind 120 newer checks of the same name)
// by external ID and patches it instead of creating a second one.
func TestLostCreateAnswerLeadsToOneCheck(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	r := h.newRun(t)
	h.trackAndLoseCreate(t, r)
	var stored *int64
	if err := h.env.DB.Get(&stored, `SELECT check_run_id FROM check_run_publications WHERE run_id = $1`, r.ID); err != nil || stored != nil {
		t.Fatalf("a check ID was stored without a verified answer: %v, %v", stored, err)
	}
	for i := range 120 {
		if _, _, err := h.client.Checks.CreateCheckRun(ctx, "acme", "infra", github.CreateCheckRunOptions{
			Name: "Cairn: network", HeadSHA: h.target.HeadSHA, ExternalID: github.String(fmt.Sprintf("run_other%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	h.cancel(t, r.ID)
	if _, _, err := h.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	c := h.only(t, r.ID)
	if h.fake.Calls(githubfake.RouteCreateCheckRun) != 121 || c.Conclusion != "cancelled" || pending(t, h, r.ID) {
		t.Fatalf("after recovery: %d creates, check %+v", h.fake.Calls(githubfake.RouteCreateCheckRun), c)
	}
	if h.fake.Calls(githubfake.RouteListCheckRuns) != 2 {
		t.Fatalf("%d list calls, want both pages read", h.fake.Calls(githubfake.RouteListCheckRuns))
	}
	var id int64
	if err := h.env.DB.Get(&id, `SELECT check_run_id FROM check_run_publications WHERE run_id = $1`, r.ID); err != nil || id != c.ID {
		t.Fatalf("stored check ID %d, want %d (%v)", id, c.ID, err)
	}
}

// TestSearchMatchesThisAppsChecksOnly: after a lost create, another app's
// check on the commit with the same name and the run ID as external_id
// (anyone with checks write can make one) is never patched: the search
// finds this app's own check. Without the app's ID the search fails
// closed: nothing is created or patched.
func TestSearchMatchesThisAppsChecksOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	r := h.newRun(t)
	h.trackAndLoseCreate(t, r)
	foreign := h.checks.Plant(githubfake.CheckRun{RepoID: 501, AppID: h.fake.AppID + 1, Name: "Cairn: network",
		HeadSHA: h.target.HeadSHA, ExternalID: r.ID, Status: "queued"})
	h.cancel(t, r.ID)

	blind := checkrun.NewService(h.env.DB, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), checkrun.Options{
		DashboardURL: "https://dash.example.test/", Clients: func(context.Context, int64) (*github.Client, error) { return h.client, nil },
		Lease: 5 * time.Second})
	if err := blind.Sync(ctx, r.ID); !errors.Is(err, checkrun.ErrNoAppID) {
		t.Fatalf("a search without the app's ID: %v", err)
	}
	// Two failures are on record (the lost create, the blind search): the
	// reconciler takes the publication up once their backoff (2 ms) passed.
	time.Sleep(50 * time.Millisecond)
	if _, _, err := h.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	var ours []githubfake.CheckRun
	for _, c := range h.checks.Runs(h.target.HeadSHA) {
		switch {
		case c.ID == foreign:
			if c.Writes != 0 || c.Status != "queued" {
				t.Fatalf("another app's check was patched: %+v", c)
			}
		case c.ExternalID == r.ID:
			ours = append(ours, c)
		}
	}
	if len(ours) != 1 || ours[0].Conclusion != "cancelled" || ours[0].AppID != h.fake.AppID ||
		h.fake.Calls(githubfake.RouteCreateCheckRun) != 1 || h.fake.Calls(githubfake.RouteUpdateCheckRun) != 1 {
		t.Fatalf("this app's checks %+v after %d creates and %d updates", ours, h.fake.Calls(githubfake.RouteCreateCheckRun),
			h.fake.Calls(githubfake.RouteUpdateCheckRun))
	}
	var id int64
	if err := h.env.DB.Get(&id, `SELECT check_run_id FROM check_run_publications WHERE run_id = $1`, r.ID); err != nil || id != ours[0].ID {
		t.Fatalf("stored check ID %d, want %d (%v)", id, ours[0].ID, err)
	}
}

// TestLeasePreventsDuplicateCreates: concurrent syncs of one publication
// create one check; the losers find the lease and step back.
func TestLeasePreventsDuplicateCreates(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	r := h.newRun(t)
	h.track(t, r)
	h.fake.Hook(githubfake.RouteCreateCheckRun, func(*http.Request) { time.Sleep(200 * time.Millisecond) })
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.svc.Sync(ctx, r.ID)
		}()
	}
	wg.Wait()
	leased := 0
	for _, err := range errs {
		switch {
		case errors.Is(err, checkrun.ErrLeased):
			leased++
		case err != nil:
			t.Fatal(err)
		}
	}
	if h.fake.Calls(githubfake.RouteCreateCheckRun) != 1 {
		t.Fatalf("%d creates under %d concurrent syncs (%d saw the lease)", h.fake.Calls(githubfake.RouteCreateCheckRun), n, leased)
	}
	h.only(t, r.ID)
}

// TestUntrackedRunsPublishNothing: a run without a check target has no
// publication and queues no sync job through its lifecycle.
func TestUntrackedRunsPublishNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.newRun(t)
	h.cancel(t, r.ID)
	var rows int
	if err := h.env.DB.Get(&rows, `SELECT count(*) FROM check_run_publications`); err != nil || rows != 0 || syncJobs(t, h, r.ID) != 0 {
		t.Fatalf("untracked run: %d publications, %d jobs, %v", rows, syncJobs(t, h, r.ID), err)
	}
	if h.fake.Calls(githubfake.RouteCreateCheckRun) != 0 {
		t.Fatal("an untracked run reached the code host")
	}
}

// TestTrackRefusesAnotherTarget: a run's target is fixed once recorded.
func TestTrackRefusesAnotherTarget(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.newRun(t)
	h.track(t, r)
	h.track(t, r) // same target: a replay
	other := h.target
	other.HeadSHA = strings.Repeat("b", 40)
	err := db.WithTx(context.Background(), h.env.DB, func(tx *sqlx.Tx) error { return h.svc.Track(context.Background(), tx, r, other) })
	if !errors.Is(err, checkrun.ErrTargetConflict) {
		t.Fatalf("retargeting a run: %v", err)
	}
	bad := h.target
	bad.HeadSHA = "HEAD"
	err = db.WithTx(context.Background(), h.env.DB, func(tx *sqlx.Tx) error { return h.svc.Track(context.Background(), tx, r, bad) })
	if !errors.Is(err, checkrun.ErrInvalidTarget) {
		t.Fatalf("a symbolic ref as head SHA: %v", err)
	}
}

// TestPublicationFailureLeavesOnlyItsCode: a failed publication is
// reported through the telemetry boundary as check_run_publication_failed
// with the run's ID and a fixed code: nothing of the provider's answer,
// the repository or the code host's address reaches the log.
func TestPublicationFailureLeavesOnlyItsCode(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.newRun(t)
	h.track(t, r)
	h.fake.Inject(githubfake.RouteCreateCheckRun, githubfake.Fault{Status: http.StatusBadGateway})
	if err := h.svc.Sync(context.Background(), r.ID); err == nil {
		t.Fatal("a sync the code host refused succeeded")
	}
	logs := h.logs.String()
	if !strings.Contains(logs, `"event":"check_run_publication_failed"`) || !strings.Contains(logs, `"code":"provider_status_502"`) ||
		!strings.Contains(logs, `"external_id":"`+r.ID+`"`) {
		t.Fatalf("no check_run_publication_failed event for the run: %s", logs)
	}
	for _, leaked := range []string{"acme", "infra", h.fake.URL, "Bad Gateway", "docs.github.com"} {
		if strings.Contains(logs, leaked) {
			t.Fatalf("%q reached the log: %s", leaked, logs)
		}
	}
}
