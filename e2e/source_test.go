package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/api/github/githubfake"
)

// e2eWebhookSecret is the fake app's webhook secret in these stacks.
const e2eWebhookSecret = "e2e-webhook-secret-0123456789"

// codeHostEnv configures the stack's code-host app as the fake's.
func codeHostEnv(t *testing.T, fake *githubfake.Server) []string {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, fake.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{fmt.Sprintf("CAIRN_GITHUB_APP_ID=%d", fake.AppID), "CAIRN_GITHUB_PRIVATE_KEY_FILE=" + keyFile,
		"CAIRN_GITHUB_WEBHOOK_SECRET=" + e2eWebhookSecret, "CAIRN_GITHUB_API_URL=" + fake.URL, "CAIRN_GITHUB_APP_SLUG=cairn-e2e",
		"CAIRN_GITHUB_CLIENT_ID=" + githubfake.ClientID, "CAIRN_GITHUB_CLIENT_SECRET=" + githubfake.ClientSecret}
}

// fakeAppStack is a stack whose code-host app is the fake's.
func fakeAppStack(t *testing.T, fake *githubfake.Server) *Stack {
	t.Helper()
	return StartStack(t, WithEnv(codeHostEnv(t, fake)...))
}

// installApp binds a fake installation to m's organization through the
// start and callback operations, as the provider's redirect would, with
// the installer's authorization code the fake issues for that installation.
func (s *Stack) installApp(t *testing.T, m member, fake *githubfake.Server, installationID int64) {
	t.Helper()
	var start struct {
		InstallURL string `json:"install_url"`
	}
	if st := s.apiJSON(t, http.MethodPost, "/v1/github/installations/start", map[string]any{}, &start, m.mutate(uniqueKey("install"))...); st != http.StatusCreated {
		t.Fatalf("installation start: %d", st)
	}
	u, err := url.Parse(start.InstallURL)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"state": {u.Query().Get("state")}, "installation_id": {fmt.Sprint(installationID)}, "setup_action": {"install"},
		"code": {fake.InstallerCode(installationID)}}
	client := *s.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if st, body := call(t, &client, http.MethodGet, s.APIURL+"/v1/github/installations/callback?"+q.Encode(), nil, m.cookie()...); st != http.StatusSeeOther {
		t.Fatalf("installation callback: %d %s", st, body)
	}
}

// onlyMemberOf signs up an account whose only organization is owner's,
// where it is a member with role: the dashboard then signs it in there.
func (s *Stack) onlyMemberOf(t *testing.T, owner member, name, role string) member {
	t.Helper()
	m := member{email: fmt.Sprintf("%s-%d@example.com", name, time.Now().UnixNano()), orgID: owner.orgID, slug: owner.slug}
	var signedUp struct{ Token string }
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/sign-up/email", map[string]string{"email": m.email,
		"password": "correct horse battery staple", "name": name}, &signedUp); st != http.StatusOK {
		t.Fatalf("%s sign-up: %d", name, st)
	}
	m.session = signedUp.Token
	var inv struct {
		Invitation struct{ ID string } `json:"invitation"`
		Token      string              `json:"token"`
	}
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/organization/invite-member", map[string]string{"email": m.email, "role": role},
		&inv, owner.cookie()...); st != http.StatusOK {
		t.Fatalf("invitation: %d", st)
	}
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/organization/accept-invitation", map[string]string{"invitation_id": inv.Invitation.ID,
		"token": inv.Token}, nil, m.cookie()...); st != http.StatusOK {
		t.Fatalf("accepting: %d", st)
	}
	return m
}

