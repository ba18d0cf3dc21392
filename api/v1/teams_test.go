package v1_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
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
