package e2e

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// guardUser is one baseline role's account, signed in on every surface.
type guardUser struct {
	role  access.Role
	m     member
	id    string
	dash  dashboardSession
	token string
}

// guardTargets names what the probes act on: the workspace under test, a
// finished run in it and a state version of it.
type guardTargets struct{ workspace, run, state string }

// missingTargets are IDs of the right shape that name nothing.
func (g guardTargets) missing() guardTargets {
	flip := func(id string) string {
		last := id[len(id)-1]
		if last == 'a' {
			return id[:len(id)-1] + "b"
		}
		return id[:len(id)-1] + "a"
	}
	return guardTargets{flip(g.workspace), flip(g.run), flip(g.state)}
}

// guardProbe is one surface's representative operation for a permission:
// ok is the status it answers when the guard lets the caller through (the
// operation may still refuse for its own reasons, such as a finished run).
type guardProbe struct {
	surface, name string
	perm          access.Permission
	ok            int
	do            func(t *testing.T, u guardUser, g guardTargets) int
}

// TestTeamGuardsAgreeWithTheMapping: for every baseline role × team
// workspace level (none, read, plan, write, admin, and custom with every
// value of its attributes), the permissions access.TeamGrants derives
// from the one mapping decide what /v1, /api/v2 and the dashboard answer
// for a representative operation per permission: allowed when held, 403
// when the workspace is readable but the permission absent, and exactly
// what a missing workspace answers when it is not readable. One stack, one
// organization, users created once; the grant is switched through
// /api/v2 team-workspaces and takes effect on the next request.
func TestTeamGuardsAgreeWithTheMapping(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	owner := s.newMember(t, "guards-owner")
	users := []guardUser{{role: access.RoleOwner, m: owner}}
	for _, r := range []access.Role{access.RoleAdmin, access.RoleWriter, access.RoleReader, access.RoleMember} {
		m := s.onlyMemberOf(t, owner, "guards-"+string(r), string(r))
		var tok struct{ Token string }
		if st := s.apiJSON(t, http.MethodPost, "/v1/user-tokens", map[string]string{"description": "guards"}, &tok,
			m.mutate(uniqueKey("tok"))...); st != http.StatusCreated {
			t.Fatalf("%s token: %d", r, st)
		}
		m.token = tok.Token
		users = append(users, guardUser{role: r, m: m})
	}
	for i := range users {
		users[i].token = users[i].m.token
		users[i].id = s.accountID(t, users[i].token)
		users[i].dash = signInToDashboard(t, s, users[i].m.email)
	}

	target := s.createWorkspace(t, owner, "guarded", "us")
	other := s.createWorkspace(t, owner, "elsewhere", "us")
	cfg := s.uploadConfiguration(t, owner, target, map[string]string{"main.tf": `output "x" { value = 1 }`})
	st, r := s.createRun(t, owner, target, cfg, "plan_only")
	if st != http.StatusCreated {
		t.Fatalf("run: %d", st)
	}
	s.waitRun(t, owner, r.ID, 3*time.Minute, status("planned_and_finished", "errored"))
	g := guardTargets{workspace: target, run: r.ID, state: s.seedState(t, owner, target)}

	// Every account is in a team with write elsewhere, so that a member
	// holds most permissions somewhere and the workspace under test is
	// decided by its own grant.
	allIDs := make([]string, len(users))
	for i, u := range users {
		allIDs[i] = u.id
	}
	elsewhere := s.createTeamWith(t, owner, "elsewhere", allIDs)
	write, _ := access.WorkspaceLevel(access.LevelWrite)
	s.grantTeam(t, owner, elsewhere, other, "", write)
	guards := s.createTeamWith(t, owner, "guards", allIDs)

	probes := guardProbes(s)
	grant := ""
	check := func(t *testing.T, a *access.WorkspaceAccess) {
		for _, u := range users {
			want := expectedPrincipal(u.role, target, other, a)
			for _, p := range probes {
				got := p.do(t, u, g)
				var expect int
				switch {
				case !want.CanReadWorkspace(target, ""):
					expect = p.do(t, u, g.missing())
					// The dashboard's admission probe answers an unresolvable
					// workspace or run with its non-disclosing 503.
					if expect != http.StatusNotFound && expect != http.StatusForbidden &&
						(p.surface != "dashboard" || expect != http.StatusServiceUnavailable) {
						t.Errorf("%s %s %s on a missing workspace answers %d", u.role, p.surface, p.name, expect)
					}
				case want.PermissionsIn(target, "").Has(p.perm):
					expect = p.ok
				default:
					expect = http.StatusForbidden
				}
				if got == expect {
					continue
				}
				t.Errorf("%s with %s: %s %s (%s) answers %d, want %d", u.role, describe(a), p.surface, p.name, p.perm, got, expect)
			}
		}
	}
	for _, a := range guardCases() {
		switch {
		case a == nil && grant != "":
			s.revokeGrant(t, owner, grant)
			grant = ""
		case a != nil && grant == "":
			grant = s.grantTeam(t, owner, guards, target, "", *a)
		case a != nil:
			s.grantTeam(t, owner, guards, target, grant, *a)
		}
		check(t, a)
		if t.Failed() {
			return
		}
	}
}

