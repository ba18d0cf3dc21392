package site

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/bff/apiclient"
)

// accessAttribute is one of HCP's custom team-access attributes as the
// grant forms offer it: a choice of values, or a checkbox when Choices is
// nil. The first choice is the custom level's default.
type accessAttribute struct {
	Name    string
	Group   string // "" for a workspace grant; project_access or workspace_access for a project grant
	Choices []string
}

var (
	runsAttribute          = accessAttribute{Name: "runs", Choices: []string{"read", "plan", "apply"}}
	variablesAttribute     = accessAttribute{Name: "variables", Choices: []string{"none", "read", "write"}}
	stateVersionsAttribute = accessAttribute{Name: "state_versions", Choices: []string{"none", "read-outputs", "read", "write"}}
	sentinelMocksAttribute = accessAttribute{Name: "sentinel_mocks", Choices: []string{"none", "read"}}
)

// workspaceAttributes are a workspace grant's custom attributes.
var workspaceAttributes = []accessAttribute{runsAttribute, variablesAttribute, stateVersionsAttribute, sentinelMocksAttribute,
	{Name: "workspace_locking"}, {Name: "run_tasks"}}

// projectAttributes are a project grant's: the project's own, then those
// it gives in each of the project's workspaces.
var projectAttributes = append([]accessAttribute{
	{Name: "settings", Group: "project_access", Choices: []string{"read", "update", "delete"}},
	{Name: "teams", Group: "project_access", Choices: []string{"none", "read", "manage"}},
	{Name: "variable_sets", Group: "project_access", Choices: []string{"none", "read", "write"}},
}, inGroup("workspace_access", runsAttribute, variablesAttribute, stateVersionsAttribute, sentinelMocksAttribute,
	accessAttribute{Name: "create_workspaces"}, accessAttribute{Name: "locking"}, accessAttribute{Name: "move_workspaces"},
	accessAttribute{Name: "delete_workspaces"}, accessAttribute{Name: "run_tasks"})...)

func inGroup(group string, attrs ...accessAttribute) []accessAttribute {
	for i := range attrs {
		attrs[i].Group = group
	}
	return attrs
}

// Workspace and project levels in the order HCP lists them.
var (
	workspaceLevels = []string{access.LevelRead, access.LevelPlan, access.LevelWrite, access.LevelAdmin, access.LevelCustom}
	projectLevels   = []string{access.LevelRead, access.LevelWrite, access.LevelMaintain, access.LevelAdmin, access.LevelCustom}
)

// teamGrant is a team's workspace or project grant. Values holds its
// custom attributes by name: a workspace grant carries them at the top
// level, a project grant in project_access and workspace_access.
type teamGrant struct {
	ID       string `json:"id"`
	TeamID   string `json:"team_id"`
	TeamName string `json:"team_name"`
	Access   string `json:"access"`
	Values   map[string]any
}

func (g *teamGrant) UnmarshalJSON(raw []byte) error {
	type plain teamGrant
	if err := json.Unmarshal(raw, (*plain)(g)); err != nil {
		return err
	}
	var all map[string]any
	if err := json.Unmarshal(raw, &all); err != nil {
		return err
	}
	g.Values = map[string]any{}
	for k, v := range all {
		if nested, ok := v.(map[string]any); ok && (k == "project_access" || k == "workspace_access") {
			for nk, nv := range nested {
				g.Values[k+"."+nk] = nv
			}
			continue
		}
		g.Values[k] = v
	}
	return nil
}

// attributeField is one attribute's control in a grant form.
type attributeField struct {
	accessAttribute
	// ID is unique on the page (a grant's ID, or "new").
	ID    string
	Value any
}

// Key is the attribute's form and Values name.
func (a accessAttribute) Key() string {
	if a.Group == "" {
		return a.Name
	}
	return a.Group + "." + a.Name
}

// Selected reports whether choice is the field's value, or, without one,
// the first (the custom level's default).
func (f attributeField) Selected(choice string) bool {
	if v, ok := f.Value.(string); ok {
		return v == choice
	}
	return choice == f.Choices[0]
}

// Checked reports whether a checkbox attribute is on.
func (f attributeField) Checked() bool { v, _ := f.Value.(bool); return v }

