package site

import (
	"bytes"
	"encoding/json"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/bff/apiclient"
	"github.com/cairnhq/cairn/web"
)

// renderPage executes one page template in the layout as render does.
func renderPage(t *testing.T, name string, page any) string {
	t.Helper()
	base, err := template.New("").Funcs(funcs).ParseFS(web.Templates, "templates/layout.html", "templates/partials.html", "templates/"+name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out bytes.Buffer
	f := frame{Title: "t", CSRF: "c", Nav: true, Page: page}
	if err := base.ExecuteTemplate(&out, "layout", f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out.String()
}

func postForm(values url.Values) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(values.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	_ = r.ParseForm()
	return r
}

// TestOrganizationAccessFormCoversTheOneMapping: the form offers exactly
// the flags access.OrganizationAccess declares, and saving it sets every
// flag (unticked ones false), so the API's merge cannot keep a flag the
// form showed as off.
func TestOrganizationAccessFormCoversTheOneMapping(t *testing.T) {
	t.Parallel()
	raw, _ := json.Marshal(access.OrganizationAccess{})
	var want map[string]bool
	_ = json.Unmarshal(raw, &want)
	if len(organizationAccessFlags) != len(want) {
		t.Fatalf("the form offers %v, the mapping has %v", organizationAccessFlags, want)
	}
	got := organizationAccessForm(postForm(url.Values{"access_manage_workspaces": {"on"}, "access_read_projects": {"on"}}))
	want["manage_workspaces"], want["read_projects"] = true, true
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatal(diff)
	}
}

// TestTeamBody: the organization access goes only with a form that showed
// it; an empty SSO team ID is left out of a new team and clears an
// existing one's.
func TestTeamBody(t *testing.T) {
	t.Parallel()
	plain := postForm(url.Values{"name": {" platform "}, "visibility": {"organization"}, "sso_team_id": {""}})
	body := teamBody(plain, false)
	if _, has := body["sso_team_id"]; has || body["name"] != "platform" || body["organization_access"] != nil {
		t.Fatalf("create body %v", body)
	}
	if v, has := teamBody(plain, true)["sso_team_id"]; !has || v != "" {
		t.Fatalf("an emptied SSO team ID does not clear it: %v", v)
	}
	shown := postForm(url.Values{"name": {"p"}, "sso_team_id": {"grp-1"}, "organization_access": {"shown"}, "access_manage_teams": {"on"}})
	body = teamBody(shown, false)
	flags, _ := body["organization_access"].(map[string]bool)
	if body["sso_team_id"] != "grp-1" || !flags["manage_teams"] || flags["manage_workspaces"] {
		t.Fatalf("body %v", body)
	}
}

// TestGrantBodySendsAttributesOnlyWithCustom: the API refuses attributes
// with a fixed level; with custom they are typed (selects as strings,
// checkboxes as booleans) and a project grant's are grouped.
func TestGrantBodySendsAttributesOnlyWithCustom(t *testing.T) {
	t.Parallel()
	attrs := url.Values{"access": {"plan"}, "runs": {"apply"}, "workspace_locking": {"on"}}
	if diff := cmp.Diff(map[string]any{"access": "plan"}, grantBody(postForm(attrs), workspaceAttributes)); diff != "" {
		t.Fatal(diff)
	}
	attrs.Set("access", "custom")
	attrs.Set("variables", "read")
	attrs.Set("state_versions", "read-outputs")
	attrs.Set("sentinel_mocks", "none")
	want := map[string]any{"access": "custom", "runs": "apply", "variables": "read", "state_versions": "read-outputs",
		"sentinel_mocks": "none", "workspace_locking": true, "run_tasks": false}
	if diff := cmp.Diff(want, grantBody(postForm(attrs), workspaceAttributes)); diff != "" {
		t.Fatal(diff)
	}
	project := url.Values{"access": {"custom"}, "project_access.settings": {"update"}, "project_access.teams": {"none"},
		"project_access.variable_sets": {"read"}, "workspace_access.runs": {"plan"}, "workspace_access.variables": {"none"},
		"workspace_access.state_versions": {"read"}, "workspace_access.sentinel_mocks": {"none"}, "workspace_access.create_workspaces": {"on"}}
	got := grantBody(postForm(project), projectAttributes)
	wantProject := map[string]any{"access": "custom",
		"project_access": map[string]any{"settings": "update", "teams": "none", "variable_sets": "read"},
		"workspace_access": map[string]any{"runs": "plan", "variables": "none", "state_versions": "read", "sentinel_mocks": "none",
			"create_workspaces": true, "locking": false, "move_workspaces": false, "delete_workspaces": false, "run_tasks": false}}
	if diff := cmp.Diff(wantProject, got); diff != "" {
		t.Fatal(diff)
	}
}

// TestGrantFieldsShowTheGrantsValues: a grant's form preselects its
// values, nested project values included; a new grant starts from the
// custom level's defaults (the first choice, nothing ticked).
func TestGrantFieldsShowTheGrantsValues(t *testing.T) {
	t.Parallel()
	var g teamGrant
	if err := json.Unmarshal([]byte(`{"id":"tpa_1","team_id":"team_1","team_name":"platform","access":"custom",
		"project_access":{"settings":"update"},"workspace_access":{"runs":"plan","create_workspaces":true}}`), &g); err != nil {
		t.Fatal(err)
	}
	if g.TeamName != "platform" || g.Access != "custom" {
		t.Fatalf("grant %+v", g)
	}
	fields := g.Fields(projectAttributes)
	byKey := map[string]attributeField{}
	for _, f := range fields {
		byKey[f.Key()] = f
	}
	if !byKey["project_access.settings"].Selected("update") || byKey["project_access.settings"].Selected("read") ||
		!byKey["workspace_access.runs"].Selected("plan") || !byKey["workspace_access.create_workspaces"].Checked() ||
		byKey["workspace_access.locking"].Checked() || !byKey["project_access.teams"].Selected("none") {
		t.Fatalf("fields %+v", fields)
	}
	if custom := g.Custom(projectAttributes); !slices.Contains(custom, "runs: plan") || !slices.Contains(custom, "create_workspaces") ||
		slices.Contains(custom, "locking") {
		t.Fatalf("custom summary %v", custom)
	}
	for _, f := range (teamGrant{}).Fields(workspaceAttributes) {
		if f.ID != "new" || (f.Choices != nil && !f.Selected(f.Choices[0])) || f.Checked() {
			t.Fatalf("new grant field %+v", f)
		}
	}
}

// TestForbiddenListMeansNothingReachable: a list refused for want of the
// permission anywhere is empty; any other failure stays a failure.
func TestForbiddenListMeansNothingReachable(t *testing.T) {
	t.Parallel()
	page, err := reachable(apiclient.Page[project]{Data: []project{{ID: "x"}}}, &apiclient.Error{Status: http.StatusForbidden})
	if err != nil || len(page.Data) != 0 {
		t.Fatalf("forbidden: %v %v", page, err)
	}
	for _, status := range []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusUnauthorized, http.StatusNotFound} {
		if _, err := reachable(apiclient.Page[project]{}, &apiclient.Error{Status: status}); err == nil {
			t.Fatalf("%d became an empty list", status)
		}
	}
}

