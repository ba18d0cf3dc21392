package v1_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/team"
	"github.com/cairnhq/cairn/api/workspace"
)

// teamFixture is an organization with a member-role user and the team
// service acting as its owner.
type teamFixture struct {
	t      *testing.T
	env    *apitest.Env
	owner  *apitest.User
	member *apitest.User
	teams  *team.Service
	admin  access.Principal
}

func newTeamFixture(t *testing.T) *teamFixture {
	env := apitest.New(t)
	owner := env.WithOrganization("Owner")
	member := env.SignUp("Member")
	env.Join(owner, member, "member")
	return &teamFixture{t: t, env: env, owner: owner, member: member,
		teams: team.NewService(env.DB, workspace.NewService(env.DB, nil, nil, env.Config.ToolVersions)),
		admin: access.Principal{Kind: access.KindUser, ID: owner.ID, OrganizationID: owner.OrganizationID,
			Role: access.RoleOwner, Permissions: access.PermissionsOf(access.RoleOwner)}}
}

func (f *teamFixture) tx(fn func(tx *sqlx.Tx) error) error {
	return db.WithTx(context.Background(), f.env.DB, fn)
}

func (f *teamFixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// TestTeamGrantsTakeEffectOnTheNextRequest: a member whose team has plan
// on workspace A reads A and creates runs there, is forbidden to approve,
// and finds workspace B missing on every read; a write grant on B widens
// the same token on its next request, and leaving the team narrows it
// again. A project grant reaches every workspace of the project.
func TestTeamGrantsTakeEffectOnTheNextRequest(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	ctx := context.Background()
	projA, projB := newProject(t, f.owner, "A"), newProject(t, f.owner, "B")
	a, b := newWorkspace(t, f.owner, projA, "alpha"), newWorkspace(t, f.owner, projB, "beta")
	b2 := newWorkspace(t, f.owner, projB, "beta-two")
	var cvA, cvB struct{ ID string }
	gzipUpload(f.owner, "/v1/workspaces/"+a.ID+"/configuration-versions", configArchive).MustStatus(t, http.StatusCreated).Data(t, &cvA)
	gzipUpload(f.owner, "/v1/workspaces/"+b.ID+"/configuration-versions", configArchive).MustStatus(t, http.StatusCreated).Data(t, &cvB)
	var ownerRunA struct{ ID string }
	f.owner.Mutate(http.MethodPost, "/v1/runs", map[string]any{"workspace_id": a.ID, "configuration_version_id": cvA.ID, "kind": "plan_only"}).
		MustStatus(t, http.StatusCreated).Data(t, &ownerRunA)

	// The member role alone reads no workspace anywhere: an existing one
	// answers exactly as a missing one (SPEC §7), on /v1 as on /api/v2.
	f.member.Get("/v1/workspaces/"+a.ID).MustStatus(t, http.StatusNotFound)
	f.member.Get("/v1/workspaces/ws_missing").MustStatus(t, http.StatusNotFound)

	var tm team.Team
	var grantA team.WorkspaceGrant
	f.must(f.tx(func(tx *sqlx.Tx) error {
		var err error
		if tm, err = f.teams.Create(ctx, tx, f.admin, team.CreateInput{Name: "payments"}); err != nil {
			return err
		}
		if err := f.teams.AddMembers(ctx, tx, f.admin, tm.ID, []string{f.member.ID}); err != nil {
			return err
		}
		grantA, err = f.teams.GrantWorkspace(ctx, tx, f.admin, tm.ID, a.ID, team.WorkspaceAccessInput{Access: access.LevelPlan})
		return err
	}))
	if grantA.Runs != "plan" || grantA.StateVersions != "read" || grantA.WorkspaceLocking {
		t.Fatalf("plan grant reads back %+v", grantA.WorkspaceAccess)
	}

	token := userToken(t, f.member)
	v2 := func(path string) *apitest.Response {
		return f.env.Anonymous().Do(apitest.Request{Method: http.MethodGet, Path: "/api/v2" + path,
			Header: map[string]string{"Authorization": "Bearer " + token}})
	}
	m := f.member
	m.Get("/v1/workspaces/"+a.ID).MustStatus(t, http.StatusOK)
	v2("/workspaces/"+a.ID).MustStatus(t, http.StatusOK)
	m.Get("/v1/workspaces/"+b.ID).MustStatus(t, http.StatusNotFound)
	v2("/workspaces/"+b.ID).MustStatus(t, http.StatusNotFound)
	m.Get("/v1/workspaces/"+b.ID+"/state-versions").MustStatus(t, http.StatusNotFound)
	m.Get("/v1/runs/"+ownerRunA.ID).MustStatus(t, http.StatusOK)
	m.Mutate(http.MethodPost, "/v1/runs", map[string]any{"workspace_id": a.ID, "configuration_version_id": cvA.ID, "kind": "plan_only"}).
		MustStatus(t, http.StatusCreated)
	m.Mutate(http.MethodPost, "/v1/runs/"+ownerRunA.ID+"/actions/approve", staleBinding).MustStatus(t, http.StatusForbidden)
	m.Mutate(http.MethodPost, "/v1/runs", map[string]any{"workspace_id": b.ID, "configuration_version_id": cvB.ID, "kind": "plan_only"}).
		MustStatus(t, http.StatusNotFound)
	var list []ws
	f.member.Get("/v1/workspaces").MustStatus(t, http.StatusOK).Data(t, &list)
	if len(list) != 1 || list[0].ID != a.ID {
		t.Fatalf("member lists %+v, want only %s", list, a.ID)
	}
	var runs []struct {
		WorkspaceID string `json:"workspace_id"`
	}
	m.Get("/v1/runs").MustStatus(t, http.StatusOK).Data(t, &runs)
	for _, r := range runs {
		if r.WorkspaceID != a.ID {
			t.Fatalf("runs list shows workspace %s", r.WorkspaceID)
		}
	}
	if len(runs) == 0 {
		t.Fatal("runs list hides the member's own workspace")
	}

	// A write grant on B: the same token applies there on its next request.
	var grantB team.WorkspaceGrant
	f.must(f.tx(func(tx *sqlx.Tx) error {
		var err error
		grantB, err = f.teams.GrantWorkspace(ctx, tx, f.admin, tm.ID, b.ID, team.WorkspaceAccessInput{Access: access.LevelWrite})
		return err
	}))
	m.Mutate(http.MethodPost, "/v1/runs", map[string]any{"workspace_id": b.ID, "configuration_version_id": cvB.ID, "kind": "plan_and_apply"}).
		MustStatus(t, http.StatusCreated)
	v2("/workspaces/"+b.ID).MustStatus(t, http.StatusOK)
	m.Get("/v1/workspaces/"+b2.ID).MustStatus(t, http.StatusNotFound)

	// A read grant on project B reaches its other workspace, and no further.
	f.must(f.tx(func(tx *sqlx.Tx) error {
		_, err := f.teams.GrantProject(ctx, tx, f.admin, tm.ID, projB, team.ProjectAccessInput{Access: access.LevelRead})
		return err
	}))
	m.Get("/v1/workspaces/"+b2.ID).MustStatus(t, http.StatusOK)
	v2("/workspaces/"+b2.ID).MustStatus(t, http.StatusOK)
	gzipUpload(m, "/v1/workspaces/"+b2.ID+"/configuration-versions", configArchive).MustStatus(t, http.StatusForbidden)

	// Revoking B's grant narrows at once; leaving the team narrows the rest.
	f.must(f.tx(func(tx *sqlx.Tx) error {
		_, err := f.teams.RevokeWorkspaceGrant(ctx, tx, f.admin, grantB.ID)
		return err
	}))
	m.Mutate(http.MethodPost, "/v1/runs", map[string]any{"workspace_id": b.ID, "configuration_version_id": cvB.ID, "kind": "plan_only"}).
		MustStatus(t, http.StatusForbidden)
	f.must(f.tx(func(tx *sqlx.Tx) error {
		return f.teams.RemoveMembers(ctx, tx, f.admin, tm.ID, []string{f.member.ID})
	}))
	m.Get("/v1/workspaces/"+a.ID).MustStatus(t, http.StatusNotFound)
	v2("/workspaces/"+b2.ID).MustStatus(t, http.StatusNotFound)
}

// staleBinding is a well-formed review binding that matches no plan: a
// principal allowed to approve gets 409, one who is not gets 403 first.
var staleBinding = map[string]any{"plan_digest": strings.Repeat("a", 64), "policy_result_digest": strings.Repeat("b", 64),
	"predecessor_state_version_id": nil, "dependency_lock_digest": strings.Repeat("c", 64)}

// TestOwnersTeam: every organization has an owners team holding its
// creator; it cannot be deleted, renamed or emptied, and only an owner
// changes its members.
func TestOwnersTeam(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	ctx := context.Background()
	teams, err := f.teams.List(ctx, f.admin, team.ListFilter{Names: []string{team.OwnersName}})
	f.must(err)
	if len(teams) != 1 || !teams[0].Owners || teams[0].UsersCount != 1 {
		t.Fatalf("owners team %+v", teams)
	}
	owners := teams[0]
	members, err := f.teams.Members(ctx, f.admin, owners.ID)
	f.must(err)
	if len(members) != 1 || members[0].UserID != f.owner.ID {
		t.Fatalf("owners members %+v", members)
	}
	for name, change := range map[string]func(tx *sqlx.Tx) error{
		"delete": func(tx *sqlx.Tx) error { _, err := f.teams.Delete(ctx, tx, f.admin, owners.ID); return err },
		"rename": func(tx *sqlx.Tx) error {
			n := "root"
			_, err := f.teams.Update(ctx, tx, f.admin, owners.ID, team.UpdateInput{Name: &n})
			return err
		},
		"empty": func(tx *sqlx.Tx) error {
			return f.teams.RemoveMembers(ctx, tx, f.admin, owners.ID, []string{f.owner.ID})
		},
	} {
		err := f.tx(change)
		if !errors.Is(err, team.ErrOwnersTeam) && !errors.Is(err, team.ErrOwnersTeamEmpty) {
			t.Errorf("%s owners team: %v", name, err)
		}
	}
	// An admin-role member manages teams but not the owners team's members.
	f.env.Join(f.owner, f.env.SignUp("Admin"), "admin")
	admin := f.admin
	admin.ID, admin.Role, admin.Permissions = "someone-else", access.RoleAdmin, access.PermissionsOf(access.RoleAdmin)
	if err := f.tx(func(tx *sqlx.Tx) error {
		return f.teams.AddMembers(ctx, tx, admin, owners.ID, []string{f.member.ID})
	}); !errors.Is(err, team.ErrNotOwner) {
		t.Fatalf("admin adding to owners: %v", err)
	}
	// The member becomes an owner through the team: every permission, in
	// every workspace, on the next request.
	proj := newProject(t, f.owner, "P")
	w := newWorkspace(t, f.owner, proj, "w")
	f.member.Get("/v1/workspaces/"+w.ID).MustStatus(t, http.StatusNotFound)
	f.must(f.tx(func(tx *sqlx.Tx) error {
		return f.teams.AddMembers(ctx, tx, f.admin, owners.ID, []string{f.member.ID})
	}))
	f.member.Get("/v1/workspaces/"+w.ID).MustStatus(t, http.StatusOK)
	f.member.Get("/v1/audit-events").MustStatus(t, http.StatusOK)
	// With two members the first may leave; the last may not leave the
	// organization either.
	f.must(f.tx(func(tx *sqlx.Tx) error {
		return f.teams.RemoveMembers(ctx, tx, f.admin, owners.ID, []string{f.owner.ID})
	}))
}

// TestManagingTeamsIsNotAdministeringWorkspaces: someone who may manage
// teams and read every workspace (HCP's manage-teams and read-workspaces)
// but administers none cannot grant a team, their own included, access to
// a workspace or a project; an owner can.
func TestManagingTeamsIsNotAdministeringWorkspaces(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	ctx := context.Background()
	proj := newProject(t, f.owner, "P")
	w := newWorkspace(t, f.owner, proj, "guarded")
	manager := access.Principal{Kind: access.KindUser, ID: f.member.ID, OrganizationID: f.owner.OrganizationID, Role: access.RoleMember,
		Permissions: access.NewPermissionSet(access.PermOrganizationRead, access.PermTeamManage, access.PermProjectRead, access.PermWorkspaceRead)}
	var tm team.Team
	f.must(f.tx(func(tx *sqlx.Tx) (err error) {
		if tm, err = f.teams.Create(ctx, tx, f.admin, team.CreateInput{Name: "self-granted"}); err != nil {
			return err
		}
		return f.teams.AddMembers(ctx, tx, f.admin, tm.ID, []string{f.member.ID})
	}))
	err := f.tx(func(tx *sqlx.Tx) error {
		_, err := f.teams.GrantWorkspace(ctx, tx, manager, tm.ID, w.ID, team.WorkspaceAccessInput{Access: access.LevelAdmin})
		return err
	})
	if !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("a team manager granted admin on a workspace: %v", err)
	}
	err = f.tx(func(tx *sqlx.Tx) error {
		_, err := f.teams.GrantProject(ctx, tx, manager, tm.ID, proj, team.ProjectAccessInput{Access: access.LevelAdmin})
		return err
	})
	if !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("a team manager granted admin on a project: %v", err)
	}
	f.must(f.tx(func(tx *sqlx.Tx) error {
		_, err := f.teams.GrantWorkspace(ctx, tx, f.admin, tm.ID, w.ID, team.WorkspaceAccessInput{Access: access.LevelAdmin})
		return err
	}))
}