// Fields are the grant's attribute controls.
func (g teamGrant) Fields(attrs []accessAttribute) []attributeField {
	id := g.ID
	if id == "" {
		id = "new"
	}
	out := make([]attributeField, len(attrs))
	for i, a := range attrs {
		out[i] = attributeField{accessAttribute: a, ID: id, Value: g.Values[a.Key()]}
	}
	return out
}

// Custom describes a custom grant's attributes for the grants table.
func (g teamGrant) Custom(attrs []accessAttribute) []string {
	if g.Access != access.LevelCustom {
		return nil
	}
	var out []string
	for _, f := range g.Fields(attrs) {
		switch v := f.Value.(type) {
		case string:
			out = append(out, f.Name+": "+v)
		case bool:
			if v {
				out = append(out, f.Name)
			}
		}
	}
	return out
}

// grantBody reads a grant form: the level, and with custom the
// attributes (the API refuses them with a fixed level).
func grantBody(r *http.Request, attrs []accessAttribute) map[string]any {
	level := r.PostFormValue("access")
	body := map[string]any{"access": level}
	if level != access.LevelCustom {
		return body
	}
	for _, a := range attrs {
		var v any = r.PostFormValue(a.Key()) == "on"
		if a.Choices != nil {
			v = r.PostFormValue(a.Key())
		}
		if a.Group == "" {
			body[a.Name] = v
			continue
		}
		group, _ := body[a.Group].(map[string]any)
		if group == nil {
			group = map[string]any{}
			body[a.Group] = group
		}
		group[a.Name] = v
	}
	return body
}

// teamAccess is the grants panel of a workspace or a project: the grants,
// the teams that have none yet, and whether the caller may change them.
type teamAccess struct {
	Grants    []teamGrant
	Teams     []team
	Levels    []string
	attrs     []accessAttribute
	CanManage bool
	// Subject is what the grants are on: workspace or project.
	Subject string
	// Action is the grants' base path on the dashboard.
	Action string
}

// Fields are a grant's attribute controls.
func (t teamAccess) Fields(g teamGrant) []attributeField { return g.Fields(t.attrs) }

// Custom describes a custom grant.
func (t teamAccess) Custom(g teamGrant) []string { return g.Custom(t.attrs) }

// NewFields are the grant form's attribute controls.
func (t teamAccess) NewFields() []attributeField { return teamGrant{}.Fields(t.attrs) }

// loadTeamAccess reads a workspace's or project's grants from path and,
// for a caller who may grant, the teams without one.
func (s *Site) loadTeamAccess(ctx context.Context, token, path string, ta teamAccess) (teamAccess, error) {
	grants, err := apiclient.List[teamGrant](ctx, s.api, token, path)
	if err != nil {
		return ta, err
	}
	ta.Grants = grants.Data
	if !ta.CanManage {
		return ta, nil
	}
	teams, err := apiclient.List[team](ctx, s.api, token, "/v1/teams?limit=100")
	if err != nil {
		return ta, err
	}
	for _, t := range teams.Data {
		if !t.Owners && !slices.ContainsFunc(ta.Grants, func(g teamGrant) bool { return g.TeamID == t.ID }) {
			ta.Teams = append(ta.Teams, t)
		}
	}
	return ta, nil
}

// workspaceTeamAccessPage is the workspace's Settings → Team access.
type workspaceTeamAccessPage struct {
	*workspaceShell
	Access teamAccess
}

func workspaceTeamAccessPath(workspaceID string) string {
	return "/workspaces/" + url.PathEscape(workspaceID) + "/settings/team-access"
}

func (s *Site) loadWorkspaceTeamAccess(ctx context.Context, _ *http.Request, token string, sh *workspaceShell) (any, error) {
	// The page belongs to Settings in the tab bar.
	sh.Tab = "settings"
	canManage := sh.Caller.Can(string(access.PermTeamManage)) && sh.Caller.Can(string(access.PermWorkspaceAdmin))
	ta, err := s.loadTeamAccess(ctx, token, "/v1/workspaces/"+url.PathEscape(sh.Workspace.ID)+"/team-access",
		teamAccess{Subject: "workspace", Action: workspaceTeamAccessPath(sh.Workspace.ID), attrs: workspaceAttributes, Levels: workspaceLevels, CanManage: canManage})
	return workspaceTeamAccessPage{workspaceShell: sh, Access: ta}, err
}

