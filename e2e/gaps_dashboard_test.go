package e2e

// The dashboard rows of SPEC-GAPS §1, proven in Chromium against the real
// BFF and API:
//   - TestDashboardRunPageAndRunsList: "Why the run ended" only for ended
//     runs; a failed request shows as unavailable (console log read, runs
//     list with the API stopped); every route group's probe (workspace
//     creation, new-run post); the run header's author, copy button and live
//     duration; the terminal-reason panel of a real plan failure; stage
//     timeline details; no downloads section when nothing is downloadable;
//     runs list rows and refresh.
//   - TestDashboardRunEndingsAndPolicyUpload: the terminal-reason panel of
//     expired and plan_credentials_required runs; policy upload retry and
//     status polling.
//   - TestDashboardSourceInstall: the source settings page's Install, and
//     an unselectable current credential version shown by its exact ID.

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/api/github/githubfake"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// textOf is the trimmed text of the first element matching selector, or ""
// when none does.
func textOf(t *testing.T, ctx context.Context, selector string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const el = document.querySelector(`+jsString(selector)+`); return el ? el.textContent.trim() : ""; })()`))
	if err != nil {
		t.Fatalf("reading %s: %v", selector, err)
	}
	return s
}

// evalBool evaluates a JavaScript expression that yields a boolean.
func evalBool(t *testing.T, ctx context.Context, js string) bool {
	t.Helper()
	b, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return b
}

// finalPlanLines is what the run page's final-failure tail must show: the
// last eight lines of the plan phase's log among its newest hundred chunks,
// read straight from the API.
func (s *Stack) finalPlanLines(t *testing.T, m member, runID string) []string {
	t.Helper()
	var chunks []struct {
		Phase string `json:"phase"`
		Body  string `json:"body"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/runs/"+runID+"/logs?tail=100", nil, &chunks, m.cookie()...); st != http.StatusOK {
		t.Fatalf("log tail: %d", st)
	}
	var text strings.Builder
	for _, c := range chunks {
		if c.Phase == "plan" {
			text.WriteString(c.Body)
		}
	}
	lines := strings.Split(strings.TrimRight(text.String(), "\n"), "\n")
	return lines[max(0, len(lines)-8):]
}

// stopAPI kills the stack's cairn-api and waits until it is gone: every
// read the dashboard makes from then on fails for real.
func (s *Stack) stopAPI(t *testing.T) {
	t.Helper()
	pid := s.PID("api")
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
}

var durationText = regexp.MustCompile(`^(\d+ ms|\d+\.\d s|\d+ m \d\d s|\d+ h \d\d m)$`)

