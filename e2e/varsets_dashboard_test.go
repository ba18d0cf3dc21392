package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"
)

// effectiveRow is the effective-variables row of a key.
func effectiveRow(key, category string) string {
	return fmt.Sprintf("#effective-variables tr[data-key='%s'][data-category='%s']", key, category)
}

// TestVariableSetsDashboard: an owner creates a variable set from the
// dashboard, adds a Terraform variable and a sensitive environment
// variable, and scopes it to one project. The workspace in that project
// shows both in its effective variables: its own value of the shared key
// wins over the set's, until the set takes priority; the other project's
// workspace gets nothing from the set. The list searches and pages; a set
// is deleted only after a confirmation. The secret never appears in any
// page's HTML. A reader sees the same pages without a control that changes
// anything, and the set form the page did not offer is refused. Without
// the API the pages say "unavailable", never an empty list.
func TestVariableSetsDashboard(t *testing.T) {
	t.Parallel()
	s := StartStack(t)
	owner := s.newMember(t, "vsowner")
	app := s.createWorkspace(t, owner, "app", "us")
	other := s.createWorkspace(t, owner, "other", "us")
	var appWorkspace struct {
		ProjectID string `json:"project_id"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+app, nil, &appWorkspace, owner.cookie()...); st != http.StatusOK {
		t.Fatalf("reading app: %d", st)
	}
	s.setVariable(t, owner, app, "region", "eu-west-1", false, false)
	secret := uniqueKey("vs-secret-marker")

	// noSecret fails when the page in ctx carries the secret anywhere in
	// its HTML, hidden fields and attributes included.
	noSecret := func(t *testing.T, ctx context.Context, where string) {
		t.Helper()
		html, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.documentElement.outerHTML"))
		if err != nil {
			t.Fatalf("reading %s: %v", where, err)
		}
		if strings.Contains(html, secret) {
			t.Fatalf("%s shows the sensitive value", where)
		}
	}

	ctx := newBrowser(t)
	signInAs(t, ctx, s, owner.email)
	var setID string
	t.Run("create, add variables and scope", func(t *testing.T) {
		browse(t, ctx, "creating a set",
			chromedp.Navigate(s.DashboardURL+"/organization/variable-sets"),
			chromedp.WaitVisible(chromedp.CSS("#create-varset")),
			chromedp.SendKeys(chromedp.CSS("#varset-name"), "shared"),
			chromedp.SendKeys(chromedp.CSS("#varset-description"), "Region and cloud credentials"),
			chromedp.Click(chromedp.CSS("#create-varset button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS("#add-set-variable")),
		)
		waitText(t, ctx, "main .notice", "Variable set created")
		waitText(t, ctx, "#varset-scope-summary", "not applied")
		var err error
		if setID, err = chromedp.Run(ctx, chromedp.Evaluate[string]("location.pathname.split('/').pop()")); err != nil || !strings.HasPrefix(setID, "varset_") {
			t.Fatalf("the set page's path ends in %q (%v)", setID, err)
		}
		browse(t, ctx, "adding a Terraform variable",
			chromedp.SendKeys(chromedp.CSS("#setvar-key"), "region"),
			chromedp.SendKeys(chromedp.CSS("#setvar-value"), "us-east-1"),
			chromedp.Click(chromedp.CSS("#add-set-variable button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS("#set-variables tbody tr[id^=setvar-]")),
		)
		waitText(t, ctx, "main .notice", "Variable added")
		browse(t, ctx, "adding a sensitive environment variable",
			chromedp.SendKeys(chromedp.CSS("#setvar-key"), "CLOUD_TOKEN"),
			chromedp.SendKeys(chromedp.CSS("#setvar-value"), secret),
			chromedp.SetValue(chromedp.CSS("#setvar-category"), "env"),
			chromedp.Click(chromedp.CSS("#setvar-sensitive")),
			chromedp.Click(chromedp.CSS("#add-set-variable button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS("main .notice")),
		)
		waitText(t, ctx, "#set-variables", "CLOUD_TOKEN")
		waitText(t, ctx, "#set-variables", "sensitive — write only")
		waitText(t, ctx, "#set-variables", "us-east-1")
		noSecret(t, ctx, "the set page")
		browse(t, ctx, "scoping the set to app's project",
			chromedp.Click(chromedp.CSS("#scope-project-"+appWorkspace.ProjectID)),
			chromedp.Click(chromedp.CSS("#varset-scope button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS("main .notice")),
		)
		waitText(t, ctx, "main .notice", "Scope saved")
		waitText(t, ctx, "#varset-scope-summary", "1 project")
		if checked, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("document.querySelector('#scope-project-"+appWorkspace.ProjectID+"').checked")); err != nil || !checked {
			t.Fatalf("the scope editor does not show app's project ticked (%v)", err)
		}
		noSecret(t, ctx, "the set page after scoping")
		screenshot(t, ctx, "varset")
	})
	if setID == "" {
		t.FailNow()
	}

	t.Run("effective variables name the winner", func(t *testing.T) {
		browse(t, ctx, "app's variables", chromedp.Navigate(s.DashboardURL+"/workspaces/"+app+"/variables"),
			chromedp.WaitVisible(chromedp.CSS("#effective-variables")))
		region, token := effectiveRow("region", "terraform"), effectiveRow("CLOUD_TOKEN", "env")
		waitText(t, ctx, region+" .winner", "this workspace")
		waitText(t, ctx, region, "eu-west-1")
		waitText(t, ctx, region+" .overridden del", "shared")
		waitText(t, ctx, token+" .winner", "shared")
		waitText(t, ctx, token+" .winner", "project")
		waitText(t, ctx, token, "sensitive — write only")
		if count(t, ctx, region+" .winner .priority") != 0 {
			t.Fatal("the workspace's own value is marked priority")
		}
		noSecret(t, ctx, "app's variables")
		browse(t, ctx, "other's variables", chromedp.Navigate(s.DashboardURL+"/workspaces/"+other+"/variables"),
			chromedp.WaitVisible(chromedp.CSS("#no-effective-variables")))

		browse(t, ctx, "giving the set priority",
			chromedp.Navigate(s.DashboardURL+"/organization/variable-sets/"+setID),
			chromedp.WaitVisible(chromedp.CSS("#varset-settings")),
			chromedp.Click(chromedp.CSS("#varset-edit-priority")),
			chromedp.Click(chromedp.CSS("#varset-settings button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS("main .notice")),
		)
		waitText(t, ctx, "main .notice", "Variable set saved")
		waitText(t, ctx, "h1 .priority", "priority")
		browse(t, ctx, "app's variables with a priority set", chromedp.Navigate(s.DashboardURL+"/workspaces/"+app+"/variables"),
			chromedp.WaitVisible(chromedp.CSS("#effective-variables")))
		waitText(t, ctx, region+" .winner", "shared")
		waitText(t, ctx, region+" .winner .priority", "priority")
		waitText(t, ctx, region, "us-east-1")
		waitText(t, ctx, region+" .overridden del", "this workspace")
		noSecret(t, ctx, "app's variables with a priority set")
		screenshot(t, ctx, "effective-variables")
	})

	// 50 more sets (one page) put the second page's first row at "shared".
	// A browser's time is bounded: the list gets its own.
	for i := range 50 {
		if st := s.apiJSON(t, http.MethodPost, "/v1/variable-sets", map[string]any{"name": fmt.Sprintf("bulk-%02d", i)}, nil,
			owner.mutate(uniqueKey("varset"))...); st != http.StatusCreated {
			t.Fatalf("creating bulk-%02d: %d", i, st)
		}
	}
	ctx = newBrowser(t)
	t.Run("list searches, pages and deletes", func(t *testing.T) {
		signInAs(t, ctx, s, owner.email)
		browse(t, ctx, "the list", chromedp.Navigate(s.DashboardURL+"/organization/variable-sets"), chromedp.WaitVisible(chromedp.CSS("#more a")))
		if n := count(t, ctx, "#varsets tbody tr[id^=varset-]"); n != 50 || count(t, ctx, "#varset-"+setID) != 0 {
			t.Fatalf("the first page lists %d sets, shared among them: %v", n, count(t, ctx, "#varset-"+setID) != 0)
		}
		browse(t, ctx, "searching",
			chromedp.SendKeys(chromedp.CSS("#varset-q"), "hare"),
			chromedp.Submit(chromedp.CSS("#varset-q")),
			chromedp.WaitVisible(chromedp.CSS("#varset-"+setID)),
		)
		if n := count(t, ctx, "#varsets tbody tr[id^=varset-]"); n != 1 {
			t.Fatalf("searching for hare lists %d sets", n)
		}
		browse(t, ctx, "the second page", chromedp.Navigate(s.DashboardURL+"/organization/variable-sets"), chromedp.WaitVisible(chromedp.CSS("#more a")),
			chromedp.Click(chromedp.CSS("#more a")), chromedp.WaitVisible(chromedp.CSS("#varset-"+setID)))
		waitText(t, ctx, "#varset-"+setID+" .scope", "1 project")
		waitText(t, ctx, "#varset-"+setID, "priority")
		waitText(t, ctx, "#varset-"+setID+" .count", "2")
		browse(t, ctx, "searching for nothing", chromedp.Navigate(s.DashboardURL+"/organization/variable-sets?q=nothing-like-it"),
			chromedp.WaitVisible(chromedp.CSS("#no-varsets")))
		browse(t, ctx, "searching bulk-07",
			chromedp.Navigate(s.DashboardURL+"/organization/variable-sets?q=bulk-07"),
			chromedp.WaitVisible(chromedp.CSS("#varsets tbody a")),
			chromedp.Click(chromedp.CSS("#varsets tbody a")),
			chromedp.WaitVisible(chromedp.CSS("#delete-varset")),
			chromedp.Click(chromedp.CSS("#delete-varset button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS("#delete-varset p[role=alert]")),
		)
		waitText(t, ctx, "#delete-varset", "Delete bulk-07")
		browse(t, ctx, "confirming the delete", chromedp.Click(chromedp.CSS("#delete-varset button.danger")), chromedp.WaitVisible(chromedp.CSS("#varsets")))
		waitText(t, ctx, "main .notice", "Variable set deleted")
		browse(t, ctx, "searching bulk-07 again", chromedp.Navigate(s.DashboardURL+"/organization/variable-sets?q=bulk-07"),
			chromedp.WaitVisible(chromedp.CSS("#no-varsets")))
		expectNoExceptions(t, ctx)
	})

	t.Run("no page's HTML holds the secret", func(t *testing.T) {
		d := signInToDashboard(t, s, owner.email)
		for path, id := range map[string]string{"/organization/variable-sets?q=shared": "varsets", "/organization/variable-sets/" + setID: "set-variables",
			"/workspaces/" + app + "/variables": "effective-variables", "/workspaces/" + other + "/variables": "no-effective-variables"} {
			if html := d.page(t, path); strings.Contains(html, secret) || !strings.Contains(html, `id="`+id+`"`) {
				t.Fatalf("%s shows the sensitive value or is not the page:\n%s", path, html)
			}
		}
	})

	reader := s.joinAs(t, owner, "vsreader", "reader")
	readerCtx := newBrowser(t)
	t.Run("a reader sees no write controls", func(t *testing.T) {
		signInAs(t, readerCtx, s, reader.email)
		switchOrganization(t, readerCtx, s, owner.orgID)
		browse(t, readerCtx, "the reader's list", chromedp.Navigate(s.DashboardURL+"/organization/variable-sets?q=shared"),
			chromedp.WaitVisible(chromedp.CSS("#varset-"+setID)))
		if count(t, readerCtx, "#create-varset") != 0 || count(t, readerCtx, "#varsets-readonly") != 1 {
			t.Fatal("the reader is offered the create form")
		}
		browse(t, readerCtx, "the reader's set page", chromedp.Navigate(s.DashboardURL+"/organization/variable-sets/"+setID),
			chromedp.WaitVisible(chromedp.CSS("#set-variables")))
		waitText(t, readerCtx, "#scope-readonly", "p-app")
		if n := count(t, readerCtx, "main form[method=post], main input, main select"); n != 0 {
			t.Fatalf("the reader is offered %d set controls", n)
		}
		noSecret(t, readerCtx, "the reader's set page")
		browse(t, readerCtx, "the reader's effective variables", chromedp.Navigate(s.DashboardURL+"/workspaces/"+app+"/variables"),
			chromedp.WaitVisible(chromedp.CSS("#effective-variables")))
		waitText(t, readerCtx, effectiveRow("CLOUD_TOKEN", "env"), "sensitive — write only")
		noSecret(t, readerCtx, "the reader's effective variables")
		expectNoExceptions(t, readerCtx)

		d := signInToDashboard(t, s, reader.email)
		if st, _ := d.form(t, "/organizations/active", map[string]string{"organization_id": owner.orgID}); st != http.StatusSeeOther {
			t.Fatalf("switching organization: %d", st)
		}
		if st, body := d.form(t, "/organization/variable-sets/"+setID+"/variables", map[string]string{"key": "sneaky", "value": "x",
			"category": "terraform"}); st != http.StatusForbidden {
			t.Fatalf("the reader's variable post: %d\n%s", st, body)
		}
		if st, _ := d.form(t, "/organization/variable-sets/"+setID+"/delete", map[string]string{"confirm": "yes"}); st != http.StatusForbidden {
			t.Fatalf("the reader's delete: %d", st)
		}
		var set struct {
			Variables []struct{ Key string } `json:"variables"`
		}
		if st := s.apiJSON(t, http.MethodGet, "/v1/variable-sets/"+setID, nil, &set, owner.cookie()...); st != http.StatusOK || len(set.Variables) != 2 {
			t.Fatalf("the set after the reader's posts: %d %+v", st, set)
		}
	})

	t.Run("without the API the pages are unavailable", func(t *testing.T) {
		_ = syscall.Kill(-s.PID("api"), syscall.SIGKILL)
		for _, path := range []string{"/organization/variable-sets", "/organization/variable-sets/" + setID, "/workspaces/" + app + "/variables"} {
			browse(t, readerCtx, "without the API "+path, chromedp.Navigate(s.DashboardURL+path), chromedp.WaitVisible(chromedp.CSS(".unavailable-panel")))
			if n := count(t, readerCtx, "#varsets, #no-varsets, #set-variables, #effective-variables, #no-effective-variables"); n != 0 {
				t.Fatalf("%s rendered a list without the API", path)
			}
		}
	})
}