// TestTeamPagesOfferOnlyWhatTheCallerMay: a team manager gets the create,
// settings, member and delete forms (no delete and no organization access
// for the owners team, no organization access without
// team:organization_access); anyone else gets no form at all.
func TestTeamPagesOfferOnlyWhatTheCallerMay(t *testing.T) {
	t.Parallel()
	sso := "grp-7"
	platform := team{ID: "team_p", Name: "platform", Visibility: "organization", SSOTeamID: &sso, MemberCount: 1,
		OrganizationAccess: map[string]bool{"manage_workspaces": true}}
	owners := team{ID: "team_o", Name: "owners", Visibility: "secret", Owners: true, MemberCount: 1}
	members := []teamMember{{UserID: "usr_1", Name: "Ada", Email: "ada@x", Role: "owner"}}
	candidates := []orgMember{{UserID: "usr_2", Name: "Bob", Email: "bob@x", Role: "member"}}
	page := func(t team, manage, orgAccess bool) teamPage {
		return teamPage{Tab: "teams", Team: t, Members: members, Candidates: candidates, CanManage: manage, CanAccess: orgAccess,
			Visibility: teamVisibilities, AccessFlags: organizationAccessFlags}
	}
	html := renderPage(t, "org-team.html", page(platform, true, true))
	for _, want := range []string{`id="add-team-member"`, `value="usr_2"`, `id="team-settings"`, `id="delete-team"`, `name="access_manage_workspaces" checked`,
		`name="access_read_workspaces">`, `value="grp-7"`, `/organization/teams/team_p/members/usr_1/remove`, `href="/organization/teams" aria-current="page"`} {
		if !strings.Contains(html, want) {
			t.Errorf("the team page for a manager lacks %s", want)
		}
	}
	html = renderPage(t, "org-team.html", page(platform, true, false))
	if strings.Contains(html, `name="organization_access"`) || !strings.Contains(html, `id="team-settings"`) {
		t.Error("the team form offers organization access to who may not set it")
	}
	html = renderPage(t, "org-team.html", page(owners, true, true))
	if strings.Contains(html, `id="delete-team"`) || strings.Contains(html, `name="organization_access"`) || !strings.Contains(html, `id="team-name" name="name" required maxlength="200" value="owners" readonly`) {
		t.Error("the owners team may be deleted, renamed or given organization access from its page")
	}
	html = renderPage(t, "org-team.html", page(platform, false, false))
	if n := strings.Count(html, `method="post"`); n != 1 || !strings.Contains(html, "manage workspaces") {
		t.Errorf("a non-manager's team page has %d forms besides sign-out, or hides the team's access", n-1)
	}
	list := teamsPage{Tab: "teams", Teams: []team{owners, platform}, CanManage: true, CanAccess: true, Visibility: teamVisibilities, AccessFlags: organizationAccessFlags}
	html = renderPage(t, "org-teams.html", list)
	for _, want := range []string{`id="create-team"`, `<code>grp-7</code>`, `owners</span>`, `<option value="secret" selected>`, `name="access_manage_teams">`} {
		if !strings.Contains(html, want) {
			t.Errorf("the teams list lacks %s", want)
		}
	}
	list.CanManage = false
	if html = renderPage(t, "org-teams.html", list); strings.Contains(html, `id="create-team"`) {
		t.Error("the teams list offers creation to a non-manager")
	}
}