// TestDashboardRunPageAndRunsList proves the run page and runs list in a
// real browser against the real BFF and API: the header names the author,
// copies the run ID and counts its duration up while the run is live; the
// runs list shows each row's duration and relative time with its UTC
// tooltip, and re-reads its first page while a listed run is not terminal;
// the stage timeline shows durations, plan counts or "not finished", and an
// applied run opens its apply; a plan failure explains itself with its
// code and at most eight final log lines and has no downloads section; a
// run in recovery (which carries a reason but has not ended) shows no
// "Why the run ended"; with the gate closed, workspace creation and the
// new-run form post are refused by their probes while account pages still
// render; and with the API stopped a console whose log read fails says
// "unavailable", as does the runs list.
func TestDashboardRunPageAndRunsList(t *testing.T) {
	t.Parallel()
	s := runsStack(t, "CAIRN_APPLY_INTERRUPT_GRACE=5s")
	m := s.newMember(t, "gapdash")
	ws := s.createWorkspace(t, m, "gaps", "us")

	// A plan that fails, a plan waiting for approval, and an apply canceled
	// mid-way that lands in recovery with a terminal reason recorded.
	bad := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": `resource "terraform_data" "net" { input = var.missing }`})
	_, failed := s.createRun(t, m, ws, bad, "plan_only")
	failed = s.waitRun(t, m, failed.ID, 3*time.Minute, status("errored"))
	if failed.TerminalReason == nil || *failed.TerminalReason != "plan_failed" {
		t.Fatalf("failed plan's reason: %+v", failed.TerminalReason)
	}
	_, recovering := s.applyingMidway(t, m, "recovering", 197)
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+recovering.ID+"/actions/cancel", nil, nil, m.mutate(uniqueKey("cancel"))...); st != http.StatusOK {
		t.Fatalf("cancel: %d", st)
	}
	recovering = s.waitRun(t, m, recovering.ID, 2*time.Minute, status("recovery_required"))
	if recovering.TerminalReason == nil {
		t.Fatal("the run in recovery records no reason: it cannot show whether the page hides it")
	}
	good := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": `resource "terraform_data" "item" { input = "one" }`})
	_, live := s.createRun(t, m, ws, good, "plan_and_apply")
	live = s.waitRun(t, m, live.ID, 3*time.Minute, status("awaiting_approval"))

	ctx := newBrowserWithin(t, walkTimeout)
	if _, err := chromedp.Run(ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		for _, name := range []string{"clipboard-read", "clipboard-write"} {
			if _, err := chromedp.Call(ctx, browser.SetPermission, browser.SetPermissionParams{
				Permission: &browser.PermissionDescriptor{Name: name, AllowWithoutSanitization: true},
				Setting:    browser.PermissionSettingGranted, Origin: s.DashboardURL}); err != nil {
				return err
			}
		}
		return nil
	})); err != nil {
		t.Fatalf("granting the clipboard: %v", err)
	}
	signInThroughTheDashboard(t, ctx, s, m)

	// The live run's header: the author by name, a copy button that copies
	// the run ID, and a duration that counts up.
	browse(t, ctx, "opening the live run", chromedp.Navigate(s.DashboardURL+"/runs/"+live.ID), chromedp.WaitVisible(chromedp.CSS("#stage-Plan")))
	if author := textOf(t, ctx, "#run-author"); author != "gapdash" {
		t.Errorf("run header author %q, want the member's name", author)
	}
	if n := count(t, ctx, "#failure-title"); n != 0 {
		t.Error("a run waiting for approval explains why it ended")
	}
	browse(t, ctx, "copying the run ID", chromedp.Click(chromedp.CSS("button[data-copy=run-id]")))
	waitText(t, ctx, "button[data-copy=run-id]", "Copied")
	copied, err := chromedp.Run(ctx, chromedp.Evaluate[string]("navigator.clipboard.readText()", chromedp.EvalAwaitPromise))
	if err != nil || copied != live.ID {
		t.Errorf("clipboard holds %q (%v), want %s", copied, err, live.ID)
	}
	first := textOf(t, ctx, "[data-live-duration]")
	time.Sleep(2200 * time.Millisecond)
	if later := textOf(t, ctx, "[data-live-duration]"); later == first || !strings.HasSuffix(later, " s") {
		t.Errorf("the live duration did not count up: %q then %q", first, later)
	}
	if plan := textOf(t, ctx, "#stage-Plan .stage-extra"); plan != "+1 ~0 −0" {
		t.Errorf("plan stage counts %q, want +1 ~0 −0", plan)
	}
	if st := textOf(t, ctx, "#stage-Approval .stage-state"); st != "waiting" {
		t.Errorf("approval stage of a waiting run is %q", st)
	}

	// The runs list: every row has a duration and a relative creation time
	// with its absolute UTC time as tooltip; while a listed run is live the
	// first page re-reads itself, without a navigation.
	browse(t, ctx, "opening the runs list", chromedp.Navigate(s.DashboardURL+"/runs"), chromedp.WaitVisible(chromedp.CSS("table.runs")))
	for _, r := range []string{failed.ID, recovering.ID, live.ID} {
		row := "#runs-first tr[data-run=" + r + "]"
		if d := textOf(t, ctx, row+" td:nth-child(5)"); !durationText.MatchString(d) {
			t.Errorf("run %s lists duration %q", r, d)
		}
		var created struct {
			CreatedAt time.Time `json:"created_at"`
		}
		s.apiJSON(t, http.MethodGet, "/v1/runs/"+r, nil, &created, m.cookie()...)
		title, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.querySelector("+jsString(row+" time")+").title"))
		if want := created.CreatedAt.UTC().Format("2006-01-02 15:04:05 UTC"); err != nil || title != want {
			t.Errorf("run %s created tooltip %q, want %q", r, title, want)
		}
		if rel := textOf(t, ctx, row+" time"); rel != "just now" && !strings.HasSuffix(rel, " ago") {
			t.Errorf("run %s created %q, not a relative time", r, rel)
		}
	}
	// Each row names its workspace as the API's run summary does; the
	// workspace filter loads its choices after the page, and a filtered
	// list keeps its choice named.
	if name := textOf(t, ctx, "#runs-first tr[data-run="+live.ID+"] td:nth-child(2)"); name != "gaps" {
		t.Errorf("the runs list names the workspace %q, want gaps", name)
	}
	waitText(t, ctx, "#workspace option[value="+ws+"]", "gaps")
	browse(t, ctx, "runs of one workspace", chromedp.Navigate(s.DashboardURL+"/runs?workspace="+ws), chromedp.WaitVisible(chromedp.CSS("table.runs")))
	waitText(t, ctx, "#workspace option[value="+ws+"]", "gaps")
	if !evalBool(t, ctx, "document.querySelector('#workspace').value === "+jsString(ws)) {
		t.Error("the filtered runs list does not keep its workspace selected")
	}
	browse(t, ctx, "back to all runs", chromedp.Navigate(s.DashboardURL+"/runs"), chromedp.WaitVisible(chromedp.CSS("table.runs")))
	if !evalBool(t, ctx, "window.__sameDocument = true; document.querySelector('#runs-first').hasAttribute('hx-get')") {
		t.Fatal("a list with a live run does not re-read its first page")
	}
	if st, body := s.approve(t, m, live); st != http.StatusOK {
		t.Fatalf("approve: %d %s", st, body)
	}
	s.waitRun(t, m, live.ID, 3*time.Minute, status("applied"))
	waitText(t, ctx, "#runs-first tr[data-run="+live.ID+"]", "applied")
	if !evalBool(t, ctx, "window.__sameDocument === true") {
		t.Fatal("the runs list navigated instead of re-reading its first page")
	}
	// The recovery run is not terminal, so the list keeps re-reading.
	if !evalBool(t, ctx, "document.querySelector('#runs-first').hasAttribute('hx-get')") {
		t.Error("the list stopped re-reading while a run is in recovery")
	}
	browse(t, ctx, "only ended runs", chromedp.Navigate(s.DashboardURL+"/runs?status=applied"), chromedp.WaitVisible(chromedp.CSS("table.runs")))
	if evalBool(t, ctx, "document.querySelector('#runs-first').hasAttribute('hx-get')") {
		t.Error("a list of ended runs keeps re-reading")
	}

	// The applied run: every stage's duration, the plan's counts, the apply
	// stage open by default and the others closed, a duration that stopped,
	// and downloads.
	browse(t, ctx, "opening the applied run", chromedp.Navigate(s.DashboardURL+"/runs/"+live.ID), chromedp.WaitVisible(chromedp.CSS("#stage-Apply")))
	waitText(t, ctx, "#run-status", "applied")
	for _, st := range []string{"Plan", "Approval", "Apply"} {
		if d := textOf(t, ctx, "#stage-"+st+" .stage-time"); !durationText.MatchString(d) {
			t.Errorf("%s stage duration %q", st, d)
		}
		if s := textOf(t, ctx, "#stage-"+st+" .stage-state"); s != "succeeded" {
			t.Errorf("%s stage is %q", st, s)
		}
	}
	if d := textOf(t, ctx, "#stage-Policy .stage-time"); d != "—" && !durationText.MatchString(d) {
		t.Errorf("Policy stage duration %q", d)
	}
	if plan := textOf(t, ctx, "#stage-Plan .stage-extra"); plan != "+1 ~0 −0" {
		t.Errorf("applied plan stage counts %q", plan)
	}
	for st, open := range map[string]bool{"Plan": false, "Policy": false, "Approval": false, "Apply": true} {
		if got := evalBool(t, ctx, "document.querySelector('#stage-"+st+"').open"); got != open {
			t.Errorf("applied run: %s stage open = %v, want %v", st, got, open)
		}
	}
	ended := textOf(t, ctx, "[data-live-duration]")
	time.Sleep(1500 * time.Millisecond)
	if again := textOf(t, ctx, "[data-live-duration]"); again != ended || !evalBool(t, ctx, "document.querySelector('[data-live-duration]').hasAttribute('data-ended')") {
		t.Errorf("an ended run's duration still counts: %q then %q", ended, again)
	}
	if n := count(t, ctx, "#downloads #download-redacted"); n != 1 {
		t.Error("the applied run offers no redacted plan")
	}
	if n := count(t, ctx, "#failure-title"); n != 0 {
		t.Error("an applied run explains why it ended")
	}

	// The failed plan: one sentence, the raw code, at most eight final lines
	// of the plan log, "not finished" instead of counts, and no downloads
	// section since nothing is downloadable.
	browse(t, ctx, "opening the failed run", chromedp.Navigate(s.DashboardURL+"/runs/"+failed.ID), chromedp.WaitVisible(chromedp.CSS("#failure-title")))
	panel := textOf(t, ctx, "section.failure")
	if !strings.Contains(panel, "The plan failed.") || !strings.Contains(panel, "plan_failed") {
		t.Errorf("failure panel %q", panel)
	}
	tail, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.querySelector('#final-log').textContent"))
	if err != nil {
		t.Fatal(err)
	}
	shown := strings.Split(strings.TrimRight(tail, "\n"), "\n")
	if want := s.finalPlanLines(t, m, failed.ID); len(shown) > 8 || strings.Join(shown, "\n") != strings.Join(want, "\n") {
		t.Errorf("final log tail shows %d lines:\n%s\nwant the plan log's last lines:\n%s", len(shown), tail, strings.Join(want, "\n"))
	}
	if plan := textOf(t, ctx, "#stage-Plan .stage-extra"); plan != "not finished" {
		t.Errorf("failed plan stage shows %q, want the not-finished note", plan)
	}
	if n := count(t, ctx, "#downloads"); n != 0 {
		t.Error("a run with nothing downloadable has a downloads section")
	}

	// The run in recovery: its reason is recorded, but it has not ended.
	browse(t, ctx, "opening the run in recovery", chromedp.Navigate(s.DashboardURL+"/runs/"+recovering.ID), chromedp.WaitVisible(chromedp.CSS("#recovery")))
	if n := count(t, ctx, "#failure-title"); n != 0 {
		t.Errorf("a run in recovery (%s) explains why it ended", *recovering.TerminalReason)
	}
	screenshot(t, ctx, "gaps-recovery")

	// Back on the failed run with every stage closed, so its console has
	// not read the log yet; a second tab closes the launch gate.
	browse(t, ctx, "reopening the failed run", chromedp.Navigate(s.DashboardURL+"/runs/"+failed.ID), chromedp.WaitVisible(chromedp.CSS("#stage-Plan")))
	if evalBool(t, ctx, "document.querySelector('#stage-Plan').open") {
		t.Fatal("the failed plan's stage opened by itself")
	}
	archive := filepath.Join(t.TempDir(), "config.tar.gz")
	if err := os.WriteFile(archive, devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "x" {}`}), 0o600); err != nil {
		t.Fatal(err)
	}
	creating, cancelCreating := chromedp.NewContext(ctx)
	defer cancelCreating()
	browse(t, creating, "opening the workspace form",
		chromedp.Navigate(s.DashboardURL+"/workspaces"),
		chromedp.WaitVisible(chromedp.CSS("#ws-name")),
		chromedp.SendKeys(chromedp.CSS("#ws-name"), "after-the-gate"),
	)
	starting, cancelStarting := chromedp.NewContext(ctx)
	defer cancelStarting()
	browse(t, starting, "opening the new-run form",
		chromedp.Navigate(s.DashboardURL+"/workspaces/"+ws+"/start"),
		chromedp.WaitVisible(chromedp.CSS("#start-run")),
		chromedp.SendKeys(chromedp.CSS("#run-message"), "after the gate"),
		chromedp.SetUploadFiles(chromedp.CSS("#run-archive"), []string{archive}),
	)
	// The probes refuse before the API sees a mutation: neither a workspace
	// creation nor the archive's upload reaches it.
	mutations := func() int {
		return strings.Count(s.Logs(), `"method":"POST","route":"/v1/workspaces`) +
			strings.Count(s.Logs(), `"method":"POST","route":"/v1/projects"`)
	}
	before := mutations()
	rewriteControl(t, s, "e2e: close the gate", func(doc map[string]any) { doc["public_gate"] = false })
	browse(t, creating, "creating a workspace with the gate closed", chromedp.Submit(chromedp.CSS("#ws-name")), chromedp.WaitVisible(chromedp.CSS(".unavailable-panel")))
	waitText(t, creating, ".unavailable-panel", "503")
	browse(t, starting, "starting a run with the gate closed", chromedp.Click(chromedp.CSS("#start-run")), chromedp.WaitVisible(chromedp.CSS(".unavailable-panel")))
	waitText(t, starting, ".unavailable-panel", "503")
	if after := mutations(); after != before {
		t.Errorf("%d workspace, project or configuration posts reached the API past a closed gate", after-before)
	}
	var names []struct{ Name string }
	s.apiJSON(t, http.MethodGet, "/v1/workspaces?limit=100", nil, &names, m.cookie()...)
	for _, w := range names {
		if w.Name == "after-the-gate" {
			t.Fatal("a workspace was created past a closed gate")
		}
	}
	var runs []struct{ Message string }
	s.apiJSON(t, http.MethodGet, "/v1/runs?limit=100", nil, &runs, m.cookie()...)
	for _, r := range runs {
		if r.Message == "after the gate" {
			t.Fatal("a run was started past a closed gate")
		}
	}
	// The account's own pages are not organization route groups: they
	// render with the gate closed, so an account can still switch
	// organizations and revoke its agents.
	browse(t, creating, "organizations with the gate closed", chromedp.Navigate(s.DashboardURL+"/organizations"), chromedp.WaitVisible(chromedp.CSS("#members-title")))
	browse(t, creating, "agents with the gate closed", chromedp.Navigate(s.DashboardURL+"/agents"), chromedp.WaitVisible(chromedp.CSS("#agents-title")))
	cancelCreating()
	cancelStarting()

	// The API stops: the console's log read fails and says so, with
	// Refresh log; the runs list renders unavailable, never empty.
	s.stopAPI(t)
	browse(t, ctx, "opening the plan console", chromedp.Click(chromedp.CSS("#stage-Plan > summary")))
	waitText(t, ctx, "#stage-Plan .log-unavailable", "unavailable")
	if !evalBool(t, ctx, "!document.querySelector('#stage-Plan .refresh-log').hidden") {
		t.Error("a failed log read offers no Refresh log")
	}
	screenshot(t, ctx, "gaps-console-unavailable")
	browse(t, ctx, "runs with the API stopped", chromedp.Navigate(s.DashboardURL+"/runs"), chromedp.WaitVisible(chromedp.CSS(".unavailable-panel")))
	if n := count(t, ctx, "#runs-first"); n != 0 {
		t.Error("the runs list renders a table with the API stopped")
	}
}