// v1Team and v1Grant are the /v1 team and workspace grant objects as a
// client reads them.
type v1Team struct {
	ID                 string          `json:"id"`
	Name               string          `json:"name"`
	Visibility         string          `json:"visibility"`
	SSOTeamID          *string         `json:"sso_team_id"`
	Owners             bool            `json:"owners"`
	OrganizationAccess map[string]bool `json:"organization_access"`
	MemberCount        int             `json:"member_count"`
}

type v1Grant struct {
	ID            string `json:"id"`
	TeamID        string `json:"team_id"`
	TeamName      string `json:"team_name"`
	WorkspaceID   string `json:"workspace_id"`
	ProjectID     string `json:"project_id"`
	Access        string `json:"access"`
	Runs          string `json:"runs"`
	StateVersions string `json:"state_versions"`
	Variables     string `json:"variables"`
	ProjectAccess struct {
		Settings string `json:"settings"`
	} `json:"project_access"`
	WorkspaceAccess struct {
		Runs             string `json:"runs"`
		CreateWorkspaces bool   `json:"create_workspaces"`
	} `json:"workspace_access"`
}

type v1Members struct {
	Items []struct {
		UserID    string `json:"user_id"`
		Email     string `json:"email"`
		Role      string `json:"role"`
		TeamCount int    `json:"team_count"`
	} `json:"items"`
}

