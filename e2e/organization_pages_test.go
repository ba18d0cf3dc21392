package e2e

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardReaderSeesNoMutatingControls: a reader of the organization
// sees every workspace tab and the organization pages, read-only: no form
// that posts, except the navigation's organization switcher and sign-out.
func TestDashboardReaderSeesNoMutatingControls(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	owner := s.newMember(t, "owner")
	ws := s.createWorkspace(t, owner, "shared", "us")
	s.setVariable(t, owner, ws, "region_name", "eu-central", false, false)
	reader := s.joinAs(t, owner, "reader", "reader")

	ctx := newBrowser(t)
	signInAs(t, ctx, s, reader.email)
	// A new session starts in the reader's own organization: switch with
	// the navigation's organization switcher.
	switchOrganization(t, ctx, s, owner.orgID)
	waitText(t, ctx, "#main-nav [aria-current=page]", "Runs")
	mutating := "main form[method=post], main button[type=submit]:not([disabled] *), main input[type=file]"
	for _, path := range []string{"", "/runs", "/states", "/variables", "/policies", "/settings"} {
		browse(t, ctx, "opening "+path, chromedp.Navigate(s.DashboardURL+"/workspaces/"+ws+path), chromedp.WaitVisible(chromedp.CSS("#workspace-tabs")))
		if path == "/settings" {
			// The settings form stays visible, disabled, without a button.
			if n := count(t, ctx, "#workspace-settings fieldset[disabled]"); n != 1 {
				t.Fatal("a reader's settings form is not disabled")
			}
			if n := count(t, ctx, "#workspace-settings button"); n != 0 {
				t.Fatal("a reader's settings form has a save button")
			}
			continue
		}
		if n := count(t, ctx, mutating); n != 0 {
			html, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.querySelector('main').innerHTML"))
			t.Fatalf("a reader sees %d mutating controls on %q:\n%s", n, path, html)
		}
		if path == "/variables" {
			waitText(t, ctx, "#variables", "eu-central")
			waitText(t, ctx, "main", "read-only for your role")
			screenshot(t, ctx, "workspace-variables-reader")
		}
	}
	for _, path := range []string{"/organizations", "/organization/projects", "/organization/service-accounts"} {
		browse(t, ctx, "opening "+path, chromedp.Navigate(s.DashboardURL+path), chromedp.WaitVisible(chromedp.CSS("#org-tabs")))
		// The organizations page keeps only creating and switching to one's own.
		if n := count(t, ctx, "main form[method=post]:not([action='/organizations']):not([action='/organizations/active'])"); n != 0 {
			t.Fatalf("a reader sees %d mutating forms on %s", n, path)
		}
	}
	browse(t, ctx, "organization settings", chromedp.Navigate(s.DashboardURL+"/organization/settings"), chromedp.WaitVisible(chromedp.CSS("#org-settings")))
	if n := count(t, ctx, "#org-settings fieldset[disabled]"); n != 1 || count(t, ctx, "#org-settings button") != 0 {
		t.Fatal("a reader may change the organization's settings")
	}
	// A post the page never offered is refused by the API all the same.
	d := signInToDashboard(t, s, reader.email)
	if st, _ := d.form(t, "/organizations/active", map[string]string{"organization_id": owner.orgID}); st != http.StatusSeeOther {
		t.Fatalf("switching organization: %d", st)
	}
	st, body := d.form(t, "/workspaces/"+ws+"/variables", map[string]string{"key": "sneaky", "value": "x"})
	if st != http.StatusForbidden || !strings.Contains(string(body), "permission") {
		t.Fatalf("a reader's variable post: %d", st)
	}
	if _, added := s.variables(t, owner, ws)["sneaky"]; added {
		t.Fatal("the reader's post added a variable")
	}
	expectNoExceptions(t, ctx)
}

