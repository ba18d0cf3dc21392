package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// joinAs makes a fresh account a member of owner's organization with role,
// through an invitation it accepts; the organization becomes its active one.
func (s *Stack) joinAs(t *testing.T, owner member, name, role string) member {
	t.Helper()
	m := s.newMember(t, name)
	var invited struct {
		Invitation struct{ ID string } `json:"invitation"`
		Token      string              `json:"token"`
	}
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/organization/invite-member",
		map[string]string{"email": m.email, "role": role}, &invited, owner.cookie()...); st != http.StatusOK {
		t.Fatalf("invitation: %d", st)
	}
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/organization/accept-invitation",
		map[string]string{"invitation_id": invited.Invitation.ID, "token": invited.Token}, nil, m.cookie()...); st != http.StatusOK {
		t.Fatalf("accepting: %d", st)
	}
	m.orgID, m.slug = owner.orgID, owner.slug
	return m
}

// count evaluates a querySelectorAll length on the page.
func count(t *testing.T, ctx context.Context, selector string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int]("document.querySelectorAll("+jsString(selector)+").length"))
	if err != nil {
		t.Fatalf("counting %s: %v", selector, err)
	}
	return n
}

type variableView struct {
	ID           string  `json:"id"`
	Key          string  `json:"key"`
	Value        *string `json:"value"`
	Description  string  `json:"description"`
	Sensitive    bool    `json:"sensitive"`
	ValueVersion int     `json:"value_version"`
}

func (s *Stack) variables(t *testing.T, m member, ws string) map[string]variableView {
	t.Helper()
	var vars []variableView
	if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+ws+"/variables", nil, &vars, m.cookie()...); st != http.StatusOK {
		t.Fatalf("variables: %d", st)
	}
	out := map[string]variableView{}
	for _, v := range vars {
		out[v.Key] = v
	}
	return out
}

// TestDashboardWorkspaceTabs walks a workspace's tabs in a browser: the
// overview draws one bar per recent run in a server-rendered SVG, a plain
// variable is edited, a sensitive one keeps its sealed value when only its
// description changes (the form never holds the value), a variable is
// deleted after a second confirmation, and the settings tab renames the
// workspace and switches its execution mode.
func TestDashboardWorkspaceTabs(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "tabs")
	ws := s.createWorkspace(t, m, "network", "us")
	s.setVariable(t, m, ws, "region_name", "eu-central", false, false)
	s.setVariable(t, m, ws, "api_key", "sealed-secret-5b1c", true, false)
	s.setVariable(t, m, ws, "obsolete", "x", false, false)

	// Runs of two outcomes for the chart, one of them applied after
	// approval so the overview shows its state and outputs.
	good := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": `resource "terraform_data" "net" { input = "a" }