// guardCases are no grant, the four fixed levels, and custom with every
// combination of runs, variables and state versions, workspace locking
// and run tasks alternating.
func guardCases() []*access.WorkspaceAccess {
	cases := []*access.WorkspaceAccess{nil}
	for _, level := range []string{access.LevelRead, access.LevelPlan, access.LevelWrite, access.LevelAdmin} {
		a, _ := access.WorkspaceLevel(level)
		cases = append(cases, &a)
	}
	i := 0
	for _, runs := range []string{"read", "plan", "apply"} {
		for _, vars := range []string{"none", "read", "write"} {
			for _, sv := range []string{"none", "read-outputs", "read", "write"} {
				cases = append(cases, &access.WorkspaceAccess{Access: access.LevelCustom, Runs: runs, Variables: vars,
					StateVersions: sv, SentinelMocks: "none", WorkspaceLocking: i%2 == 1, RunTasks: i/2%2 == 1})
				i++
			}
		}
	}
	return cases
}

func describe(a *access.WorkspaceAccess) string {
	if a == nil {
		return "no grant"
	}
	if a.Access != access.LevelCustom {
		return a.Access
	}
	return fmt.Sprintf("custom(runs=%s variables=%s state=%s locking=%t run-tasks=%t)", a.Runs, a.Variables,
		a.StateVersions, a.WorkspaceLocking, a.RunTasks)
}

// expectedPrincipal is what the one mapping gives a user of role: its
// baseline, the owners team for an owner, write on other through the
// elsewhere team, and a on target.
func expectedPrincipal(role access.Role, target, other string, a *access.WorkspaceAccess) access.Principal {
	p := access.Principal{Kind: access.KindUser, Role: role, Permissions: access.PermissionsOf(role)}
	if role == access.RoleOwner {
		p.Grants.AddOrganization(access.OrganizationAccess{}, true)
	}
	write, _ := access.WorkspaceLevel(access.LevelWrite)
	p.Grants.AddWorkspace(other, write)
	if a != nil {
		p.Grants.AddWorkspace(target, *a)
	}
	return p
}

// v2 calls the remote-backend API with a user token.
func (s *Stack) v2(t *testing.T, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	return call(t, s.Client, method, s.APIURL+"/api/v2"+path, raw,
		"Authorization", "Bearer "+token, "Content-Type", "application/vnd.api+json")
}

func (s *Stack) v2Data(t *testing.T, token, method, path string, body any, want int) (id string, attrs map[string]any) {
	t.Helper()
	st, answer := s.v2(t, token, method, path, body)
	if st != want {
		t.Fatalf("%s /api/v2%s: %d %s", method, path, st, answer)
	}
	var doc struct {
		Data struct {
			ID         string         `json:"id"`
			Attributes map[string]any `json:"attributes"`
		} `json:"data"`
	}
	if len(answer) > 0 {
		if err := json.Unmarshal(answer, &doc); err != nil {
			t.Fatalf("%s /api/v2%s: %s", method, path, answer)
		}
	}
	return doc.Data.ID, doc.Data.Attributes
}