// TestDashboardDarkCanaryShowsOnlyItsWorkspace: with the public gate
// closed and one canary pair allowlisted, the canary workspace's pages
// render without the organization navigation, switcher or links; another
// workspace of the same organization and every organization-wide page are
// unavailable with the API's 503, and so are their form posts.
func TestDashboardDarkCanaryShowsOnlyItsWorkspace(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "canaryui")
	canary := s.createWorkspace(t, m, "canary", "us")
	other := s.createWorkspace(t, m, "other", "us")
	s.setVariable(t, m, canary, "region_name", "eu-central", false, false)
	cfg := s.uploadConfiguration(t, m, other, map[string]string{"main.tf": `resource "terraform_data" "x" {}`})
	_, otherRun := s.createRun(t, m, other, cfg, "plan_only")
	rewriteControl(t, s, "dashboard canary", func(doc map[string]any) {
		doc["public_gate"] = false
		doc["canary_allowlist"] = []map[string]string{{"organization_id": m.orgID, "workspace_id": canary}}
	})

	ctx := newBrowser(t)
	signInAs(t, ctx, s, m.email)
	for _, path := range []string{"", "/settings", "/variables"} {
		browse(t, ctx, "canary "+path, chromedp.Navigate(s.DashboardURL+"/workspaces/"+canary+path), chromedp.WaitVisible(chromedp.CSS("#workspace-tabs")))
		for _, sel := range []string{"#main-nav", "#org-switcher", "a[href='/workspaces']", "a[href='/runs']", "a[href^='/organization']", "a[href*='/settings/cloud-access']"} {
			if n := count(t, ctx, sel); n != 0 {
				t.Fatalf("the canary page %q shows %s", path, sel)
			}
		}
	}
	waitText(t, ctx, "#variables", "eu-central")
	screenshot(t, ctx, "workspace-canary")
	for _, path := range []string{"/workspaces/" + other, "/workspaces/" + other + "/variables", "/workspaces", "/organization/audit", "/organization/tokens"} {
		browse(t, ctx, "refused "+path, chromedp.Navigate(s.DashboardURL+path), chromedp.WaitVisible(chromedp.CSS(".unavailable-panel")))
		waitText(t, ctx, ".unavailable-panel", "Status 503")
		if n := count(t, ctx, "#main-nav"); n != 0 {
			t.Fatalf("the refusal of %s shows the organization navigation", path)
		}
	}
	// Form posts probe too: the other workspace's variable form is refused
	// before anything is written, with the API's status and Retry-After.
	d := signInToDashboard(t, s, m.email)
	resp := d.formResponse(t, "/workspaces/"+other+"/variables", map[string]string{"key": "k", "value": "v"})
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a post to the other workspace: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if len(s.variables(t, m, other)) != 0 {
		t.Fatal("the refused post wrote a variable")
	}
	// The other workspace's run: its page, Changes view, decision posts and
	// live socket all run the run's probe and are refused alike.
	for what, do := range map[string]func() *http.Response{
		"run page": func() *http.Response { return d.get(t, "/runs/"+otherRun.ID, nil) },
		"changes":  func() *http.Response { return d.get(t, "/runs/"+otherRun.ID+"/changes", nil) },
		"approve":  func() *http.Response { return d.formResponse(t, "/runs/"+otherRun.ID+"/approve", nil) },
		"live socket": func() *http.Response {
			return d.get(t, "/live/runs/"+otherRun.ID, map[string]string{"Origin": d.base, "Connection": "Upgrade",
				"Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
		},
	} {
		resp := do()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s of the other workspace's run: %d, Retry-After %q, request %q", what, resp.StatusCode,
				resp.Header.Get("Retry-After"), resp.Header.Get("X-Request-Id"))
		}
	}
	expectNoExceptions(t, ctx)
}