output "cidr" { value = "10.0.0.0/16" }
`})
	bad := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": `resource "terraform_data" "net" { input = var.missing }`})
	var runs []string
	for _, c := range []struct{ cfg, kind string }{{good, "plan_only"}, {bad, "plan_only"}, {good, "plan_only"},
		{good, "plan_and_apply"}, {bad, "plan_only"}, {good, "plan_only"}} {
		st, r := s.createRun(t, m, ws, c.cfg, c.kind)
		if st != http.StatusCreated {
			t.Fatalf("run: %d", st)
		}
		r = s.waitRun(t, m, r.ID, 3*time.Minute, func(r runView) bool {
			return r.Status == "planned_and_finished" || r.Status == "errored" || r.Status == "awaiting_approval"
		})
		if r.Status == "awaiting_approval" {
			if st, body := s.approve(t, m, r); st != http.StatusOK {
				t.Fatalf("approve: %d %s", st, body)
			}
			s.waitRun(t, m, r.ID, 3*time.Minute, func(r runView) bool { return r.Status == "applied" })
		}
		runs = append(runs, r.ID)
	}

	ctx := newBrowser(t)
	signInThroughTheDashboard(t, ctx, s, m)
	browse(t, ctx, "opening the overview", chromedp.Navigate(s.DashboardURL+"/workspaces/"+ws), chromedp.WaitVisible(chromedp.CSS("#run-chart")))
	if n := count(t, ctx, "#run-chart rect"); n != len(runs) {
		t.Fatalf("chart draws %d bars for %d runs", n, len(runs))
	}
	for class, want := range map[string]int{"bar-ok": 4, "bar-bad": 2, "bar-live": 0} {
		if n := count(t, ctx, "#run-chart rect."+class); n != want {
			t.Errorf("chart has %d %s bars, want %d", n, class, want)
		}
	}
	waitText(t, ctx, "#run-chart desc", "4 succeeded, 2 failed, 0 in progress")
	waitText(t, ctx, "#state-outputs", "10.0.0.0/16")
	if n := count(t, ctx, "script[src*=chart], canvas"); n != 0 {
		t.Fatal("the chart needs a script")
	}
	waitText(t, ctx, "#workspace-tabs [aria-current=page]", "Overview")
	screenshot(t, ctx, "workspace-overview")
	if dir := os.Getenv("CAIRN_README_SCREENSHOTS"); dir != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil || os.WriteFile(filepath.Join(dir, "workspace-overview.png"), png, 0o644) != nil {
			t.Fatalf("README screenshot: %v", err)
		}
	}

	// Edit a plain variable.
	browse(t, ctx, "editing a variable",
		chromedp.Navigate(s.DashboardURL+"/workspaces/"+ws+"/variables"),
		chromedp.WaitVisible(chromedp.CSS("#variables")),
	)
	before := s.variables(t, m, ws)
	plain, secret := before["region_name"], before["api_key"]
	browse(t, ctx, "saving the plain variable",
		chromedp.Click(chromedp.CSS("#var-"+plain.ID+" details summary")),
		chromedp.SetValue(chromedp.CSS("#value-"+plain.ID), "us-east"),
		chromedp.Submit(chromedp.CSS("#value-"+plain.ID)),
	)
	waitText(t, ctx, ".notice", "Variable saved")
	waitText(t, ctx, "#var-"+plain.ID, "us-east")
	// The sensitive variable's form never holds its value; changing the
	// description keeps the sealed value and its version.
	if v, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.querySelector('#value-"+secret.ID+"').value")); v != "" {
		t.Fatalf("the sensitive variable's form holds %q", v)
	}
	if strings.Contains(string(mustPage(t, ctx)), "sealed-secret-5b1c") {
		t.Fatal("the page shows the sensitive value")
	}
	browse(t, ctx, "describing the secret",
		chromedp.Click(chromedp.CSS("#var-"+secret.ID+" details summary")),
		chromedp.SetValue(chromedp.CSS("#desc-"+secret.ID), "payment gateway key"),
		chromedp.Submit(chromedp.CSS("#desc-"+secret.ID)),
	)
	// The notice of the previous save is still on the page until the new
	// one loads: wait for the row itself.
	waitText(t, ctx, "#var-"+secret.ID, "payment gateway key")
	waitText(t, ctx, ".notice", "Variable saved")
	after := s.variables(t, m, ws)
	if after["region_name"].Value == nil || *after["region_name"].Value != "us-east" {
		t.Fatalf("plain variable after edit: %+v", after["region_name"])
	}
	if got := after["api_key"]; got.Description != "payment gateway key" || got.ValueVersion != secret.ValueVersion || !got.Sensitive {
		t.Fatalf("sensitive variable after describing it: %+v (was %+v)", got, secret)
	}
	// Delete asks once more before it deletes.
	obsolete := after["obsolete"]
	browse(t, ctx, "asking to delete", chromedp.Click(chromedp.CSS("form[action$='/variables/"+obsolete.ID+"/delete'] button")))
	waitText(t, ctx, "#var-"+obsolete.ID, "Runs created from now on no longer see it")
	if _, still := s.variables(t, m, ws)["obsolete"]; !still {
		t.Fatal("the first click deleted the variable")
	}
	browse(t, ctx, "confirming the delete", chromedp.Click(chromedp.CSS("#var-"+obsolete.ID+" button.danger")))
	waitText(t, ctx, ".notice", "Variable deleted")
	if _, still := s.variables(t, m, ws)["obsolete"]; still {
		t.Fatal("the variable survived its confirmed delete")
	}

	// Settings: rename and switch to local execution.
	browse(t, ctx, "changing settings",
		chromedp.Navigate(s.DashboardURL+"/workspaces/"+ws+"/settings"),
		chromedp.WaitVisible(chromedp.CSS("#set-ws-name")),
		chromedp.SetValue(chromedp.CSS("#set-ws-name"), "network-core"),
		chromedp.SetValue(chromedp.CSS("#set-mode"), "local"),
		chromedp.Submit(chromedp.CSS("#set-ws-name")),
	)
	waitText(t, ctx, ".notice", "Settings saved")
	waitText(t, ctx, "h1", "network-core")
	var w struct {
		Name          string `json:"name"`
		ExecutionMode string `json:"execution_mode"`
	}
	s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+ws, nil, &w, m.cookie()...)
	if w.Name != "network-core" || w.ExecutionMode != "local" {
		t.Fatalf("workspace after settings: %+v", w)
	}

	// The states tab names the run that wrote the version and its outputs.
	browse(t, ctx, "states tab", chromedp.Navigate(s.DashboardURL+"/workspaces/"+ws+"/states"), chromedp.WaitVisible(chromedp.CSS("#state-versions")))
	waitText(t, ctx, "#state-versions", runs[3])
	waitText(t, ctx, "#state-outputs", "10.0.0.0/16")

	// The runs tab lists every run with a copyable ID.
	browse(t, ctx, "runs tab", chromedp.Navigate(s.DashboardURL+"/workspaces/"+ws+"/runs"), chromedp.WaitVisible(chromedp.CSS("#workspace-runs")))
	if n := count(t, ctx, "#workspace-runs button.copy[data-copy^=run_]"); n != len(runs) {
		t.Fatalf("runs tab shows %d copyable run IDs, want %d", n, len(runs))
	}
	// Who started a run is a name, not an ID.
	waitText(t, ctx, "#workspace-runs tbody tr", "tabs")
	waitText(t, ctx, "#workspace-runs tbody tr", "API or dashboard")
	expectNoExceptions(t, ctx)
}

func mustPage(t *testing.T, ctx context.Context) string {
	t.Helper()
	html, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.documentElement.outerHTML"))
	if err != nil {
		t.Fatal(err)
	}
	return html
}