// accountID is the user a token acts for.
func (s *Stack) accountID(t *testing.T, token string) string {
	t.Helper()
	id, _ := s.v2Data(t, token, http.MethodGet, "/account/details", nil, http.StatusOK)
	return id
}

// seedState writes a state version with one output to a workspace as
// the CLI does: lock, create with the body inline, unlock.
func (s *Stack) seedState(t *testing.T, m member, workspaceID string) string {
	t.Helper()
	state := []byte(`{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"guards","outputs":{"x":{"value":"1","type":"string"}},"resources":[]}`)
	sum := md5.Sum(state)
	s.v2Data(t, m.token, http.MethodPost, "/workspaces/"+workspaceID+"/actions/lock", map[string]any{"reason": "seed"}, http.StatusOK)
	id, _ := s.v2Data(t, m.token, http.MethodPost, "/workspaces/"+workspaceID+"/state-versions", map[string]any{"data": map[string]any{
		"type": "state-versions", "attributes": map[string]any{"serial": 1, "md5": hex.EncodeToString(sum[:]), "lineage": "guards",
			"state": base64.StdEncoding.EncodeToString(state)}}}, http.StatusCreated)
	s.v2Data(t, m.token, http.MethodPost, "/workspaces/"+workspaceID+"/actions/unlock", nil, http.StatusOK)
	return id
}

// createTeamWith creates an organization-visible team with members.
func (s *Stack) createTeamWith(t *testing.T, m member, name string, userIDs []string) string {
	t.Helper()
	id, _ := s.v2Data(t, m.token, http.MethodPost, "/organizations/"+m.slug+"/teams", map[string]any{"data": map[string]any{
		"type": "teams", "attributes": map[string]any{"name": name, "visibility": "organization"}}}, http.StatusCreated)
	users := make([]map[string]string, len(userIDs))
	for i, u := range userIDs {
		users[i] = map[string]string{"type": "users", "id": u}
	}
	s.v2Data(t, m.token, http.MethodPost, "/teams/"+id+"/relationships/users", map[string]any{"data": users}, http.StatusNoContent)
	return id
}

// grantTeam gives a team access to a workspace (grantID empty) or changes
// the grant, and checks that it reads back as asked.
func (s *Stack) grantTeam(t *testing.T, m member, teamID, workspaceID, grantID string, a access.WorkspaceAccess) string {
	t.Helper()
	attrs := map[string]any{"access": a.Access}
	if a.Access == access.LevelCustom {
		attrs["runs"], attrs["variables"], attrs["state-versions"] = a.Runs, a.Variables, a.StateVersions
		attrs["sentinel-mocks"], attrs["workspace-locking"], attrs["run-tasks"] = a.SentinelMocks, a.WorkspaceLocking, a.RunTasks
	}
	data := map[string]any{"type": "team-workspaces", "attributes": attrs}
	var id string
	var got map[string]any
	if grantID == "" {
		data["relationships"] = map[string]any{"team": map[string]any{"data": map[string]string{"type": "teams", "id": teamID}},
			"workspace": map[string]any{"data": map[string]string{"type": "workspaces", "id": workspaceID}}}
		id, got = s.v2Data(t, m.token, http.MethodPost, "/team-workspaces", map[string]any{"data": data}, http.StatusCreated)
	} else {
		id, got = s.v2Data(t, m.token, http.MethodPatch, "/team-workspaces/"+grantID, map[string]any{"data": data}, http.StatusOK)
	}
	if got["access"] != a.Access || got["runs"] != a.Runs || got["variables"] != a.Variables ||
		got["state-versions"] != a.StateVersions || got["workspace-locking"] != a.WorkspaceLocking || got["run-tasks"] != a.RunTasks {
		t.Fatalf("grant %+v reads back %v", a, got)
	}
	return id
}