type v1MemberAccess struct {
	UserID string `json:"user_id"`
	Role   string `json:"role"`
	Teams  []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"teams"`
	Workspaces []struct {
		WorkspaceID   string   `json:"workspace_id"`
		WorkspaceName string   `json:"workspace_name"`
		Permissions   []string `json:"permissions"`
		Via           []string `json:"via"`
	} `json:"workspaces"`
	OrganizationPermissions []string `json:"organization_permissions"`
}

func createTeamV1(t *testing.T, u *apitest.User, body map[string]any) v1Team {
	t.Helper()
	var tm v1Team
	u.Mutate(http.MethodPost, "/v1/teams", body).MustStatus(t, http.StatusCreated).Data(t, &tm)
	return tm
}

func grantWorkspaceV1(t *testing.T, u *apitest.User, workspaceID string, body map[string]any) v1Grant {
	t.Helper()
	var g v1Grant
	u.Mutate(http.MethodPost, "/v1/workspaces/"+workspaceID+"/team-access", body).MustStatus(t, http.StatusCreated).Data(t, &g)
	return g
}

func auditActions(t *testing.T, env *apitest.Env, targetID string) []string {
	t.Helper()
	var actions []string
	if err := env.DB.Select(&actions, `SELECT action FROM audit_events WHERE target_id = $1 ORDER BY created_at, id`, targetID); err != nil {
		t.Fatal(err)
	}
	return actions
}

// TestTeamsV1: an owner creates, lists (by name filter and by cursor
// page), reads, changes and deletes a team on /v1, adds and removes a
// member-role user, grants the team workspace and project access, changes
// and revokes it; every grant, change and revocation is audited.
func TestTeamsV1(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	owner, member := f.owner, f.member
	proj := newProject(t, owner, "P")
	w := newWorkspace(t, owner, proj, "alpha")

	tm := createTeamV1(t, owner, map[string]any{"name": "payments", "visibility": "organization",
		"sso_team_id": "grp-1", "organization_access": map[string]bool{"read_projects": true}})
	if tm.Name != "payments" || tm.Visibility != "organization" || tm.SSOTeamID == nil || *tm.SSOTeamID != "grp-1" ||
		!tm.OrganizationAccess["read_projects"] || tm.OrganizationAccess["manage_workspaces"] || tm.Owners || tm.MemberCount != 0 {
		t.Fatalf("created team %+v", tm)
	}
	createTeamV1(t, owner, map[string]any{"name": "platform"})
	owner.Mutate(http.MethodPost, "/v1/teams", map[string]any{"name": "payments"}).MustStatus(t, http.StatusConflict)

	var page []v1Team
	owner.Get("/v1/teams?q=PAY").MustStatus(t, http.StatusOK).Data(t, &page)
	if len(page) != 1 || page[0].ID != tm.ID {
		t.Fatalf("q=PAY lists %+v", page)
	}
	// Three teams (owners, payments, platform), one per page, newest first.
	var seen []string
	next := "/v1/teams?limit=1"
	for next != "" && len(seen) <= 3 {
		var body struct {
			Data []v1Team `json:"data"`
			Meta struct {
				Page struct {
					NextCursor *string `json:"next_cursor"`
				} `json:"page"`
			} `json:"meta"`
		}
		owner.Get(next).MustStatus(t, http.StatusOK).JSON(t, &body)
		for _, x := range body.Data {
			seen = append(seen, x.Name)
		}
		next = ""
		if c := body.Meta.Page.NextCursor; c != nil {
			next = "/v1/teams?limit=1&cursor=" + *c
		}
	}
	if strings.Join(seen, ",") != "platform,payments,owners" {
		t.Fatalf("paged teams %v", seen)
	}

	var changed v1Team
	owner.Mutate(http.MethodPatch, "/v1/teams/"+tm.ID, map[string]any{"name": "payments-team", "sso_team_id": "",
		"organization_access": map[string]bool{"manage_policies": true}}).MustStatus(t, http.StatusOK).Data(t, &changed)
	if changed.Name != "payments-team" || changed.SSOTeamID != nil || !changed.OrganizationAccess["manage_policies"] ||
		!changed.OrganizationAccess["read_projects"] {
		t.Fatalf("changed team %+v (organization access must merge)", changed)
	}

	var members v1Members
	owner.Mutate(http.MethodPost, "/v1/teams/"+tm.ID+"/members", map[string]any{"user_ids": []string{member.ID}}).
		MustStatus(t, http.StatusOK).Data(t, &members)
	if len(members.Items) != 1 || members.Items[0].UserID != member.ID || members.Items[0].Role != "member" ||
		members.Items[0].Email != member.Email {
		t.Fatalf("team members %+v", members)
	}
	owner.Get("/v1/teams/"+tm.ID+"/members").MustStatus(t, http.StatusOK).Data(t, &members)
	if len(members.Items) != 1 {
		t.Fatalf("listed team members %+v", members)
	}
	var got v1Team
	owner.Get("/v1/teams/"+tm.ID).MustStatus(t, http.StatusOK).Data(t, &got)
	if got.MemberCount != 1 || got.Name != "payments-team" {
		t.Fatalf("read team %+v", got)
	}
	owner.Get("/v1/members").MustStatus(t, http.StatusOK).Data(t, &members)
	counts := map[string]int{}
	for _, m := range members.Items {
		counts[m.UserID] = m.TeamCount
	}
	if len(members.Items) != 2 || counts[member.ID] != 1 || counts[owner.ID] != 1 {
		t.Fatalf("organization members %+v", members)
	}

	// Workspace access: plan, then custom with read-outputs, then revoked.
	g := grantWorkspaceV1(t, owner, w.ID, map[string]any{"team_id": tm.ID, "access": "plan"})
	if g.TeamName != "payments-team" || g.WorkspaceID != w.ID || g.Runs != "plan" || g.StateVersions != "read" {
		t.Fatalf("workspace grant %+v", g)
	}
	owner.Mutate(http.MethodPost, "/v1/workspaces/"+w.ID+"/team-access", map[string]any{"team_id": tm.ID, "access": "read"}).
		MustStatus(t, http.StatusConflict)
	owner.Mutate(http.MethodPost, "/v1/workspaces/"+w.ID+"/team-access", map[string]any{"team_id": tm.ID, "access": "plan", "runs": "apply"}).
		MustStatus(t, http.StatusBadRequest)
	var grants []v1Grant
	owner.Get("/v1/workspaces/"+w.ID+"/team-access").MustStatus(t, http.StatusOK).Data(t, &grants)
	if len(grants) != 1 || grants[0].ID != g.ID || grants[0].TeamName != "payments-team" {
		t.Fatalf("workspace grants %+v", grants)
	}
	var custom v1Grant
	owner.Mutate(http.MethodPatch, "/v1/workspace-team-access/"+g.ID, map[string]any{"access": "custom", "state_versions": "read-outputs"}).
		MustStatus(t, http.StatusOK).Data(t, &custom)
	if custom.Access != "custom" || custom.StateVersions != "read-outputs" || custom.Runs != "read" {
		t.Fatalf("custom grant %+v", custom)
	}
	member.Get("/v1/workspaces/"+w.ID).MustStatus(t, http.StatusOK)
	owner.Mutate(http.MethodDelete, "/v1/workspace-team-access/"+g.ID, nil).MustStatus(t, http.StatusOK)
	member.Get("/v1/workspaces/"+w.ID).MustStatus(t, http.StatusNotFound)
	owner.Get("/v1/workspaces/"+w.ID+"/team-access").MustStatus(t, http.StatusOK).Data(t, &grants)
	if len(grants) != 0 {
		t.Fatalf("revoked grant still listed: %+v", grants)
	}
	if got := strings.Join(auditActions(t, f.env, g.ID), ","); got != "team_access.granted,team_access.changed,team_access.revoked" {
		t.Fatalf("workspace grant audit %q", got)
	}

	// Project access reaches the project's workspaces.
	var pg v1Grant
	owner.Mutate(http.MethodPost, "/v1/projects/"+proj+"/team-access", map[string]any{"team_id": tm.ID, "access": "custom",
		"project_access": map[string]string{"settings": "update"}, "workspace_access": map[string]any{"runs": "plan", "create_workspaces": true}}).
		MustStatus(t, http.StatusCreated).Data(t, &pg)
	if pg.ProjectID != proj || pg.ProjectAccess.Settings != "update" || pg.WorkspaceAccess.Runs != "plan" ||
		!pg.WorkspaceAccess.CreateWorkspaces || pg.TeamName != "payments-team" {
		t.Fatalf("project grant %+v", pg)
	}
	member.Get("/v1/workspaces/"+w.ID).MustStatus(t, http.StatusOK)
	owner.Get("/v1/projects/"+proj+"/team-access").MustStatus(t, http.StatusOK).Data(t, &grants)
	if len(grants) != 1 || grants[0].ID != pg.ID {
		t.Fatalf("project grants %+v", grants)
	}
	owner.Mutate(http.MethodPatch, "/v1/project-team-access/"+pg.ID, map[string]any{"access": "read"}).
		MustStatus(t, http.StatusOK).Data(t, &pg)
	if pg.Access != "read" || pg.WorkspaceAccess.Runs != "read" {
		t.Fatalf("changed project grant %+v", pg)
	}
	owner.Mutate(http.MethodDelete, "/v1/project-team-access/"+pg.ID, nil).MustStatus(t, http.StatusOK)
	member.Get("/v1/workspaces/"+w.ID).MustStatus(t, http.StatusNotFound)
	if got := strings.Join(auditActions(t, f.env, pg.ID), ","); got != "team_access.granted,team_access.changed,team_access.revoked" {
		t.Fatalf("project grant audit %q", got)
	}

	owner.Mutate(http.MethodDelete, "/v1/teams/"+tm.ID+"/members/"+member.ID, nil).MustStatus(t, http.StatusOK).Data(t, &members)
	if len(members.Items) != 0 {
		t.Fatalf("members after removal %+v", members)
	}
	owner.Mutate(http.MethodDelete, "/v1/teams/"+tm.ID, nil).MustStatus(t, http.StatusOK)
	owner.Get("/v1/teams/"+tm.ID).MustStatus(t, http.StatusNotFound)
	if got := strings.Join(auditActions(t, f.env, tm.ID), ","); got !=
		"team.created,team.updated,team.member_added,team.member_removed,team.deleted" {
		t.Fatalf("team audit %q", got)
	}

	// The owners team cannot be deleted; the identity server takes the
	// member role for role changes as well as invitations.
	var owners []v1Team
	owner.Get("/v1/teams?q=owners").MustStatus(t, http.StatusOK).Data(t, &owners)
	if len(owners) != 1 || !owners[0].Owners {
		t.Fatalf("owners team %+v", owners)
	}
	if code := owner.Mutate(http.MethodDelete, "/v1/teams/"+owners[0].ID, nil).MustStatus(t, http.StatusConflict).Code(); code != "OWNERS_TEAM_FIXED" {
		t.Fatalf("deleting the owners team: %s", code)
	}
	writer := f.env.SignUp("Writer")
	f.env.Join(owner, writer, "writer")
	owner.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/update-member-role",
		Body: map[string]string{"user_id": writer.ID, "role": "member"}}).MustStatus(t, http.StatusOK)
	writer.Get("/v1/projects").MustStatus(t, http.StatusForbidden)
}

// TestTeamsV1Refusals: a member without team:manage may not create,
// change, delete or add to a team (403); a secret team is not found for a
// member outside it; a workspace of another organization is not found for
// a grant; someone who manages teams and reads every workspace but
// administers none may not grant access to one (403).
func TestTeamsV1Refusals(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	owner, member := f.owner, f.member
	proj := newProject(t, owner, "P")
	w := newWorkspace(t, owner, proj, "guarded")
	open := createTeamV1(t, owner, map[string]any{"name": "open", "visibility": "organization"})
	secret := createTeamV1(t, owner, map[string]any{"name": "hidden"})
	if secret.Visibility != "secret" {
		t.Fatalf("default visibility %q", secret.Visibility)
	}

	member.Get("/v1/teams/"+open.ID).MustStatus(t, http.StatusOK)
	member.Mutate(http.MethodPost, "/v1/teams", map[string]any{"name": "mine"}).MustStatus(t, http.StatusForbidden)
	member.Mutate(http.MethodPatch, "/v1/teams/"+open.ID, map[string]any{"name": "renamed"}).MustStatus(t, http.StatusForbidden)
	member.Mutate(http.MethodDelete, "/v1/teams/"+open.ID, nil).MustStatus(t, http.StatusForbidden)
	member.Mutate(http.MethodPost, "/v1/teams/"+open.ID+"/members", map[string]any{"user_ids": []string{member.ID}}).
		MustStatus(t, http.StatusForbidden)

	// The secret team answers as a missing one does, and is not listed.
	missing := member.Get("/v1/teams/team_missing").MustStatus(t, http.StatusNotFound)
	hidden := member.Get("/v1/teams/"+secret.ID).MustStatus(t, http.StatusNotFound)
	if hidden.Code() != missing.Code() {
		t.Fatalf("secret team answers %s, a missing one %s", hidden.Body, missing.Body)
	}
	member.Get("/v1/teams/"+secret.ID+"/members").MustStatus(t, http.StatusNotFound)
	var listed []v1Team
	member.Get("/v1/teams").MustStatus(t, http.StatusOK).Data(t, &listed)
	for _, x := range listed {
		if x.ID == secret.ID {
			t.Fatal("a member outside the secret team lists it")
		}
	}
	// Its member finds it.
	owner.Mutate(http.MethodPost, "/v1/teams/"+secret.ID+"/members", map[string]any{"user_ids": []string{member.ID}}).
		MustStatus(t, http.StatusOK)
	member.Get("/v1/teams/"+secret.ID).MustStatus(t, http.StatusOK)

	// Another organization's workspace is not found, as a missing one.
	other := f.env.WithOrganization("Other")
	foreign := newWorkspace(t, other, newProject(t, other, "Q"), "foreign")
	owner.Mutate(http.MethodPost, "/v1/workspaces/"+foreign.ID+"/team-access", map[string]any{"team_id": open.ID, "access": "read"}).
		MustStatus(t, http.StatusNotFound)
	owner.Get("/v1/workspaces/"+foreign.ID+"/team-access").MustStatus(t, http.StatusNotFound)
	other.Mutate(http.MethodPost, "/v1/workspaces/"+foreign.ID+"/team-access", map[string]any{"team_id": open.ID, "access": "read"}).
		MustStatus(t, http.StatusNotFound)

	// manage-teams with read-workspaces: every workspace is readable, none
	// administered, so no grant anywhere.
	managers := createTeamV1(t, owner, map[string]any{"name": "managers", "visibility": "organization",
		"organization_access": map[string]bool{"manage_teams": true, "read_workspaces": true, "read_projects": true}})
	owner.Mutate(http.MethodPost, "/v1/teams/"+managers.ID+"/members", map[string]any{"user_ids": []string{member.ID}}).
		MustStatus(t, http.StatusOK)
	member.Get("/v1/workspaces/"+w.ID).MustStatus(t, http.StatusOK)
	member.Mutate(http.MethodPost, "/v1/workspaces/"+w.ID+"/team-access", map[string]any{"team_id": open.ID, "access": "admin"}).
		MustStatus(t, http.StatusForbidden)
	member.Mutate(http.MethodPost, "/v1/projects/"+proj+"/team-access", map[string]any{"team_id": open.ID, "access": "admin"}).
		MustStatus(t, http.StatusForbidden)
	// Managing teams it may: the same request as an owner is granted.
	grantWorkspaceV1(t, owner, w.ID, map[string]any{"team_id": open.ID, "access": "admin"})
	member.Mutate(http.MethodPatch, "/v1/teams/"+open.ID, map[string]any{"name": "renamed"}).MustStatus(t, http.StatusOK)
}

// TestMemberEffectiveAccessV1: a member-role user's page shows their
// teams and, per workspace, the permissions a team grant gives and which
// team gives them; a viewer who manages teams sees only the workspaces it
// can read itself; a plain member reads only their own page, and another
// organization's user is not found.
func TestMemberEffectiveAccessV1(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	owner, member := f.owner, f.member
	proj := newProject(t, owner, "P")
	a, b := newWorkspace(t, owner, proj, "alpha"), newWorkspace(t, owner, proj, "beta")
	payments := createTeamV1(t, owner, map[string]any{"name": "payments"})
	owner.Mutate(http.MethodPost, "/v1/teams/"+payments.ID+"/members", map[string]any{"user_ids": []string{member.ID}}).
		MustStatus(t, http.StatusOK)
	grantWorkspaceV1(t, owner, a.ID, map[string]any{"team_id": payments.ID, "access": "plan"})
	grantWorkspaceV1(t, owner, b.ID, map[string]any{"team_id": payments.ID, "access": "write"})

	var got v1MemberAccess
	owner.Get("/v1/members/"+member.ID).MustStatus(t, http.StatusOK).Data(t, &got)
	if got.Role != "member" || len(got.Teams) != 1 || got.Teams[0].ID != payments.ID || len(got.Workspaces) != 2 {
		t.Fatalf("member access %+v", got)
	}
	alpha, beta := got.Workspaces[0], got.Workspaces[1]
	if alpha.WorkspaceID != a.ID || !slices.Contains(alpha.Permissions, "run:create") || slices.Contains(alpha.Permissions, "run:approve") ||
		strings.Join(alpha.Via, ",") != "payments" {
		t.Fatalf("access in alpha %+v", alpha)
	}
	if beta.WorkspaceID != b.ID || !slices.Contains(beta.Permissions, "run:approve") || !slices.Contains(beta.Permissions, "state:write") {
		t.Fatalf("access in beta %+v", beta)
	}
	if strings.Join(got.OrganizationPermissions, ",") != "organization:read,registry:read" {
		t.Fatalf("organization permissions %v", got.OrganizationPermissions)
	}
	var own v1MemberAccess
	member.Get("/v1/members/"+member.ID).MustStatus(t, http.StatusOK).Data(t, &own)
	if len(own.Workspaces) != 2 {
		t.Fatalf("own access %+v", own)
	}
	member.Get("/v1/members/"+owner.ID).MustStatus(t, http.StatusForbidden)

	// A team manager whose own grant reaches only alpha sees only alpha.
	manager := f.env.SignUp("Manager")
	f.env.Join(owner, manager, "member")
	managers := createTeamV1(t, owner, map[string]any{"name": "managers", "organization_access": map[string]bool{"manage_teams": true}})
	owner.Mutate(http.MethodPost, "/v1/teams/"+managers.ID+"/members", map[string]any{"user_ids": []string{manager.ID}}).
		MustStatus(t, http.StatusOK)
	grantWorkspaceV1(t, owner, a.ID, map[string]any{"team_id": managers.ID, "access": "read"})
	var seen v1MemberAccess
	manager.Get("/v1/members/"+member.ID).MustStatus(t, http.StatusOK).Data(t, &seen)
	if len(seen.Workspaces) != 1 || seen.Workspaces[0].WorkspaceID != a.ID {
		t.Fatalf("manager sees %+v, want only alpha", seen.Workspaces)
	}
	// payments is secret and the manager is not in it: its grant counts,
	// its name does not show.
	if len(seen.Teams) != 0 || strings.Join(seen.Workspaces[0].Via, ",") != "a secret team" {
		t.Fatalf("manager sees teams %+v via %v", seen.Teams, seen.Workspaces[0].Via)
	}

	// A reader's role reaches every workspace by itself.
	reader := f.env.SignUp("Reader")
	f.env.Join(owner, reader, "reader")
	owner.Get("/v1/members/"+reader.ID).MustStatus(t, http.StatusOK).Data(t, &got)
	if len(got.Workspaces) != 2 || strings.Join(got.Workspaces[0].Via, ",") != "reader" {
		t.Fatalf("reader access %+v", got)
	}
	other := f.env.WithOrganization("Other")
	owner.Get("/v1/members/"+other.ID).MustStatus(t, http.StatusNotFound)
}

// TestTeamAccessFollowsLaunchControl: with the public gate closed and one
// canary pair, team and project-wide changes and grants on another
// workspace get the non-disclosing 503; a grant on the canary workspace is
// changed (its workspace resolved from the grant), and revocations, which
// only narrow access, are never held back.
func TestTeamAccessFollowsLaunchControl(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	owner := f.owner
	proj := newProject(t, owner, "P")
	canary, other := newWorkspace(t, owner, proj, "canary"), newWorkspace(t, owner, proj, "other")
	tm := createTeamV1(t, owner, map[string]any{"name": "payments"})
	onCanary := grantWorkspaceV1(t, owner, canary.ID, map[string]any{"team_id": tm.ID, "access": "read"})
	onOther := grantWorkspaceV1(t, owner, other.ID, map[string]any{"team_id": tm.ID, "access": "read"})

	c := launch.Default()
	c.CanaryAllowlist = []launch.Pair{{OrganizationID: owner.OrganizationID, WorkspaceID: canary.ID}}
	applyControl(t, f.env, "canary-only", 1, c)

	for what, r := range map[string]*apitest.Response{
		"team create":  owner.Mutate(http.MethodPost, "/v1/teams", map[string]any{"name": "another"}),
		"team update":  owner.Mutate(http.MethodPatch, "/v1/teams/"+tm.ID, map[string]any{"name": "renamed"}),
		"member add":   owner.Mutate(http.MethodPost, "/v1/teams/"+tm.ID+"/members", map[string]any{"user_ids": []string{f.member.ID}}),
		"grant other":  owner.Mutate(http.MethodPost, "/v1/workspaces/"+other.ID+"/team-access", map[string]any{"team_id": tm.ID, "access": "read"}),
		"change other": owner.Mutate(http.MethodPatch, "/v1/workspace-team-access/"+onOther.ID, map[string]any{"access": "write"}),
		"grant project": owner.Mutate(http.MethodPost, "/v1/projects/"+proj+"/team-access",
			map[string]any{"team_id": tm.ID, "access": "read"}),
	} {
		if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "service_unavailable") {
			t.Errorf("%s: %d %s, want the non-disclosing 503", what, r.Status, r.Body)
		}
	}
	owner.Mutate(http.MethodPatch, "/v1/workspace-team-access/"+onCanary.ID, map[string]any{"access": "write"}).MustStatus(t, http.StatusOK)
	owner.Mutate(http.MethodDelete, "/v1/workspace-team-access/"+onOther.ID, nil).MustStatus(t, http.StatusOK)
	owner.Mutate(http.MethodDelete, "/v1/teams/"+tm.ID, nil).MustStatus(t, http.StatusOK)
}