// policyChecks counts the page's reads of a policy version's build status.
func policyChecks(t *testing.T, ctx context.Context) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`performance.getEntriesByType("resource").filter(e => e.name.includes("/v1/policy-versions/")).length`))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// uploadKey is the idempotency key the policy upload keeps for its archive
// and workspace.
func uploadKey(t *testing.T, ctx context.Context) string {
	t.Helper()
	k, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.parse(sessionStorage.getItem("cairn.uploadKey") || "{}").key || ""`))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestDashboardRunEndingsAndPolicyUpload proves, in a real browser, the
// reason panel of two run endings that link onward: an expired plan says a
// new run starts from a push or the CLI and links to the source settings,
// and a run whose credential version was revoked links to the cloud-access
// settings, each with its raw code. With the worker stopped, a policy
// upload retried with the same archive and workspace reuses its
// idempotency key (the same version), a different archive or workspace
// rotates it, the build status is checked at most twelve times before the
// page pauses on "still building", and Refresh status opens another
// bounded window that sees the version published.
func TestDashboardRunEndingsAndPolicyUpload(t *testing.T) {
	t.Parallel()
	s := runsStack(t, "CAIRN_APPROVAL_TIMEOUT=6s")
	m := s.newMember(t, "gapends")
	ws := s.createWorkspace(t, m, "endings", "us")
	other := s.createWorkspace(t, m, "elsewhere", "us")

	cfg := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": `resource "terraform_data" "undecided" { input = "x" }`})
	_, expired := s.createRun(t, m, ws, cfg, "plan_and_apply")
	expired = s.waitRun(t, m, expired.ID, 3*time.Minute, status("expired", "errored", "applied"))
	if expired.Status != "expired" {
		t.Fatalf("undecided run ended %s", expired.Status)
	}

	// The worker stops: a run pinned to a credential version that is then
	// revoked, and policy builds, wait for it.
	p, v := s.credentialProfileWith(t, m, ws, "generic_secret", map[string]any{"environment": map[string]string{"TF_VAR_db_password": "x"}}, func([]byte) {})
	secretCfg := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": genericSecretConfig})
	s.StopWorker(t, time.Minute)
	_, blocked := s.createRun(t, m, ws, secretCfg, "plan_and_apply")
	if st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/revoke",
		[]byte(`{}`), append(m.mutate(uniqueKey("revoke")), "Content-Type", "application/json")...); st != http.StatusOK {
		t.Fatalf("revoke: %d %s", st, body)
	}
	var set struct{ ID string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/policy-sets", map[string]string{"name": "uploads"}, &set, m.mutate(uniqueKey("set"))...); st != http.StatusCreated {
		t.Fatalf("policy set: %d", st)
	}
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.tar.gz"), filepath.Join(dir, "second.tar.gz")
	if os.WriteFile(first, policyArchive(t, "always-pass"), 0o600) != nil || os.WriteFile(second, policyArchive(t, "require-tags"), 0o600) != nil {
		t.Fatal("writing the archives")
	}

	ctx := newBrowserWithin(t, walkTimeout)
	signInThroughTheDashboard(t, ctx, s, m)
	upload := func(what, file, want string) string {
		t.Helper()
		// The status is cleared first, so the wait sees this upload's answer.
		evalBool(t, ctx, "document.querySelector('#upload-status').textContent = ''; true")
		browse(t, ctx, what, chromedp.SetUploadFiles(chromedp.CSS("#upload-file"), []string{file}), chromedp.Click(chromedp.CSS("#upload-button")))
		waitText(t, ctx, "#upload-status", want)
		return uploadKey(t, ctx)
	}
	browse(t, ctx, "opening the policies tab", chromedp.Navigate(s.DashboardURL+"/workspaces/"+ws+"/policies"), chromedp.WaitVisible(chromedp.CSS("#upload-file")))
	key := upload("uploading", first, "Version 1 is building")
	if retried := upload("retrying the same archive", first, "Version 1 is building"); retried != key {
		t.Errorf("a retry of the same archive and workspace changed the key: %s then %s", key, retried)
	}
	rotated := upload("uploading another archive", second, "Version 2 is building")
	if rotated == key {
		t.Error("another archive kept the key")
	}
	// Three uploads on this page: only the newest window of checks runs.
	checked := policyChecks(t, ctx)
	time.Sleep(5500 * time.Millisecond)
	if n := policyChecks(t, ctx) - checked; n > 3 {
		t.Errorf("%d build status checks in 5.5 s after three uploads: more than one window is running", n)
	}
	browse(t, ctx, "opening the other workspace's policies", chromedp.Navigate(s.DashboardURL+"/workspaces/"+other+"/policies"), chromedp.WaitVisible(chromedp.CSS("#upload-file")))
	if elsewhere := upload("uploading the same archive elsewhere", second, "Version 3 is building"); elsewhere == rotated {
		t.Error("another workspace kept the key")
	}
	var versions []policyVersion
	s.apiJSON(t, http.MethodGet, "/v1/policy-sets/"+set.ID+"/versions", nil, &versions, m.cookie()...)
	if len(versions) != 3 {
		t.Errorf("the set has %d versions, want 3 (the retry replayed the first)", len(versions))
	}

	// Pending for 30 seconds: twelve checks, then a pause.
	watched := time.Now()
	waitText(t, ctx, "#upload-status", "still building")
	if took := time.Since(watched); took < 25*time.Second {
		t.Errorf("checks paused after %s, before 30 s", took)
	}
	if !evalBool(t, ctx, "!document.querySelector('#upload-refresh').hidden") {
		t.Fatal("no Refresh status after the pause")
	}
	if n := policyChecks(t, ctx); n != 12 {
		t.Errorf("%d build status checks before the pause, want 12", n)
	}
	time.Sleep(5 * time.Second)
	if n := policyChecks(t, ctx); n != 12 {
		t.Errorf("%d build status checks 5 s into the pause, want 12", n)
	}
	s.StartWorker(t)
	browse(t, ctx, "refreshing the status", chromedp.Click(chromedp.CSS("#upload-refresh")))
	waitText(t, ctx, "#upload-status", "is published")
	if n := policyChecks(t, ctx); n <= 12 || n > 24 {
		t.Errorf("%d checks after Refresh status, want another bounded window", n)
	}
	expectNoExceptions(t, ctx)

	// The two endings that link onward.
	blocked = s.waitRun(t, m, blocked.ID, 2*time.Minute, status("plan_credentials_required", "errored", "awaiting_approval"))
	if blocked.Status != "plan_credentials_required" {
		t.Fatalf("run after the revoke: %s", blocked.Status)
	}
	browse(t, ctx, "opening the expired run", chromedp.Navigate(s.DashboardURL+"/runs/"+expired.ID), chromedp.WaitVisible(chromedp.CSS("#failure-title")))
	panel := textOf(t, ctx, "section.failure")
	if !strings.Contains(panel, "a new run starts from a push to the tracked branch or from the CLI") || !strings.Contains(panel, "approval_deadline_passed") {
		t.Errorf("expired run's panel %q", panel)
	}
	if href := textOf(t, ctx, "section.failure a#source-settings-link"); href == "" || count(t, ctx, "section.failure a[href='/workspaces/"+ws+"/settings/source']") != 1 {
		t.Error("the expired run does not link to the source settings")
	}
	if n := count(t, ctx, "#final-log"); n != 0 {
		t.Error("an expired run shows a log tail")
	}
	browse(t, ctx, "opening the blocked run", chromedp.Navigate(s.DashboardURL+"/runs/"+blocked.ID), chromedp.WaitVisible(chromedp.CSS("#failure-title")))
	panel = textOf(t, ctx, "section.failure")
	if !strings.Contains(panel, "cloud credentials were unavailable") || !strings.Contains(panel, *blocked.TerminalReason) {
		t.Errorf("blocked run's panel %q", panel)
	}
	if count(t, ctx, "section.failure a[href='/workspaces/"+ws+"/settings/cloud-access']") != 1 {
		t.Error("the blocked run does not link to the cloud-access settings")
	}
	screenshot(t, ctx, "gaps-credentials-required")
}

// TestDashboardSourceInstall: before the code-host app is installed, the
// source settings page offers Install; a reader without vcs:install sees
// it disabled, and an owner's click starts the installation at the code
// host's install page with a signed state. Once installed, a saved
// pull-request credential version that is then revoked stays selected and
// shown by its exact ID.
func TestDashboardSourceInstall(t *testing.T) {
	t.Parallel()
	fake := githubfake.Start(t)
	s := fakeAppStack(t, fake)
	owner := s.newMember(t, "srcinstall")
	ws := s.createWorkspace(t, owner, "platform", "us")
	readerEmail := s.onlyMemberOf(t, owner, "src-install-reader", "reader").email
	page := s.DashboardURL + "/workspaces/" + ws + "/settings/source"

	reader := newBrowser(t)
	signInAs(t, reader, s, readerEmail)
	browse(t, reader, "the reader opens source settings", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#install")))
	if !evalBool(t, reader, "document.querySelector('#install').disabled") {
		t.Error("Install is enabled for a reader without vcs:install")
	}
	waitText(t, reader, "section[aria-labelledby=installation]", "vcs:install")

	admin := newBrowser(t)
	signInAs(t, admin, s, owner.email)
	browse(t, admin, "the owner opens source settings", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#install")))
	if evalBool(t, admin, "document.querySelector('#install').disabled") {
		t.Fatal("Install is disabled for an owner")
	}
	browse(t, admin, "installing", chromedp.Click(chromedp.CSS("#install")))
	want := fake.URL + "/github-apps/cairn-e2e/installations/new?state="
	deadline := time.Now().Add(30 * time.Second)
	for {
		loc, _ := chromedp.Run(admin, chromedp.Location())
		if strings.HasPrefix(loc, want) && len(loc) > len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Install went to %s, want the code host's install page %s…", loc, want)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A current pull-request credential version that stops being
	// selectable (revoked) stays shown by its exact ID.
	fake.AddRepository(githubfake.Repository{ID: 811, Owner: "acme", Name: "infra"})
	fake.AddInstallation(githubfake.Installation{ID: 91, AccountLogin: "acme", Repositories: []int64{811}})
	s.installApp(t, owner, fake, 91)
	rewriteControl(t, s, "e2e: aws federation on", func(doc map[string]any) {
		doc["federation_providers"].(map[string]any)["aws"] = true
	})
	var profile credentialProfile
	if st := s.apiJSON(t, http.MethodPost, "/v1/workspaces/"+ws+"/credential-profiles", map[string]string{"provider": "aws"}, &profile,
		owner.mutate(uniqueKey("cpr"))...); st != http.StatusCreated {
		t.Fatalf("credential profile: %d", st)
	}
	var version credentialVersion
	if st := s.apiJSON(t, http.MethodPost, "/v1/credential-profiles/"+profile.ID+"/versions", map[string]any{"phase": "speculative_plan",
		"configuration": map[string]string{"role_arn": "arn:aws:iam::123456789012:role/cairn-pr"}}, &version, owner.mutate(uniqueKey("cpv"))...); st != http.StatusCreated {
		t.Fatalf("speculative_plan version: %d", st)
	}
	versionPath := "/v1/credential-profiles/" + profile.ID + "/versions/" + version.ID
	if st := s.apiJSON(t, http.MethodPost, versionPath+"/actions/verify", nil, nil, owner.mutate(uniqueKey("verify"))...); st != http.StatusOK {
		t.Fatalf("verify: %d", st)
	}
	if st := s.apiJSON(t, http.MethodPut, "/v1/workspaces/"+ws+"/source", map[string]any{"repository_id": 811, "tracked_branch": "main",
		"working_directory": "", "trigger_paths": []string{}, "speculative_credential_version_id": version.ID}, nil,
		owner.mutate(uniqueKey("source"))...); st != http.StatusOK && st != http.StatusCreated {
		t.Fatalf("saving the source: %d", st)
	}
	browse(t, admin, "the version is selectable", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#source-form")))
	if n := count(t, admin, "#unselectable"); n != 0 {
		t.Fatal("a verified current version is called unselectable")
	}
	if st, body := call(t, s.Client, http.MethodPost, s.APIURL+versionPath+"/actions/revoke", []byte(`{}`),
		append(owner.mutate(uniqueKey("revoke")), "Content-Type", "application/json")...); st != http.StatusOK {
		t.Fatalf("revoke: %d %s", st, body)
	}
	browse(t, admin, "the version was revoked", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#unselectable")))
	waitText(t, admin, "#unselectable code", version.ID)
	if v, _ := chromedp.Run(admin, chromedp.Evaluate[string]("document.querySelector('#speculative').value")); v != version.ID {
		t.Errorf("the pull-request credential select shows %q, want the revoked current version %s", v, version.ID)
	}
	if evalBool(t, admin, "document.querySelector('#source-fields').disabled") {
		t.Error("an owner's loaded source form is disabled")
	}
	screenshot(t, admin, "gaps-source-unselectable")
}