// TestTeamAccessPanels: the workspace and project grant panels list the
// grants with their custom access, offer level, custom attributes and
// revoke to who may grant, and only the list to anyone else.
func TestTeamAccessPanels(t *testing.T) {
	t.Parallel()
	owner, member := callerOf(ptr("owner"), "usr_1"), callerOf(ptr("member"), "usr_2")
	grants := []teamGrant{{ID: "twa_1", TeamID: "team_p", TeamName: "platform", Access: "plan"},
		{ID: "twa_2", TeamID: "team_c", TeamName: "contractors", Access: "custom", Values: map[string]any{"runs": "read", "state_versions": "read-outputs"}}}
	panel := func(manage bool) teamAccess {
		return teamAccess{Grants: grants, Teams: []team{{ID: "team_n", Name: "new"}}, Levels: workspaceLevels, attrs: workspaceAttributes,
			CanManage: manage, Subject: "workspace", Action: workspaceTeamAccessPath("ws_1")}
	}
	sh := &workspaceShell{Tab: "settings", Caller: owner}
	sh.Workspace.ID, sh.Workspace.Name = "ws_1", "network"
	html := renderPage(t, "workspace-team-access.html", workspaceTeamAccessPage{workspaceShell: sh, Access: panel(true)})
	for _, want := range []string{`id="grant-team-access"`, `<option value="team_n">`, `action="/workspaces/ws_1/settings/team-access/twa_2/revoke"`,
		`<code>state versions: read-outputs</code>`, `id="twa_2-state_versions"`, `<option value="read-outputs" selected>`, `id="new-workspace_locking"`,
		`<option value="plan" selected>`, `href="/workspaces/ws_1/settings" aria-current="page"`} {
		if !strings.Contains(html, want) {
			t.Errorf("the workspace team access page lacks %s", want)
		}
	}
	sh.Caller = member
	html = renderPage(t, "workspace-team-access.html", workspaceTeamAccessPage{workspaceShell: sh, Access: panel(false)})
	if n := strings.Count(html, `method="post"`); n != 1 || !strings.Contains(html, "contractors") || !strings.Contains(html, "administer this workspace") {
		t.Errorf("a member's team access page has %d forms besides sign-out", n-1)
	}
	project := projectPage{Tab: "projects", Project: project{ID: "prj_1", Name: "core"}, Workspaces: []workspaceRef{{ID: "ws_1", Name: "network", ProjectID: "prj_1"}},
		Access: teamAccess{Levels: projectLevels, attrs: projectAttributes, CanManage: true, Subject: "project", Action: projectPath("prj_1") + "/team-access",
			Teams: []team{{ID: "team_n", Name: "new"}}}}
	html = renderPage(t, "org-project.html", project)
	for _, want := range []string{`action="/organization/projects/prj_1/team-access"`, `id="new-project_access.settings"`, `<option value="maintain">`,
		`name="workspace_access.delete_workspaces"`, `href="/workspaces/ws_1"`, "No team has access here yet"} {
		if !strings.Contains(html, want) {
			t.Errorf("the project page lacks %s", want)
		}
	}
}

