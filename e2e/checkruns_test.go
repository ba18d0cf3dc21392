package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"github.com/cairnhq/cairn/api/checkrun"
	"github.com/cairnhq/cairn/api/github/githubfake"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/run"
)

// TestCheckRunFollowsARealRun: a run of the real stack, tracked on a
// commit of the fake code host, plans in a sandbox, waits for approval and
// applies, and cairn-worker publishes its one check run queued, then in
// progress, then success, linking to the run's dashboard page.
func TestCheckRunFollowsARealRun(t *testing.T) {
	t.Parallel()
	fake := githubfake.Start(t)
	checks := githubfake.AttachChecks(fake)
	fake.AddRepository(githubfake.Repository{ID: 901, Owner: "acme", Name: "network"})
	fake.AddInstallation(githubfake.Installation{ID: 91, AccountLogin: "acme", Repositories: []int64{901}})
	sha := fake.Commit(901, "main", "network: three items", map[string]string{"main.tf": threeItemsConfig})
	s := runsStack(t, codeHostEnv(t, fake)...)
	m := s.newMember(t, "checks")
	ws := s.createWorkspace(t, m, "network", "us")
	cfg := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": threeItemsConfig})

	// The first run holds the workspace's queue at approval, so the second
	// waits pending and is tracked before anything moves it.
	_, first := s.createRun(t, m, ws, cfg, "plan_and_apply")
	first = s.waitRun(t, m, first.ID, 3*time.Minute, status("awaiting_approval"))
	_, second := s.createRun(t, m, ws, cfg, "plan_and_apply")
	if second.Status != "pending" {
		t.Fatalf("second run %s, want pending behind the first", second.Status)
	}
	conn, err := sqlx.Open("postgres", s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	inserter, err := river.NewClient(riverdatabasesql.New(conn.DB), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tracker := checkrun.NewService(conn, inserter, slog.New(slog.NewTextHandler(io.Discard, nil)), checkrun.Options{DashboardURL: s.DashboardURL})
	ctx := context.Background()
	if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
		var r run.Run
		if err := tx.GetContext(ctx, &r, `SELECT id, organization_id, workspace_id, kind, status, status_timestamps, updated_at
			FROM runs WHERE id = $1 FOR UPDATE`, second.ID); err != nil {
			return err
		}
		return tracker.Track(ctx, tx, r, checkrun.Target{InstallationID: 91, RepositoryID: 901, RepositoryOwner: "acme",
			RepositoryName: "network", HeadSHA: sha})
	}); err != nil {
		t.Fatal(err)
	}
	check := waitCheck(t, checks, sha, second.ID, func(c githubfake.CheckRun) bool { return c.Status == "queued" })
	if check.DetailsURL != s.DashboardURL+"/runs/"+second.ID {
		t.Fatalf("details URL %q", check.DetailsURL)
	}

	// Discarding the first run starts the second.
	if st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/runs/"+first.ID+"/actions/reject", mustJSON(first.binding()),
		m.mutate(uniqueKey("reject"))...); st != http.StatusOK {
		t.Fatalf("rejecting the first run: %d %s", st, body)
	}
	second = s.waitRun(t, m, second.ID, 3*time.Minute, status("awaiting_approval"))
	waitCheck(t, checks, sha, second.ID, func(c githubfake.CheckRun) bool {
		return c.Status == "in_progress" && strings.Contains(c.Title, "3 to add")
	})
	if st, body := s.approve(t, m, second); st != http.StatusOK {
		t.Fatalf("approving: %d %s", st, body)
	}
	s.waitRun(t, m, second.ID, 3*time.Minute, status("applied"))
	check = waitCheck(t, checks, sha, second.ID, func(c githubfake.CheckRun) bool { return c.Status == "completed" })
	if check.Conclusion != "success" || strings.Join(check.History, ",") != "queued,in_progress,completed/success" {
		t.Fatalf("check after the apply: %s %s, history %v", check.Status, check.Conclusion, check.History)
	}
	if n := len(checks.Runs(sha)); n != 1 {
		t.Fatalf("%d check runs on the commit, want one", n)
	}
	t.Logf("check run %d: %d provider writes for history %v", check.ID, check.Writes, check.History)
}