// switchOrganization makes orgID the browser session's active
// organization with the navigation's switcher.
func switchOrganization(t *testing.T, ctx context.Context, s *Stack, orgID string) {
	t.Helper()
	browse(t, ctx, "switching organization",
		chromedp.Navigate(s.DashboardURL+"/organizations"),
		chromedp.WaitVisible(chromedp.CSS("#switch-org")),
		chromedp.SetValue(chromedp.CSS("#switch-org"), orgID),
		chromedp.Submit(chromedp.CSS("#switch-org")),
		chromedp.WaitVisible(chromedp.CSS("#main-nav")),
	)
}

// formResponse posts a dashboard form as the browser would: same origin,
// the session's CSRF token.
func (d dashboardSession) formResponse(t *testing.T, path string, fields map[string]string) *http.Response {
	t.Helper()
	form := url.Values{"csrf_token": {d.csrf}}
	for k, v := range fields {
		form.Set(k, v)
	}
	req, _ := http.NewRequest(http.MethodPost, d.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", d.base)
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// get reads a dashboard path with extra headers.
func (d dashboardSession) get(t *testing.T, path string, header map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.base+path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (d dashboardSession) form(t *testing.T, path string, fields map[string]string) (int, []byte) {
	t.Helper()
	resp := d.formResponse(t, path, fields)
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// TestDashboardTokensServiceAccountsAndAuditLog: a personal API token is
// minted from the page, its plaintext shown once and working against the
// remote-backend API until it is revoked from the page; a service account
// gets a token with a permission subset and a workspace boundary, shown
// once and revoked; the audit log pages by cursor and filters by type and
// actor.
func TestDashboardTokensServiceAccountsAndAuditLog(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "tokens")
	ws := s.createWorkspace(t, m, "target", "us")
	ctx := newBrowser(t)
	signInThroughTheDashboard(t, ctx, s, m)

	browse(t, ctx, "minting a token",
		chromedp.Navigate(s.DashboardURL+"/organization/tokens"),
		chromedp.WaitVisible(chromedp.CSS("#token-description")),
		chromedp.SendKeys(chromedp.CSS("#token-description"), "laptop"),
		chromedp.Submit(chromedp.CSS("#token-description")),
		chromedp.WaitVisible(chromedp.CSS("#secret-plaintext")),
	)
	plaintext, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.querySelector('#secret-plaintext').value"))
	if !strings.HasPrefix(plaintext, "cut_") {
		t.Fatalf("minted token %q", plaintext)
	}
	bearer := []string{"Authorization", "Bearer " + plaintext}
	if st, _ := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/workspaces/"+ws, nil, bearer...); st != http.StatusOK {
		t.Fatalf("the minted token against the remote-backend API: %d", st)
	}
	// Shown once: the list never has it again.
	browse(t, ctx, "reloading the tokens", chromedp.Navigate(s.DashboardURL+"/organization/tokens"), chromedp.WaitVisible(chromedp.CSS("#user-tokens")))
	if count(t, ctx, "#secret-plaintext") != 0 || strings.Contains(mustPage(t, ctx), plaintext) {
		t.Fatal("the token's plaintext is shown again")
	}
	screenshot(t, ctx, "organization-tokens")
	browse(t, ctx, "revoking", chromedp.Click(chromedp.CSS("#user-tokens tr:first-child form[action$='/revoke'] button")))
	waitText(t, ctx, ".notice", "Token revoked")
	if st, _ := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/workspaces/"+ws, nil, bearer...); st != http.StatusUnauthorized {
		t.Fatalf("the revoked token: %d", st)
	}

	// A service account and a bounded token.
	browse(t, ctx, "creating a service account",
		chromedp.Navigate(s.DashboardURL+"/organization/service-accounts"),
		chromedp.WaitVisible(chromedp.CSS("#sa-name")),
		chromedp.SendKeys(chromedp.CSS("#sa-name"), "deploy-bot"),
		chromedp.Submit(chromedp.CSS("#sa-name")),
		chromedp.WaitVisible(chromedp.CSS("#issue-token")),
		chromedp.Click(chromedp.CSS("#issue-token input[value='workspace:read']")),
		chromedp.Click(chromedp.CSS("#issue-token input[value='state:read']")),
		chromedp.SetValue(chromedp.CSS("#issue-workspace"), ws),
		chromedp.Submit(chromedp.CSS("#issue-expiry")),
		chromedp.WaitVisible(chromedp.CSS("#secret-plaintext")),
	)
	sst, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.querySelector('#secret-plaintext').value"))
	if !strings.HasPrefix(sst, "sst_") {
		t.Fatalf("issued token %q", sst)
	}
	waitText(t, ctx, "#sa-tokens", "workspace:read")
	waitText(t, ctx, "#sa-tokens", "workspace "+ws)
	screenshot(t, ctx, "service-account-token")
	saBearer := []string{"Authorization", "Bearer " + sst}
	if st, _ := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/workspaces/"+ws, nil, saBearer...); st != http.StatusOK {
		t.Fatalf("the service account token on its workspace: %d", st)
	}
	browse(t, ctx, "revoking the service account token", chromedp.Click(chromedp.CSS("#sa-tokens form[action$='/revoke'] button")))
	waitText(t, ctx, ".notice", "Token revoked")
	waitText(t, ctx, "#sa-tokens", "revoked")
	if st, _ := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/workspaces/"+ws, nil, saBearer...); st != http.StatusUnauthorized {
		t.Fatalf("the revoked service account token: %d", st)
	}

	// Enough events for a second audit page: 30 tokens minted through the
	// API by this member.
	for i := 0; i < 30; i++ {
		if st := s.apiJSON(t, http.MethodPost, "/v1/user-tokens", map[string]string{"description": "bulk"}, nil, m.mutate(uniqueKey("bulk"))...); st != http.StatusCreated {
			t.Fatalf("bulk token: %d", st)
		}
	}
	browse(t, ctx, "audit log", chromedp.Navigate(s.DashboardURL+"/organization/audit"), chromedp.WaitVisible(chromedp.CSS("#audit-events")))
	if n := count(t, ctx, "#audit-events tbody tr"); n != 25 {
		t.Fatalf("first audit page has %d rows", n)
	}
	first, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.querySelector('#audit-events tbody tr').textContent"))
	browse(t, ctx, "older events", chromedp.Click(chromedp.CSS("#older-events")), chromedp.WaitVisible(chromedp.CSS("#audit-events")))
	second, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.querySelector('#audit-events tbody tr').textContent"))
	if first == second || count(t, ctx, "#audit-events tbody tr") == 0 {
		t.Fatal("the second audit page repeats the first")
	}
	// Filtered by type: only the page's revocations, by this member's name.
	browse(t, ctx, "filtering",
		chromedp.Navigate(s.DashboardURL+"/organization/audit"),
		chromedp.WaitVisible(chromedp.CSS("#audit-action")),
		chromedp.SetValue(chromedp.CSS("#audit-action"), "service_account_token.revoked"),
		chromedp.Submit(chromedp.CSS("#audit-action")),
		chromedp.WaitVisible(chromedp.CSS("#audit-events")),
	)
	if n := count(t, ctx, "#audit-events tbody tr"); n != 1 {
		t.Fatalf("filtered audit log has %d rows", n)
	}
	waitText(t, ctx, "#audit-events", "tokens") // the member's name, not an ID
	screenshot(t, ctx, "audit-log")
	// Filtered by an actor who did nothing: an honest empty result.
	browse(t, ctx, "filtering by actor", chromedp.Navigate(s.DashboardURL+"/organization/audit?actor_id=usr_nobody"), chromedp.WaitVisible(chromedp.CSS("#audit-events")))
	waitText(t, ctx, "#audit-events", "No events match these filters")
	expectNoExceptions(t, ctx)
}