// projectPage is one project: its workspaces and its team access.
type projectPage struct {
	Tab        string
	Project    project
	Workspaces []workspaceRef
	Access     teamAccess
	Notice     string
	Error      string
}

func projectPath(id string) string { return "/organization/projects/" + url.PathEscape(id) }

func (s *Site) projectPage(w http.ResponseWriter, r *http.Request, token string) {
	s.renderProject(w, r, token, http.StatusOK, projectPage{Notice: workspaceNotices[r.URL.Query().Get("done")]})
}

func (s *Site) renderProject(w http.ResponseWriter, r *http.Request, token string, status int, page projectPage) {
	f := s.frame(r, "Project")
	ctx := r.Context()
	page.Tab = "projects"
	id := r.PathValue("projectId")
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/projects/"+url.PathEscape(id), nil, &page.Project); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	f.Title = page.Project.Name
	c, err := s.effectiveCaller(ctx, token, f, "")
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	workspaces, err := s.reachableWorkspaces(ctx, token)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	for _, ws := range workspaces {
		if ws.ProjectID == page.Project.ID {
			page.Workspaces = append(page.Workspaces, ws)
		}
	}
	canManage := c.Can(string(access.PermTeamManage)) && c.Can(string(access.PermWorkspaceAdmin))
	page.Access, err = s.loadTeamAccess(ctx, token, "/v1/projects/"+url.PathEscape(page.Project.ID)+"/team-access",
		teamAccess{Subject: "project", Action: projectPath(page.Project.ID) + "/team-access", attrs: projectAttributes, Levels: projectLevels, CanManage: canManage})
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	f.Page = page
	s.render(w, r, status, "org-project.html", f)
}

// grantActions are one kind of grant's /v1 paths and form attributes, and
// how the dashboard answers an action on it: back to its page with a
// notice, or that page again with the refusal.
type grantActions struct {
	attrs []accessAttribute
	// collection and param name the subject's grants:
	// collection + {param} + "/team-access".
	collection, param string
	// grants is the prefix of one grant's path.
	grants  string
	refused func(s *Site, w http.ResponseWriter, r *http.Request, token string, err error)
	back    func(w http.ResponseWriter, r *http.Request, done string)
}

var workspaceGrants = grantActions{attrs: workspaceAttributes, collection: "/v1/workspaces/", param: "id", grants: "/v1/workspace-team-access/",
	refused: func(s *Site, w http.ResponseWriter, r *http.Request, token string, err error) {
		s.showWorkspaceTab(w, r, token, "team-access", s.loadWorkspaceTeamAccess, refusedStatus(err), teamRefusal(err))
	},
	back: func(w http.ResponseWriter, r *http.Request, done string) { backTo(w, r, "settings/team-access", done) }}

var projectGrants = grantActions{attrs: projectAttributes, collection: "/v1/projects/", param: "projectId", grants: "/v1/project-team-access/",
	refused: func(s *Site, w http.ResponseWriter, r *http.Request, token string, err error) {
		s.renderProject(w, r, token, refusedStatus(err), projectPage{Error: teamRefusal(err)})
	},
	back: func(w http.ResponseWriter, r *http.Request, done string) {
		http.Redirect(w, r, projectPath(r.PathValue("projectId"))+"?done="+done, http.StatusSeeOther)
	}}

// teamAccessAction grants a team access from the form (action "grant"),
// changes a grant's level ("update") or revokes it ("revoke").
func (s *Site) teamAccessAction(g grantActions, action string) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, token string) {
		grant := g.grants + url.PathEscape(r.PathValue("grantId"))
		method, path, done, body := http.MethodDelete, grant, "grant-revoked", map[string]any(nil)
		switch action {
		case "grant":
			method, path, done, body = http.MethodPost, g.collection+url.PathEscape(r.PathValue(g.param))+"/team-access", "grant-added", grantBody(r, g.attrs)
			body["team_id"] = r.PostFormValue("team_id")
		case "update":
			method, done, body = http.MethodPatch, "grant-saved", grantBody(r, g.attrs)
		}
		if err := s.api.Mutate(r.Context(), token, method, path, newKey(), body, nil); err != nil {
			g.refused(s, w, r, token, err)
			return
		}
		g.back(w, r, done)
	}
}