// TestDashboardSourceSettings: a reader sees the source settings page with
// the form disabled; an admin picks a repository of the installation and
// saves a version, which the API then reports as current.
func TestDashboardSourceSettings(t *testing.T) {
	t.Parallel()
	fake := githubfake.Start(t)
	fake.AddRepository(githubfake.Repository{ID: 801, Owner: "acme", Name: "platform"})
	fake.AddInstallation(githubfake.Installation{ID: 81, AccountLogin: "acme", Repositories: []int64{801}})
	s := fakeAppStack(t, fake)
	owner := s.newMember(t, "srcadmin")
	ws := s.createWorkspace(t, owner, "platform", "us")
	s.installApp(t, owner, fake, 81)

	// A reader: an account whose only organization is the owner's.
	readerEmail := s.onlyMemberOf(t, owner, "src-reader", "reader").email

	page := s.DashboardURL + "/workspaces/" + ws + "/settings/source"
	reader := newBrowser(t)
	signInAs(t, reader, s, readerEmail)
	browse(t, reader, "the reader opens source settings", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#source-form")))
	waitText(t, reader, "#installation-status", "connected")
	waitText(t, reader, "#source-readonly", "workspace:admin")
	if disabled, _ := chromedp.Run(reader, chromedp.Evaluate[bool]("document.querySelector('#source-fields').disabled")); !disabled {
		t.Fatal("a reader's source form is enabled")
	}
	expectNoExceptions(t, reader)
	screenshot(t, reader, "source-reader")

	admin := newBrowser(t)
	signInAs(t, admin, s, owner.email)
	browse(t, admin, "the admin opens source settings", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#source-form")))
	if disabled, _ := chromedp.Run(admin, chromedp.Evaluate[bool]("document.querySelector('#source-fields').disabled")); disabled {
		body, _ := chromedp.Run(admin, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("the admin's source form is disabled:\n%s", body)
	}
	browse(t, admin, "saving a version",
		chromedp.SetValue(chromedp.CSS("#repository"), "801"),
		chromedp.SendKeys(chromedp.CSS("#tracked-branch"), "main"),
		chromedp.SendKeys(chromedp.CSS("#working-directory"), "envs/prod"),
		chromedp.SendKeys(chromedp.CSS("#trigger-paths"), "envs/prod/**\nmodules/**"),
		chromedp.SetValue(chromedp.CSS("#fork-pull-requests"), "plan"),
		chromedp.Click(chromedp.CSS("#save-source")),
	)
	waitText(t, admin, "p.notice", "Source settings saved")
	waitText(t, admin, "#fork-risk", "Anyone who can open a pull request")
	waitText(t, admin, "#source-form-title", "Version 1")
	waitText(t, admin, "section[aria-labelledby=history]", "acme/platform")
	expectNoExceptions(t, admin)
	screenshot(t, admin, "source-admin-saved")

	var source struct {
		Current *struct {
			Version          int      `json:"version"`
			RepositoryID     int64    `json:"repository_id"`
			TrackedBranch    string   `json:"tracked_branch"`
			WorkingDirectory string   `json:"working_directory"`
			TriggerPaths     []string `json:"trigger_paths"`
			ForkPullRequests string   `json:"fork_pull_requests"`
		} `json:"current"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+ws+"/source", nil, &source, owner.cookie()...); st != http.StatusOK || source.Current == nil {
		t.Fatalf("source after saving: %d %+v", st, source)
	}
	if c := source.Current; c.Version != 1 || c.RepositoryID != 801 || c.TrackedBranch != "main" || c.WorkingDirectory != "envs/prod" ||
		len(c.TriggerPaths) != 2 || c.ForkPullRequests != "plan" {
		t.Fatalf("saved source %+v", *c)
	}
	// The reader sees the new version and still cannot save, even by
	// enabling the form in the page: the API refuses.
	browse(t, reader, "the reader reloads", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#source-form")))
	waitText(t, reader, "#source-form-title", "Version 1")
	if _, err := chromedp.Run(reader, chromedp.Evaluate[bool]("document.querySelector('#source-fields').disabled = false")); err != nil {
		t.Fatal(err)
	}
	browse(t, reader, "the reader forces a save",
		chromedp.SetValue(chromedp.CSS("#tracked-branch"), "release"),
		chromedp.Click(chromedp.CSS("#save-source")),
	)
	waitText(t, reader, "p.notice", "permission")
	if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+ws+"/source", nil, &source, owner.cookie()...); st != http.StatusOK ||
		source.Current.Version != 1 || source.Current.TrackedBranch != "main" {
		t.Fatalf("source after the reader's attempt: %d %+v", st, *source.Current)
	}
}
