package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/api/launch"
)

// browse runs steps, failing the test with the page's text on error.
func browse(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("%s: %v\npage:\n%s", what, err, body)
	}
}

// waitText waits until the element's text contains want. The run page
// reloads itself when the run's status changes, which ends a poll; the
// wait then starts again on the new page.
func waitText(t *testing.T, ctx context.Context, selector, want string) {
	t.Helper()
	js := `(() => { const el = document.querySelector(` + jsString(selector) + `); return !!el && el.textContent.includes(` + jsString(want) + `); })()`
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(5*time.Second)))
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
			t.Fatalf("waiting for %q in %s: %v\npage:\n%s", want, selector, err, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

// signInThroughTheDashboard fills the sign-in form.
func signInThroughTheDashboard(t *testing.T, ctx context.Context, s *Stack, m member) {
	t.Helper()
	signInAs(t, ctx, s, m.email)
	browse(t, ctx, "opening the runs list", chromedp.WaitVisible(chromedp.CSS("table.runs")))
}

// TestDashboardDrivesARunThroughPolicyAndApproval signs in through the
// dashboard and follows runs in a real browser: a plan's log arrives over
// the live channel, the Changes tab shows the plan diff, approval takes one
// click without destruction and an inline confirmation with it, a policy
// soft failure is overridden from the page, the apply's state version
// appears, a run is discarded with a reason, the runs list filters and
// loads more, and a closed launch gate renders "unavailable".
func TestDashboardDrivesARunThroughPolicyAndApproval(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "dash")
	ctx := newBrowser(t)
	signInThroughTheDashboard(t, ctx, s, m)
	screenshot(t, ctx, "runs-empty")
	browse(t, ctx, "creating a workspace",
		chromedp.Navigate(s.DashboardURL+"/workspaces"),
		chromedp.WaitVisible(chromedp.CSS("#ws-name")),
		chromedp.SendKeys(chromedp.CSS("#ws-name"), "dashboard"),
		chromedp.Submit(chromedp.CSS("#ws-name")),
		chromedp.WaitVisible(chromedp.CSS("#workspace-tabs")),
	)
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	ws := regexp.MustCompile(`ws_[a-z0-9]+`).FindString(loc)
	if ws == "" {
		t.Fatalf("no workspace page after creating one: %s", loc)
	}
	browse(t, ctx, "members", chromedp.Navigate(s.DashboardURL+"/organizations"), chromedp.WaitVisible(chromedp.CSS("#members-title")))
	waitText(t, ctx, "section[aria-labelledby=members-title]", m.email)

	// A plan's log arrives live on the run page.
	cfg := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": `resource "terraform_data" "item" {
  count = 3
  input = { tags = { owner = "team-a", env = "prod" }, index = count.index }
}
`})
	_, first := s.createRun(t, m, ws, cfg, "plan_and_apply")
	browse(t, ctx, "opening the run", chromedp.Navigate(s.DashboardURL+"/runs/"+first.ID), chromedp.WaitVisible(chromedp.CSS("#stage-Plan")))
	waitText(t, ctx, "#stage-Plan .console", "Cairn plan phase")
	waitText(t, ctx, "#run-status", "awaiting approval")
	// The chunks came over the live socket (the page counts them across its
	// reload on the status change), not only from the HTTP log route.
	if live, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("sessionStorage.getItem('cairn.liveEvents') || '0'")); live == "0" {
		t.Fatal("no log chunk arrived over the live channel")
	}
	// The Changes tab renders the plan diff.
	browse(t, ctx, "opening Changes",
		chromedp.Click(chromedp.CSS("#stage-Plan > summary")),
		chromedp.Click(chromedp.CSS("details.changes > summary")),
		chromedp.WaitVisible(chromedp.CSS("#changes .resource-diff")),
	)
	waitText(t, ctx, "#changes", "terraform_data.item[0] will be created")
	screenshot(t, ctx, "run-awaiting-approval")
	// Nothing is destroyed: approval is one click.
	browse(t, ctx, "approving", chromedp.Click(chromedp.CSS("#approve")))
	waitText(t, ctx, "#run-status", "applied")
	waitText(t, ctx, "#stage-Approval", "Approved by")
	waitText(t, ctx, "#state-version", "Published state version")
	screenshot(t, ctx, "run-applied")

	// A soft policy failure on a plan that also destroys: override it on
	// the page, then approve with the destroy confirmation.
	v := s.publishPolicy(t, m, ws, "require-tags")
	s.attachPolicy(t, m, ws, v, "soft_mandatory")
	cfg = s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": `resource "terraform_data" "item" {
  count = 2
  input = { tags = { owner = "team-a", env = "prod" }, index = count.index }
}
resource "terraform_data" "cache" {
  input = { size = 1 }
}
`})
	_, second := s.createRun(t, m, ws, cfg, "plan_and_apply")
	browse(t, ctx, "opening the second run", chromedp.Navigate(s.DashboardURL+"/runs/"+second.ID), chromedp.WaitVisible(chromedp.CSS("#stage-Policy")))
	waitText(t, ctx, "#run-status", "policy override")
	waitText(t, ctx, "#stage-Policy", "terraform_data.cache")
	screenshot(t, ctx, "run-policy-soft-failed")
	browse(t, ctx, "overriding the soft failure",
		chromedp.SendKeys(chromedp.CSS("form.override textarea"), "Cache tags land with the next change; approved by on-call."),
		chromedp.Click(chromedp.CSS("form.override button[type=submit]")),
	)
	waitText(t, ctx, "#run-status", "awaiting approval")
	waitText(t, ctx, "#stage-Policy", "overridden")
	browse(t, ctx, "arming the approval", chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS("#confirm-approve")))
	waitText(t, ctx, "#confirm-approve", "destroys 1")
	screenshot(t, ctx, "run-approve-destroy-confirmation")
	browse(t, ctx, "confirming the approval", chromedp.Click(chromedp.CSS("#confirm-approve-button")))
	waitText(t, ctx, "#run-status", "applied")
	waitText(t, ctx, "#stage-Approval", "Approved by")

	// A third run is discarded with a reason.
	_, third := s.createRun(t, m, ws, s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": `resource "terraform_data" "item" {
  count = 1
  input = { tags = { owner = "team-a", env = "prod" } }
}
`}), "plan_and_apply")
	s.waitRun(t, m, third.ID, 90*time.Second, status("awaiting_approval"))
	browse(t, ctx, "discarding",
		chromedp.Navigate(s.DashboardURL+"/runs/"+third.ID),
		chromedp.Click(chromedp.CSS("#discard")),
		chromedp.WaitVisible(chromedp.CSS("#reason")),
		chromedp.SendKeys(chromedp.CSS("#reason"), "Superseded by the next change."),
		chromedp.Click(chromedp.CSS("#discard-button")),
	)
	waitText(t, ctx, "#run-status", "rejected")
	waitText(t, ctx, "#stage-Approval", "Discarded by")

	// The runs list: status filter, free-text filter and Load more.
	browse(t, ctx, "filtering by status", chromedp.Navigate(s.DashboardURL+"/runs?status=applied"), chromedp.WaitVisible(chromedp.CSS("table.runs")))
	rows, _ := chromedp.Run(ctx, chromedp.Evaluate[int]("document.querySelectorAll('#runs-first tr[data-run]').length"))
	if rows != 2 {
		t.Fatalf("status filter shows %d applied runs, want 2", rows)
	}
	browse(t, ctx, "filtering by run ID", chromedp.Navigate(s.DashboardURL+"/runs?q="+third.ID), chromedp.WaitVisible(chromedp.CSS("table.runs")))
	waitText(t, ctx, "#runs-first", third.ID)
	rows, _ = chromedp.Run(ctx, chromedp.Evaluate[int]("document.querySelectorAll('#runs-first tr[data-run]').length"))
	if rows != 1 {
		t.Fatalf("run ID filter shows %d runs, want 1", rows)
	}
	browse(t, ctx, "loading more",
		chromedp.Navigate(s.DashboardURL+"/runs?per_page=2"),
		chromedp.WaitVisible(chromedp.CSS("#more button")),
		chromedp.Click(chromedp.CSS("#more button")),
	)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool]("document.querySelectorAll('#more-rows tr[data-run]').length === 1", chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("Load more did not append the third run: %v", err)
	}
	screenshot(t, ctx, "runs-list")
	if err := viewport(ctx, phoneWidth, phoneHeight); err != nil {
		t.Fatal(err)
	}
	browse(t, ctx, "phone width", chromedp.Navigate(s.DashboardURL+"/runs/"+second.ID), chromedp.WaitVisible(chromedp.CSS("#stage-Apply")))
	screenshot(t, ctx, "run-phone")
	if err := viewport(ctx, desktopWidth, desktopHeight); err != nil {
		t.Fatal(err)
	}

	// A suspension refuses mutations but not reads: the runs and a run
	// still render.
	s.Run(t, "launch", "suspend", "-organization", m.slug, "-expected-version", "0", "-reason", "e2e suspension", "-key", "suspend-"+m.slug)
	browse(t, ctx, "runs after suspension", chromedp.Navigate(s.DashboardURL+"/runs"), chromedp.WaitVisible(chromedp.CSS("table.runs")))
	browse(t, ctx, "a run after suspension", chromedp.Navigate(s.DashboardURL+"/runs/"+second.ID), chromedp.WaitVisible(chromedp.CSS("#stage-Apply")))

	// A closed launch gate renders "unavailable", never an empty list.
	closed, _ := json.Marshal(map[string]any{"expected_version": 1, "reason": "e2e: close the gate", "document": launch.Default()})
	if status, body := call(t, s.Client, http.MethodPut, s.APIURL+"/operator/v1/launch-control", closed,
		"Authorization", "Bearer "+operatorToken, "Idempotency-Key", "close-gate-"+m.slug, "Content-Type", "application/json"); status != http.StatusOK {
		t.Fatalf("closing the gate: %d %s", status, body)
	}
	browse(t, ctx, "after the gate closed", chromedp.Navigate(s.DashboardURL+"/runs"), chromedp.WaitVisible(chromedp.CSS(".unavailable-panel")))
	waitText(t, ctx, ".unavailable-panel", "503")
	screenshot(t, ctx, "unavailable")
}

// TestDashboardProxyRefusesCrossOriginMutations checks the control-plane
// proxy from outside a browser: a signed-in dashboard session reads through
// it, but a mutation from another origin or without the session's CSRF
// token is refused before it reaches the API.
func TestDashboardProxyRefusesCrossOriginMutations(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "proxy")
	// Signing in through the form starts a new session with a new CSRF
	// token; the browser never holds the API cookie.
	d := signInToDashboard(t, s, m.email)
	client := d.client
	for _, u := range client.Jar.Cookies(mustURL(t, s.DashboardURL)) {
		if strings.Contains(u.Name, "identity") {
			t.Fatalf("the browser holds the API cookie %s", u.Name)
		}
	}

	do := func(method, path, origin, token string, body string) (int, string) {
		req, _ := http.NewRequest(method, s.DashboardURL+"/api/control-plane"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", uniqueKey("proxy"))
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if token != "" {
			req.Header.Set("X-CSRF-Token", token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := do(http.MethodGet, "/v1/workspaces", "", "", ""); st != http.StatusOK {
		t.Fatalf("read through the proxy: %d %s", st, body)
	}
	create := `{"name":"from-the-proxy"}`
	if st, body := do(http.MethodPost, "/v1/projects", "https://evil.example", d.csrf, create); st != http.StatusForbidden {
		t.Fatalf("cross-origin POST: %d %s", st, body)
	}
	if st, body := do(http.MethodPost, "/v1/projects", s.DashboardURL, "", create); st != http.StatusForbidden {
		t.Fatalf("POST without the CSRF token: %d %s", st, body)
	}
	if st, body := do(http.MethodPost, "/v1/user-tokens", s.DashboardURL, d.csrf, `{"description":"x"}`); st != http.StatusNotFound {
		t.Fatalf("minting a token through the proxy: %d %s", st, body)
	}
	var projects []struct{ Name string }
	s.apiJSON(t, http.MethodGet, "/v1/projects", nil, &projects, m.cookie()...)
	for _, p := range projects {
		if p.Name == "from-the-proxy" {
			t.Fatal("a refused request reached the API")
		}
	}
	if st, body := do(http.MethodPost, "/v1/projects", s.DashboardURL, d.csrf, create); st != http.StatusCreated {
		t.Fatalf("same-origin POST with the CSRF token: %d %s", st, body)
	}
}

// dashboardSession is a signed-in dashboard client: its cookie and the
// session's CSRF token.
type dashboardSession struct {
	client *http.Client
	base   string
	cookie string
	csrf   string
}

// signInToDashboard signs in through the dashboard's own form.
func signInToDashboard(t *testing.T, s *Stack, email string) dashboardSession {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	d := dashboardSession{base: s.DashboardURL,
		client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	page := d.page(t, "/sign-in")
	csrf := regexp.MustCompile(`name="csrf_token" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("no CSRF token on the sign-in page:\n%s", page)
	}
	form := url.Values{"csrf_token": {csrf[1]}, "email": {email}, "password": {"correct horse battery staple"}}
	req, _ := http.NewRequest(http.MethodPost, s.DashboardURL+"/sign-in", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.DashboardURL)
	resp, err := d.client.Do(req)
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("dashboard sign-in: %v %v", err, resp)
	}
	resp.Body.Close()
	for _, c := range jar.Cookies(mustURL(t, s.DashboardURL)) {
		if strings.Contains(c.Name, "cairn_dashboard") {
			d.cookie = c.Value
		}
	}
	// The organizations page renders for every signed-in account, with or
	// without an active organization.
	page = d.page(t, "/organizations")
	meta := regexp.MustCompile(`name="csrf-token" content="([0-9a-f]+)"`).FindStringSubmatch(page)
	if d.cookie == "" || meta == nil {
		t.Fatalf("not signed in to the dashboard (cookie %v):\n%s", d.cookie != "", page)
	}
	d.csrf = meta[1]
	return d
}