// waitCheck waits until the commit's check for runID satisfies done.
func waitCheck(t *testing.T, checks *githubfake.Checks, sha, runID string, done func(githubfake.CheckRun) bool) githubfake.CheckRun {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last []githubfake.CheckRun
	for time.Now().Before(deadline) {
		last = checks.Runs(sha)
		for _, c := range last {
			if c.ExternalID == runID && done(c) {
				return c
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("check for %s never reached the expected state: %+v", runID, last)
	return githubfake.CheckRun{}
}

// TestPushPublishesItsCheckRun: a signed push to the tracked branch
// creates a code-host run, which reserves its own check from the commit it
// pins; the run plans, waits for approval and applies, and the commit's one
// check ends success after being in progress.
func TestPushPublishesItsCheckRun(t *testing.T) {
	t.Parallel()
	fake := githubfake.Start(t)
	checks := githubfake.AttachChecks(fake)
	fake.AddRepository(githubfake.Repository{ID: 902, Owner: "acme", Name: "edge"})
	fake.AddInstallation(githubfake.Installation{ID: 92, AccountLogin: "acme", Repositories: []int64{902}})
	before := fake.Commit(902, "main", "start", map[string]string{"README.md": "edge\n"})
	s := runsStack(t, codeHostEnv(t, fake)...)
	m := s.newMember(t, "pushcheck")
	ws := s.createWorkspace(t, m, "edge", "us")
	s.installApp(t, m, fake, 92)
	if st := s.apiJSON(t, http.MethodPut, "/v1/workspaces/"+ws+"/source", map[string]any{"repository_id": 902,
		"tracked_branch": "main", "working_directory": "", "trigger_paths": []string{}}, nil, m.mutate(uniqueKey("source"))...); st != http.StatusCreated {
		t.Fatalf("source settings: %d", st)
	}
	sha := fake.Commit(902, "main", "edge: three items", map[string]string{"README.md": "edge\n", "main.tf": threeItemsConfig})
	d := githubfake.NewDelivery("push", fake.Push(t, 92, 902, githubfake.PushOptions{Branch: "main", Before: before, After: sha,
		Paths: [][]string{{"main.tf"}}}))
	req, err := d.Request(context.Background(), s.APIURL+"/v1/github/webhooks", e2eWebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("push delivery: %d %s", resp.StatusCode, body)
	}
	r := s.newestRun(t, m, ws, 3*time.Minute, status("awaiting_approval"))
	waitCheck(t, checks, sha, r.ID, func(c githubfake.CheckRun) bool {
		return c.Status == "in_progress" && strings.Contains(c.Title, "3 to add")
	})
	if st, body := s.approve(t, m, r); st != http.StatusOK {
		t.Fatalf("approving: %d %s", st, body)
	}
	s.waitRun(t, m, r.ID, 3*time.Minute, status("applied"))
	check := waitCheck(t, checks, sha, r.ID, func(c githubfake.CheckRun) bool { return c.Status == "completed" })
	history := strings.Join(check.History, ",")
	if check.Conclusion != "success" || (history != "queued,in_progress,completed/success" && history != "in_progress,completed/success") {
		t.Fatalf("check after the apply: %s %s, history %v", check.Status, check.Conclusion, check.History)
	}
	if n := len(checks.Runs(sha)); n != 1 {
		t.Fatalf("%d check runs on the commit, want one", n)
	}
	t.Logf("push check run: history %v in %d provider writes", check.History, check.Writes)

	// The run page's header names the commit from the source provenance.
	page := signInToDashboard(t, s, m.email).page(t, "/runs/"+r.ID)
	for _, want := range []string{`id="commit-message">edge: three items<`, `href="` + fake.URL + `/acme/edge/commit/` + sha + `"`,
		`<code id="source-ref">refs/heads/main</code>`, `<code id="working-directory">/</code>`} {
		if !strings.Contains(page, want) {
			t.Fatalf("run page lacks %s:\n%s", want, page)
		}
	}

	// A same-repository pull request gets a speculative run; its check
	// ends success with the policy outcome in the summary and the plan's
	// counts against the applied state (a fourth item to add).
	head := fake.Commit(902, "feature", "edge: four items", map[string]string{"README.md": "edge\n",
		"main.tf": strings.Replace(threeItemsConfig, "count = 3", "count = 4", 1)})
	fake.SetPullFiles(902, 7, []string{"main.tf"})
	pr := githubfake.NewDelivery("pull_request", fake.PullRequest(t, 92, 902, githubfake.PullOptions{Action: "opened", Number: 7,
		Base: "main", HeadRef: "feature", HeadSHA: head}))
	if req, err = pr.Request(context.Background(), s.APIURL+"/v1/github/webhooks", e2eWebhookSecret); err != nil {
		t.Fatal(err)
	}
	if resp, err = s.Client.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("pull request delivery: %d %s", resp.StatusCode, body)
	}
	spec := s.newestRun(t, m, ws, 3*time.Minute, func(r runView) bool { return r.Kind == "speculative" && r.Status == "planned_and_finished" })
	check = waitCheck(t, checks, head, spec.ID, func(c githubfake.CheckRun) bool { return c.Status == "completed" })
	if check.Conclusion != "success" || !strings.Contains(check.Summary, "Policy: `pass`") || !strings.Contains(check.Title, "1 to add") {
		t.Fatalf("pull request check: %s %s %q %q", check.Status, check.Conclusion, check.Title, check.Summary)
	}
}