func (s *Stack) revokeGrant(t *testing.T, m member, grantID string) {
	t.Helper()
	s.v2Data(t, m.token, http.MethodDelete, "/team-workspaces/"+grantID, nil, http.StatusNoContent)
}

// guardProbes are the representative operations, per surface and
// permission. Mutations are harmless and repeatable: a configuration
// version, a uniquely named variable, a description, a lock released at
// once.
func guardProbes(s *Stack) []guardProbe {
	v1 := func(method, path string, body any) func(t *testing.T, u guardUser, g guardTargets) int {
		return func(t *testing.T, u guardUser, g guardTargets) int {
			var raw []byte
			if body != nil {
				raw, _ = json.Marshal(body)
			}
			header := u.m.cookie()
			if method != http.MethodGet {
				header = u.m.mutate(uniqueKey("guard"))
			}
			st, _ := call(t, s.Client, method, s.APIURL+expand(path, g), raw, header...)
			return st
		}
	}
	v2 := func(method, path string, body any) func(t *testing.T, u guardUser, g guardTargets) int {
		return func(t *testing.T, u guardUser, g guardTargets) int {
			st, _ := s.v2(t, u.token, method, expand(path, g), body)
			return st
		}
	}
	page := func(path string) func(t *testing.T, u guardUser, g guardTargets) int {
		return func(t *testing.T, u guardUser, g guardTargets) int {
			return u.dash.get(t, expand(path, g), nil).StatusCode
		}
	}
	form := func(path string, fields map[string]string) func(t *testing.T, u guardUser, g guardTargets) int {
		return func(t *testing.T, u guardUser, g guardTargets) int {
			f := map[string]string{}
			for k, v := range fields {
				f[k] = strings.ReplaceAll(v, "{unique}", strings.ReplaceAll(uniqueKey("v"), "-", "_"))
			}
			st, _ := u.dash.form(t, expand(path, g), f)
			return st
		}
	}
	lockUnlock := func(t *testing.T, u guardUser, g guardTargets) int {
		st, _ := s.v2(t, u.token, http.MethodPost, "/workspaces/"+g.workspace+"/actions/lock", map[string]any{"reason": "guards"})
		if st == http.StatusOK {
			if un, answer := s.v2(t, u.token, http.MethodPost, "/workspaces/"+g.workspace+"/actions/unlock", nil); un != http.StatusOK {
				t.Fatalf("%s locked and cannot unlock: %d %s", u.role, un, answer)
			}
		}
		return st
	}
	return []guardProbe{
		{surface: "/v1", name: "read workspace", perm: access.PermWorkspaceRead, ok: 200, do: v1("GET", "/v1/workspaces/{ws}", nil)},
		{surface: "/v1", name: "read run", perm: access.PermRunRead, ok: 200, do: v1("GET", "/v1/runs/{run}", nil)},
		{surface: "/v1", name: "list variables", perm: access.PermVariableRead, ok: 200, do: v1("GET", "/v1/workspaces/{ws}/variables", nil)},
		{surface: "/v1", name: "upload configuration", perm: access.PermRunCreate, ok: 201, do: func(t *testing.T, u guardUser, g guardTargets) int {
			st, _ := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/workspaces/"+g.workspace+"/configuration-versions",
				devstack.TarGz(map[string]string{"main.tf": `output "x" { value = 1 }`}), append(u.m.mutate(uniqueKey("cfg")), "Content-Type", "application/gzip")...)
			return st
		}},
		{surface: "/v1", name: "approve", perm: access.PermRunApprove, ok: 409, do: v1("POST", "/v1/runs/{run}/actions/approve", staleReview)},
		{surface: "/v1", name: "cancel", perm: access.PermRunCancel, ok: 409, do: v1("POST", "/v1/runs/{run}/actions/cancel", nil)},
		{surface: "/v1", name: "create variable", perm: access.PermVariableWrite, ok: 201, do: func(t *testing.T, u guardUser, g guardTargets) int {
			return v1("POST", "/v1/workspaces/{ws}/variables", map[string]any{"key": "k_" + strings.ReplaceAll(uniqueKey("v"), "-", "_"), "value": "x", "sensitive": false})(t, u, g)
		}},
		{surface: "/v1", name: "read outputs", perm: access.PermStateReadOutputs, ok: 200, do: v1("GET", "/v1/state-versions/{sv}/outputs", nil)},
		{surface: "/v1", name: "read state version", perm: access.PermStateRead, ok: 200, do: v1("GET", "/v1/state-versions/{sv}", nil)},
		{surface: "/v1", name: "update workspace", perm: access.PermWorkspaceWrite, ok: 200, do: v1("PATCH", "/v1/workspaces/{ws}", map[string]any{"execution_settings": guardSettings})},
		{surface: "/api/v2", name: "read workspace", perm: access.PermWorkspaceRead, ok: 200, do: v2("GET", "/workspaces/{ws}", nil)},
		{surface: "/api/v2", name: "read run", perm: access.PermRunRead, ok: 200, do: v2("GET", "/runs/{run}", nil)},
		{surface: "/api/v2", name: "create configuration version", perm: access.PermRunCreate, ok: 201, do: v2("POST", "/workspaces/{ws}/configuration-versions",
			map[string]any{"data": map[string]any{"type": "configuration-versions", "attributes": map[string]any{"auto-queue-runs": false}}})},
		{surface: "/api/v2", name: "apply", perm: access.PermRunApprove, ok: 409, do: v2("POST", "/runs/{run}/actions/apply", nil)},
		{surface: "/api/v2", name: "cancel", perm: access.PermRunCancel, ok: 409, do: v2("POST", "/runs/{run}/actions/cancel", nil)},
		{surface: "/api/v2", name: "current outputs", perm: access.PermStateReadOutputs, ok: 200, do: v2("GET", "/workspaces/{ws}/current-state-version-outputs", nil)},
		{surface: "/api/v2", name: "download state", perm: access.PermStateRead, ok: 200, do: v2("GET", "/state-versions/{sv}/download", nil)},
		{surface: "/api/v2", name: "lock", perm: access.PermStateWrite, ok: 200, do: lockUnlock},
		{surface: "/api/v2", name: "force-unlock", perm: access.PermStateForceUnlock, ok: 409, do: v2("POST", "/workspaces/{ws}/actions/force-unlock", nil)},
		{surface: "/api/v2", name: "update workspace", perm: access.PermWorkspaceWrite, ok: 200, do: v2("PATCH", "/workspaces/{ws}",
			map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"description": "guarded"}}})},
		{surface: "dashboard", name: "workspace page", perm: access.PermWorkspaceRead, ok: 200, do: page("/workspaces/{ws}")},
		{surface: "dashboard", name: "run page", perm: access.PermRunRead, ok: 200, do: page("/runs/{run}")},
		{surface: "dashboard", name: "variables page", perm: access.PermVariableRead, ok: 200, do: page("/workspaces/{ws}/variables")},
		{surface: "dashboard", name: "states page", perm: access.PermStateRead, ok: 200, do: page("/workspaces/{ws}/states")},
		{surface: "dashboard", name: "add variable", perm: access.PermVariableWrite, ok: 303, do: form("/workspaces/{ws}/variables", map[string]string{"key": "k_{unique}", "value": "x"})},
		{surface: "dashboard", name: "save settings", perm: access.PermWorkspaceWrite, ok: 303, do: form("/workspaces/{ws}/settings", map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64", "execution_mode": "remote"})},
	}
}

var staleReview = map[string]any{"plan_digest": strings.Repeat("a", 64), "policy_result_digest": strings.Repeat("b", 64),
	"predecessor_state_version_id": nil, "dependency_lock_digest": strings.Repeat("c", 64)}

var guardSettings = map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}

func expand(path string, g guardTargets) string {
	return strings.NewReplacer("{ws}", g.workspace, "{run}", g.run, "{sv}", g.state).Replace(path)
}
