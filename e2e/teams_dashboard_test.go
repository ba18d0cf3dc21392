package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestTeamsDashboard: an owner creates a team from the dashboard, adds a
// second user (member role) to it and grants it plan on workspace A (the
// custom attributes show only with the custom level). The second user's
// dashboard lists A and not B; B's URL renders exactly as a workspace that
// does not exist; A's settings are not offered and a settings post the
// page never offered is refused; A offers a run; their member page shows
// the team and A with what they may do there. Revoking the grant from the
// dashboard empties their workspaces page on the next request, with an
// explanation.
func TestTeamsDashboard(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	owner := s.newMember(t, "teamsowner")
	alpha := s.createWorkspace(t, owner, "alpha", "us")
	bravo := s.createWorkspace(t, owner, "bravo", "us")
	second := s.joinAs(t, owner, "teammate", "member")
	var self struct {
		User struct{ ID string } `json:"user"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/api/auth/get-session", nil, &self, second.cookie()...); st != http.StatusOK || self.User.ID == "" {
		t.Fatalf("the second user's session: %d", st)
	}

	ctx := newBrowser(t)
	signInAs(t, ctx, s, owner.email)
	browse(t, ctx, "creating a team",
		chromedp.Navigate(s.DashboardURL+"/organization/teams"),
		chromedp.WaitVisible(chromedp.CSS("#create-team")),
		chromedp.SendKeys(chromedp.CSS("#team-name"), "platform"),
		chromedp.SendKeys(chromedp.CSS("#team-sso"), "idp-group-7"),
		chromedp.Click(chromedp.CSS("#create-team button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#add-team-member")),
	)
	waitText(t, ctx, "main .notice", "Team created")
	waitText(t, ctx, "main .muted", "idp-group-7")
	browse(t, ctx, "adding the second user",
		chromedp.SetValue(chromedp.CSS("#team-add-user"), self.User.ID),
		chromedp.Click(chromedp.CSS("#add-team-member button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#team-member-"+self.User.ID)),
	)
	waitText(t, ctx, "main .notice", "Member added")
	browse(t, ctx, "opening A's team access",
		chromedp.Navigate(s.DashboardURL+"/workspaces/"+alpha+"/settings"),
		chromedp.Click(chromedp.CSS("#team-access-settings")),
		chromedp.WaitVisible(chromedp.CSS("#grant-team-access")),
	)
	attrs := "getComputedStyle(document.querySelector('#grant-team-access .custom-attrs')).display"
	for level, display := range map[string]string{"custom": "block", "plan": "none"} {
		browse(t, ctx, "choosing "+level, chromedp.SetValue(chromedp.CSS("#grant-level"), level))
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](attrs))
		if err != nil || got != display {
			t.Fatalf("custom attributes with level %s: display %q (%v)", level, got, err)
		}
	}
	browse(t, ctx, "granting plan",
		chromedp.SetValue(chromedp.CSS("#grant-level"), "plan"),
		chromedp.Click(chromedp.CSS("#grant-team-access button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#team-access")),
	)
	waitText(t, ctx, "main .notice", "Team access granted")
	waitText(t, ctx, "#team-access tbody", "platform")
	waitText(t, ctx, "#team-access tbody", "plan")
	screenshot(t, ctx, "workspace-team-access")
	expectNoExceptions(t, ctx)

	member := newBrowser(t)
	signInAs(t, member, s, second.email)
	switchOrganization(t, member, s, owner.orgID)
	browse(t, member, "the member's workspaces", chromedp.Navigate(s.DashboardURL+"/workspaces"), chromedp.WaitVisible(chromedp.CSS("main table")))
	waitText(t, member, "main table", "alpha")
	if text, _ := chromedp.Run(member, chromedp.Text(chromedp.CSS("main"))); strings.Contains(text, "bravo") || count(t, member, "a[href='/workspaces/"+bravo+"']") != 0 {
		t.Fatalf("the member's workspaces list shows B:\n%s", text)
	}
	// B answers exactly as a workspace that does not exist.
	refusal := func(id string) string {
		browse(t, member, "opening "+id, chromedp.Navigate(s.DashboardURL+"/workspaces/"+id), chromedp.WaitVisible(chromedp.CSS(".unavailable-panel")))
		text, err := chromedp.Run(member, chromedp.Text(chromedp.CSS(".unavailable-panel")))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(text, " · request")[0]
	}
	if b, missing := refusal(bravo), refusal("ws_00000000000000000000000000"); b != missing {
		t.Fatalf("B renders %q, a missing workspace %q", b, missing)
	}
	browse(t, member, "A's settings", chromedp.Navigate(s.DashboardURL+"/workspaces/"+alpha+"/settings"), chromedp.WaitVisible(chromedp.CSS("#workspace-settings")))
	if count(t, member, "#workspace-settings fieldset[disabled]") != 1 || count(t, member, "#workspace-settings button") != 0 {
		t.Fatal("A's settings are offered to a member whose team may only plan")
	}
	if count(t, member, "#connect-and-run") != 1 {
		t.Fatal("A does not offer a run to a member whose team may plan there")
	}
	browse(t, member, "A's team access", chromedp.Navigate(s.DashboardURL+"/workspaces/"+alpha+"/settings/team-access"), chromedp.WaitVisible(chromedp.CSS("#team-access")))
	if count(t, member, "main form[method=post]") != 0 {
		t.Fatal("a member may change A's team access")
	}
	d := signInToDashboard(t, s, second.email)
	if st, _ := d.form(t, "/organizations/active", map[string]string{"organization_id": owner.orgID}); st != http.StatusSeeOther {
		t.Fatalf("switching organization: %d", st)
	}
	if st, _ := d.form(t, "/workspaces/"+alpha+"/settings", map[string]string{"name": "renamed", "tool_version": "1.10.6", "region": "us",
		"platform": "linux_amd64", "execution_mode": "remote"}); st != http.StatusForbidden {
		t.Fatalf("the member's settings post: %d", st)
	}
	browse(t, member, "the member's page", chromedp.Navigate(s.DashboardURL+"/organizations"), chromedp.WaitVisible(chromedp.CSS("#member-"+self.User.ID)),
		chromedp.Click(chromedp.CSS("#member-"+self.User.ID+" a")), chromedp.WaitVisible(chromedp.CSS("#member-workspaces")))
	waitText(t, member, "#member-teams", "platform")
	waitText(t, member, "#member-ws-"+alpha, "run:create")
	if count(t, member, "#member-ws-"+bravo) != 0 {
		t.Fatal("the member page lists B")
	}
	screenshot(t, member, "member-access")

	// Revoking the grant from the dashboard narrows the member's next
	// request. (A form post: the owner's browser has lived long enough.)
	var grants []struct{ ID string }
	if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+alpha+"/team-access", nil, &grants, owner.cookie()...); st != http.StatusOK || len(grants) != 1 {
		t.Fatalf("A's grants: %d %v", st, grants)
	}
	o := signInToDashboard(t, s, owner.email)
	if st, body := o.form(t, "/workspaces/"+alpha+"/settings/team-access/"+grants[0].ID+"/revoke", nil); st != http.StatusSeeOther {
		t.Fatalf("revoking: %d\n%s", st, body)
	}
	browse(t, member, "the member's workspaces after revoking", chromedp.Navigate(s.DashboardURL+"/workspaces"), chromedp.WaitVisible(chromedp.CSS("#no-workspaces")))
	waitText(t, member, "#no-workspaces", "ask an organization admin or a team manager")
	expectNoExceptions(t, member)
}