// TestMemberPageAndInvitations: a member's page lists their teams and
// effective access per workspace; invitations offer the member role first
// and select it.
func TestMemberPageAndInvitations(t *testing.T) {
	t.Parallel()
	var m memberAccess
	if err := json.Unmarshal([]byte(`{"user_id":"usr_2","email":"bob@x","name":"Bob","role":"member","teams":[{"id":"team_p","name":"platform"}],
		"workspaces":[{"workspace_id":"ws_a","workspace_name":"alpha","project_id":"prj_1","permissions":["run:create","workspace:read"],"via":["platform"]}],
		"organization_permissions":["organization:read"]}`), &m); err != nil {
		t.Fatal(err)
	}
	html := renderPage(t, "org-member.html", memberPage{Tab: "general", Member: m})
	for _, want := range []string{`href="/organization/teams/team_p">platform</a>`, `id="member-ws-ws_a"`, `<code>run:create</code>`, "reaches only what their teams grant"} {
		if !strings.Contains(html, want) {
			t.Errorf("the member page lacks %s", want)
		}
	}
	for _, role := range []string{"owner", "admin"} {
		if inviteRoles(role)[0] != "member" {
			t.Errorf("%s invites as %v first", role, inviteRoles(role))
		}
	}
	html = renderPage(t, "organizations.html", organizationsPage{Tab: "general", ActiveID: "org_1", Self: "usr_1", InviteRoles: inviteRoles("owner"),
		Members: []orgMember{{UserID: "usr_2", Name: "Bob", Role: "member"}}})
	if !strings.Contains(html, `<option value="member" selected>member</option>`) || strings.Contains(html, `<option value="writer" selected>`) ||
		!strings.Contains(html, `href="/organization/members/usr_2"`) {
		t.Error("the invite form does not default to the member role, or members are not linked to their pages")
	}
}

// TestEmptyWorkspacesExplainTeams: a caller who may not create workspaces
// and reaches none is told why, without a create form.
func TestEmptyWorkspacesExplainTeams(t *testing.T) {
	t.Parallel()
	html := renderPage(t, "workspaces.html", workspacesPage{})
	if !strings.Contains(html, "ask an organization admin or a team manager") || strings.Contains(html, `action="/workspaces"`) {
		t.Error("a member without grants gets no explanation, or a create form")
	}
	html = renderPage(t, "workspaces.html", workspacesPage{CanCreate: true})
	if !strings.Contains(html, "No workspaces yet.") || !strings.Contains(html, `action="/workspaces"`) {
		t.Error("a writer without workspaces gets no create form")
	}
	html = renderPage(t, "runs.html", runsPage{})
	if !strings.Contains(html, "No workspaces you can reach yet") {
		t.Error("the runs page does not explain an empty reach")
	}
}

func ptr[T any](v T) *T { return &v }

// TestTeamRefusalsNameTheirCause: each team conflict the API names is
// explained as itself, not as a generic failure.
func TestTeamRefusalsNameTheirCause(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, code := range []string{"TEAM_NAME_TAKEN", "TEAM_SSO_TEAM_ID_TAKEN", "TEAM_ACCESS_EXISTS", "OWNERS_TEAM_FIXED", "OWNERS_TEAM_EMPTY"} {
		message := teamRefusal(&apiclient.Error{Status: http.StatusConflict, Code: code})
		if seen[message] || strings.Contains(message, "refused (409") {
			t.Errorf("%s: %q", code, message)
		}
		seen[message] = true
	}
}

// TestToolSelectsNameTheCLI: the create and settings forms offer every
// version the API lists under its program's name, and keep the pinned one
// selected.
func TestToolSelectsNameTheCLI(t *testing.T) {
	t.Parallel()
	tools := []toolOption{{Version: "1.10.6", CLI: "tofu", CLIVersion: "1.10.6"}, {Version: "terraform-1.5.7", CLI: "terraform", CLIVersion: "1.5.7"}}
	html := renderPage(t, "workspaces.html", workspacesPage{CanCreate: true, ToolVersions: tools})
	if !strings.Contains(html, `<option value="1.10.6">OpenTofu 1.10.6</option>`) ||
		!strings.Contains(html, `<option value="terraform-1.5.7">Terraform 1.5.7</option>`) {
		t.Errorf("the create form's tool select:\n%s", html)
	}
	sh := &workspaceShell{Tab: "settings", Caller: caller{Role: "owner", perms: access.PermissionsOf(access.RoleOwner)}}
	sh.Workspace.ID = "ws_1"
	sh.Workspace.ExecutionSettings.ToolVersion = "terraform-1.5.7"
	html = renderPage(t, "workspace-settings.html", settingsPage{workspaceShell: sh, ToolVersions: tools, Regions: []string{"us"},
		Platforms: []string{"linux_amd64"}, Modes: []string{"remote"}})
	if !strings.Contains(html, `<option value="terraform-1.5.7" selected>Terraform 1.5.7</option>`) {
		t.Errorf("the settings form does not keep Terraform selected")
	}
}