func (d dashboardSession) page(t *testing.T, path string) string {
	t.Helper()
	resp, err := d.client.Get(d.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// do makes a same-origin control-plane request with the session's CSRF
// token and a fresh idempotency key.
func (d dashboardSession) do(t *testing.T, method, path string, body []byte) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, d.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", d.base)
	req.Header.Set("X-CSRF-Token", d.csrf)
	req.Header.Set("Idempotency-Key", uniqueKey("dashboard"))
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func mustURL(t *testing.T, raw string) *url.URL {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestDashboardWorkspacePolicyAndVariables uses the workspace page: a
// policy archive chosen in the file input is uploaded as the request body
// through the control-plane proxy, its build status is followed until it is
// published, the version is attached, detached after the second
// confirmation, and a variable is added.
func TestDashboardWorkspacePolicyAndVariables(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "dashws")
	ws := s.createWorkspace(t, m, "policies", "us")
	archive := filepath.Join(t.TempDir(), "policy.tar.gz")
	if err := os.WriteFile(archive, policyArchive(t, "require-tags"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	signInThroughTheDashboard(t, ctx, s, m)
	browse(t, ctx, "creating a policy set",
		chromedp.Navigate(s.DashboardURL+"/workspaces/"+ws+"/policies"),
		chromedp.WaitVisible(chromedp.CSS("#set-name")),
		chromedp.SendKeys(chromedp.CSS("#set-name"), "require-tags"),
		chromedp.Submit(chromedp.CSS("#set-name")),
		chromedp.WaitVisible(chromedp.CSS("#upload-file")),
		chromedp.SetUploadFiles(chromedp.CSS("#upload-file"), []string{archive}),
		chromedp.Click(chromedp.CSS("#upload-button")),
	)
	waitText(t, ctx, "#upload-status", "is published")
	if text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#upload-status"))); strings.Contains(text, "policy.tar.gz") {
		t.Fatalf("upload feedback names the local file: %q", text)
	}
	screenshot(t, ctx, "workspace-policy-published")
	browse(t, ctx, "attaching",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("#attach-version")),
		chromedp.SetValue(chromedp.CSS("#attach-mode"), "soft_mandatory"),
		chromedp.Submit(chromedp.CSS("#attach-version")),
	)
	waitText(t, ctx, ".notice", "Policy attached")
	waitText(t, ctx, "table.grid", "soft mandatory")
	browse(t, ctx, "asking to detach", chromedp.Click(chromedp.CSS("form[action$='/detach'] button")))
	waitText(t, ctx, "form[action$='/detach']", "Only runs created from now on are affected")
	browse(t, ctx, "confirming the detach", chromedp.Click(chromedp.CSS("form[action$='/detach'] button.danger")))
	waitText(t, ctx, ".notice", "Policy detached")
	var attachments []struct{ ID string }
	s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+ws+"/policy-attachments", nil, &attachments, m.cookie()...)
	if len(attachments) != 0 {
		t.Fatalf("attachments after detaching: %+v", attachments)
	}
	browse(t, ctx, "adding a variable",
		chromedp.Navigate(s.DashboardURL+"/workspaces/"+ws+"/variables"),
		chromedp.WaitVisible(chromedp.CSS("#var-key")),
		chromedp.SendKeys(chromedp.CSS("#var-key"), "region_name"),
		chromedp.SendKeys(chromedp.CSS("#var-value"), "eu-central"),
		chromedp.Submit(chromedp.CSS("#var-key")),
	)
	waitText(t, ctx, ".notice", "Variable added")
	waitText(t, ctx, "section[aria-labelledby=ws-vars]", "eu-central")
	screenshot(t, ctx, "workspace")
}
