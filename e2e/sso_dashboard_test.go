package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"
)

// startMockIdP starts an OIDC provider in the test's process; the API
// reaches it on loopback, where plain http is allowed.
func startMockIdP(t *testing.T) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// TestSSODashboardSignIn: without an instance identity provider the
// sign-in page offers no "Continue with" button (and no excuse for one),
// only "Sign in with SSO"; with one, the button takes the browser through
// the provider and back, and the dashboard redeems the one-time code with
// its own session's secret and lands signed in as the provider's verified
// e-mail. A code that reaches another browser signs nobody in, and an
// error the API sends back is worded on the sign-in page.
func TestSSODashboardSignIn(t *testing.T) {
	t.Parallel()
	plain := StartStack(t)
	ctx := newBrowser(t)
	browse(t, ctx, "the sign-in page without an identity provider",
		chromedp.Navigate(plain.DashboardURL+"/sign-in"), chromedp.WaitVisible(chromedp.CSS("#sso-sign-in")))
	if n := count(t, ctx, "form[action='/sign-in/social']"); n != 0 {
		t.Fatalf("%d provider buttons without a provider", n)
	}
	if n := count(t, ctx, "#providers-unavailable"); n != 0 {
		t.Fatal("the page says providers could not be loaded when there are none")
	}
	browse(t, ctx, "the sign-up page without an identity provider",
		chromedp.Navigate(plain.DashboardURL+"/sign-up"), chromedp.WaitVisible(chromedp.CSS("#sso-sign-in")))
	if n := count(t, ctx, "form[action='/sign-in/social']"); n != 0 {
		t.Fatalf("%d provider buttons on sign-up without a provider", n)
	}

	idp := startMockIdP(t)
	cfg := idp.Config()
	s := StartStack(t, WithEnv("CAIRN_IDP_NAME=mock", "CAIRN_IDP_ISSUER="+cfg.Issuer, "IDP_CLIENT_ID="+cfg.ClientID, "IDP_CLIENT_SECRET="+cfg.ClientSecret))
	email := "ada-" + time.Now().Format("150405.000000") + "@idp.example"
	idp.QueueUser(&mockoidc.MockUser{Subject: "ada-subject", Email: email, EmailVerified: true, PreferredUsername: "ada"})
	browser := newBrowser(t)
	browse(t, browser, "the sign-up page with an identity provider",
		chromedp.Navigate(s.DashboardURL+"/sign-up"), chromedp.WaitVisible(chromedp.CSS("#continue-with-mock")))
	browse(t, browser, "continuing with the identity provider",
		chromedp.Navigate(s.DashboardURL+"/sign-in"),
		chromedp.WaitVisible(chromedp.CSS("#continue-with-mock")),
		chromedp.Click(chromedp.CSS("#continue-with-mock button")),
		chromedp.WaitVisible(chromedp.CSS("form[action='/sign-out']")),
	)
	browse(t, browser, "the organizations page", chromedp.Navigate(s.DashboardURL+"/organizations"), chromedp.WaitVisible(chromedp.CSS("form[action='/organizations']")))
	waitText(t, browser, "main", "You are not a member of any organization yet")
	// The invitation page names the signed-in account's address.
	browse(t, browser, "the account", chromedp.Navigate(s.DashboardURL+"/invitations/inv_none"), chromedp.WaitVisible(chromedp.CSS("main strong")))
	waitText(t, browser, "main", email)
	expectNoExceptions(t, browser)

	// A code that reaches another browser (whose session began no flow)
	// is not redeemed there; an error the API sends back is worded.
	jar, _ := cookiejar.New(nil)
	other := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for query, want := range map[string]string{
		"?signInCode=planted-code-0123456789":   "started in another browser",
		"?signInError=EMAIL_NOT_VERIFIED":       "did not confirm your e-mail address",
		"?signInError=%3Cscript%3Ealert(1)%3C/": "failed. Sign in again.",
	} {
		resp, err := other.Get(s.DashboardURL + "/sign-in/complete" + query)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(raw)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, want) || strings.Contains(body, "<script>alert") {
			t.Fatalf("%s: %d\n%s", query, resp.StatusCode, body)
		}
		resp, err = other.Get(s.DashboardURL + "/organizations")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/sign-in" {
			t.Fatalf("%s signed the other browser in: %d %s", query, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}

// TestSSODashboardSettings: an owner registers an OIDC provider on the
// SSO page (which shows the redirect URI to give the provider), tests it
// (the dry run shows the e-mail, the groups and the team they map to),
// turns "Require SSO" on and off, and generates a SCIM token that is shown
// once. A person who signs in with SSO shows as arrived by SSO; a member
// SCIM provisions shows as arrived by SCIM and, once SCIM deactivates
// them, as deactivated. A non-owner sees none of it. With the API down the
// page is unavailable, never an empty list.
func TestSSODashboardSettings(t *testing.T) {
	t.Parallel()
	idp := startMockIdP(t)
	cfg := idp.Config()
	s := StartStack(t)
	owner := s.newMember(t, "ssoowner")
	s.createTeam(t, owner, "platform")
	domain := "sso-" + owner.slug + ".example"

	ctx := newBrowser(t)
	signInAs(t, ctx, s, owner.email)
	browse(t, ctx, "registering a provider",
		chromedp.Navigate(s.DashboardURL+"/organization/sso"),
		chromedp.WaitVisible(chromedp.CSS("#sso-register")),
		chromedp.SetValue(chromedp.CSS("#sso-type"), "oidc"),
		chromedp.SendKeys(chromedp.CSS("#sso-issuer"), cfg.Issuer),
		chromedp.SendKeys(chromedp.CSS("#sso-client-id"), cfg.ClientID),
		chromedp.SendKeys(chromedp.CSS("#sso-client-secret"), cfg.ClientSecret),
		chromedp.SendKeys(chromedp.CSS("#sso-domains"), domain),
		chromedp.Click(chromedp.CSS("#sso-register button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#sso-providers tbody tr[id^='sso-provider-']")),
	)
	waitText(t, ctx, "main .notice", "SSO provider registered")
	waitText(t, ctx, "#sso-providers", "/api/auth/sso/callback/ssop_")
	waitText(t, ctx, "#sso-providers", domain)
	if html, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.querySelector('main').innerHTML")); strings.Contains(html, cfg.ClientSecret) {
		t.Fatal("the page shows the client secret")
	}

	idp.QueueUser(&mockoidc.MockUser{Subject: "grace", Email: "grace@" + domain, EmailVerified: true, Groups: []string{"platform", "unmapped"}})
	browse(t, ctx, "testing the provider",
		chromedp.Click(chromedp.CSS("#sso-providers form[action$='/test'] button")),
		chromedp.WaitVisible(chromedp.CSS("#sso-test-result")),
	)
	waitText(t, ctx, "#sso-test-email", "grace@"+domain)
	waitText(t, ctx, "#sso-test-groups", "unmapped")
	waitText(t, ctx, "#sso-test-teams", "platform")
	screenshot(t, ctx, "organization-sso")

	for _, on := range []bool{true, false} {
		browse(t, ctx, "switching Require SSO",
			chromedp.Navigate(s.DashboardURL+"/organization/sso"),
			chromedp.WaitVisible(chromedp.CSS("#sso-require")),
			chromedp.Click(chromedp.CSS("#sso-required")),
			chromedp.Click(chromedp.CSS("#sso-require button[type=submit]")),
		)
		// The page it leaves may already show a notice (the "SSO is
		// required" one), so wait for the answer's own state, not for any
		// notice.
		state := fmt.Sprintf("!!document.querySelector('#sso-required-on') === %v && document.querySelector('#sso-required').checked === %v", on, on)
		// Polled again after each error: the form's answer navigates the
		// page, which ends a poll that was running in the page it left.
		for deadline := time.Now().Add(30 * time.Second); ; {
			_, err := chromedp.Run(ctx, chromedp.Poll[bool](state, chromedp.WithPollingTimeout(5*time.Second)))
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.Fatalf("Require SSO after switching to %v: the page never showed it (%v)", on, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		checked, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("document.querySelector('#sso-required').checked"))
		if err != nil || checked != on || (count(t, ctx, "#sso-required-on") == 1) != on {
			t.Fatalf("Require SSO after switching to %v: checked %v (%v)", on, checked, err)
		}
		if on {
			waitText(t, ctx, "main .notice", "Owners keep their password sign-in")
		}
	}

	browse(t, ctx, "generating a SCIM token",
		chromedp.Click(chromedp.CSS("#scim-generate button")),
		chromedp.WaitVisible(chromedp.CSS("#scim-token")),
	)
	scimToken, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.querySelector('#scim-token').value"))
	if err != nil || len(scimToken) < 20 {
		t.Fatalf("the SCIM token: %q (%v)", scimToken, err)
	}
	waitText(t, ctx, "#scim-base-url", s.APIURL+"/api/auth/scim/v2/")
	browse(t, ctx, "reloading the SSO page", chromedp.Navigate(s.DashboardURL+"/organization/sso"), chromedp.WaitVisible(chromedp.CSS("#scim-token-status")))
	waitText(t, ctx, "#scim-token-status", "A token exists")
	if n := count(t, ctx, "#scim-token"); n != 0 {
		t.Fatal("the SCIM token is shown again")
	}
	if html, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.documentElement.outerHTML")); strings.Contains(html, scimToken) {
		t.Fatal("the SCIM token is in the page again")
	}

	// Someone signs in through the organization's SSO by their work e-mail.
	idp.QueueUser(&mockoidc.MockUser{Subject: "linus", Email: "linus@" + domain, EmailVerified: true, Groups: []string{"platform"}})
	sso := newBrowser(t)
	browse(t, sso, "signing in with SSO",
		chromedp.Navigate(s.DashboardURL+"/sign-in"),
		chromedp.WaitVisible(chromedp.CSS("#sso-identifier")),
		chromedp.SendKeys(chromedp.CSS("#sso-identifier"), "linus@"+domain),
		chromedp.Click(chromedp.CSS("#sso-sign-in button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("form[action='/sign-out']")),
	)
	// SCIM provisions a third person and then deactivates them.
	var created struct {
		ID string `json:"id"`
	}
	scim := []string{"Authorization", "Bearer " + scimToken, "Content-Type", "application/scim+json"}
	if st := scimJSON(t, s, http.MethodPost, "/Users", map[string]any{"schemas": []string{"urn:ietf:params:scim:schemas:core:2.0:User"},
		"userName": "mary@" + domain, "name": map[string]string{"givenName": "Mary", "familyName": "Ng"},
		"emails": []map[string]any{{"value": "mary@" + domain, "primary": true}}, "active": true}, &created, scim...); st != http.StatusCreated || created.ID == "" {
		t.Fatalf("SCIM create: %d %+v", st, created)
	}
	browse(t, ctx, "the members", chromedp.Navigate(s.DashboardURL+"/organizations"), chromedp.WaitVisible(chromedp.CSS("#members")))
	arrival := func(email string) (string, bool) {
		t.Helper()
		row, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => { const r = [...document.querySelectorAll('#members tbody tr')].find(r => r.textContent.includes(`+jsString(email)+`));
			return r ? [r.querySelector('.member-arrival').textContent.trim(), r.querySelector('.member-deactivated') ? 'yes' : 'no'] : []; })()`))
		if err != nil || len(row) != 2 {
			t.Fatalf("no member row for %s (%v)", email, err)
		}
		return row[0], row[1] == "yes"
	}
	for email, want := range map[string]string{owner.email: "Password", "linus@" + domain: "SSO", "mary@" + domain: "SCIM"} {
		if got, deactivated := arrival(email); got != want || deactivated {
			t.Fatalf("%s arrived by %q (deactivated %v), want %q", email, got, deactivated, want)
		}
	}
	if st := scimJSON(t, s, http.MethodPatch, "/Users/"+created.ID, map[string]any{"schemas": []string{"urn:ietf:params:scim:api:messages:2.0:PatchOp"},
		"Operations": []map[string]any{{"op": "replace", "value": map[string]any{"active": false}}}}, nil, scim...); st != http.StatusOK {
		t.Fatalf("SCIM deactivate: %d", st)
	}
	browse(t, ctx, "the members after deactivation", chromedp.Navigate(s.DashboardURL+"/organizations"), chromedp.WaitVisible(chromedp.CSS("#members")))
	if got, deactivated := arrival("mary@" + domain); got != "SCIM" || !deactivated {
		t.Fatalf("the deactivated member: arrived by %q, deactivated %v", got, deactivated)
	}
	screenshot(t, ctx, "organization-members-arrival")
	expectNoExceptions(t, ctx)

	// A member who is not an owner sees none of the settings.
	admin := s.joinAs(t, owner, "ssoadmin", "admin")
	other := newBrowser(t)
	signInAs(t, other, s, admin.email)
	switchOrganization(t, other, s, owner.orgID)
	browse(t, other, "the SSO page as an admin", chromedp.Navigate(s.DashboardURL+"/organization/sso"), chromedp.WaitVisible(chromedp.CSS("#sso-owners-only")))
	if n := count(t, other, "main form[method=post]"); n != 0 {
		t.Fatalf("an admin sees %d SSO forms", n)
	}

	// With the API gone the page is unavailable, not empty.
	_ = syscall.Kill(-s.PID("api"), syscall.SIGKILL)
	browse(t, ctx, "the SSO page without the API", chromedp.Navigate(s.DashboardURL+"/organization/sso"), chromedp.WaitVisible(chromedp.CSS(".unavailable-panel")))
	if n := count(t, ctx, "#sso-providers, #scim-generate"); n != 0 {
		t.Fatal("the SSO page rendered without the API")
	}
}

// scimJSON calls the organization's SCIM endpoint and decodes the answer
// (SCIM answers are not enveloped).
func scimJSON(t *testing.T, s *Stack, method, path string, body, out any, header ...string) int {
	t.Helper()
	raw, _ := json.Marshal(body)
	st, answer := call(t, s.Client, method, s.APIURL+"/api/auth/scim/v2"+path, raw, header...)
	if out != nil && st < 300 {
		if err := json.Unmarshal(answer, out); err != nil {
			t.Fatalf("%s %s: %s", method, path, answer)
		}
	}
	return st
}
