package access

import (
	"errors"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/api/platform/fault"
)

// TestEffectivePermissions derives a principal's permissions in a granted
// workspace, another workspace of the granted project, and an ungranted
// workspace for every baseline role, workspace level and custom
// attribute, and checks them against the mapping written out by hand.
func TestEffectivePermissions(t *testing.T) {
	t.Parallel()
	read := []Permission{PermWorkspaceRead, PermRunRead, PermStateRead, PermVariableRead}
	plan := append(slices.Clone(read), PermRunCreate)
	write := append(slices.Clone(plan), PermRunApprove, PermRunCancel, PermVariableWrite, PermStateWrite)
	admin := append(slices.Clone(write), PermWorkspaceWrite, PermWorkspaceAdmin, PermRunRecover, PermStateRecover,
		PermStateForceUnlock, PermArtifactReadSensitive, PermCredentialWrite)
	levels := map[string][]Permission{LevelRead: read, LevelPlan: plan, LevelWrite: write, LevelAdmin: admin}
	type custom struct {
		name string
		set  func(*WorkspaceAccess)
		want []Permission
	}
	base := []Permission{PermWorkspaceRead, PermRunRead}
	customs := []custom{
		{"defaults", func(*WorkspaceAccess) {}, base},
		{"runs=plan", func(a *WorkspaceAccess) { a.Runs = "plan" }, append(slices.Clone(base), PermRunCreate)},
		{"runs=apply", func(a *WorkspaceAccess) { a.Runs = "apply" }, append(slices.Clone(base), PermRunCreate, PermRunApprove, PermRunCancel)},
		{"variables=read", func(a *WorkspaceAccess) { a.Variables = "read" }, append(slices.Clone(base), PermVariableRead)},
		{"variables=write", func(a *WorkspaceAccess) { a.Variables = "write" }, append(slices.Clone(base), PermVariableRead, PermVariableWrite)},
		{"state=read-outputs", func(a *WorkspaceAccess) { a.StateVersions = "read-outputs" }, append(slices.Clone(base), PermStateReadOutputs)},
		{"state=read", func(a *WorkspaceAccess) { a.StateVersions = "read" }, append(slices.Clone(base), PermStateRead)},
		{"state=write", func(a *WorkspaceAccess) { a.StateVersions = "write" }, append(slices.Clone(base), PermStateRead, PermStateWrite)},
		{"sentinel-mocks=read", func(a *WorkspaceAccess) { a.SentinelMocks = "read" }, base},
		{"workspace-locking", func(a *WorkspaceAccess) { a.WorkspaceLocking = true }, base},
		{"run-tasks", func(a *WorkspaceAccess) { a.RunTasks = true }, base},
	}
	type grant struct {
		name string
		a    WorkspaceAccess
		want []Permission
	}
	var grants []grant
	for level, want := range levels {
		a, err := WorkspaceLevel(level)
		if err != nil {
			t.Fatal(err)
		}
		grants = append(grants, grant{level, a, want})
	}
	for _, c := range customs {
		a, _ := WorkspaceLevel(LevelCustom)
		c.set(&a)
		if err := a.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		grants = append(grants, grant{"custom " + c.name, a, c.want})
	}
	for _, role := range Roles() {
		for _, g := range grants {
			var tg TeamGrants
			tg.AddWorkspace("ws_a", g.a)
			p := Principal{Kind: KindUser, ID: "u", OrganizationID: "o", Role: role, Permissions: PermissionsOf(role), Grants: tg}
			got := p.PermissionsIn("ws_a", "prj_1")
			want := PermissionsOf(role).Union(NewPermissionSet(g.want...))
			if !slices.Equal(got.List(), want.List()) {
				t.Errorf("%s with %s: got %v, want %v", role, g.name, got.Strings(), want.Strings())
			}
			if !p.CanReadWorkspace("ws_a", "prj_1") {
				t.Errorf("%s with %s cannot read its workspace", role, g.name)
			}
			// Another workspace gets the baseline only, and only a role
			// with workspace permissions reaches it at all.
			if other := p.PermissionsIn("ws_b", "prj_1"); !slices.Equal(other.List(), PermissionsOf(role).List()) {
				t.Errorf("%s with %s: ws_b got %v", role, g.name, other.Strings())
			}
			if p.CanReadWorkspace("ws_b", "prj_1") != (role != RoleMember) {
				t.Errorf("%s with %s: reach of an ungranted workspace wrong", role, g.name)
			}
			for _, perm := range AllPermissions() {
				err := p.RequireIn("ws_b", "prj_1", perm)
				switch {
				case role == RoleMember && !errors.Is(err, fault.ErrNotFound):
					t.Errorf("member in ungranted workspace, %s: %v", perm, err)
				case role != RoleMember && PermissionsOf(role).Has(perm) != (err == nil):
					t.Errorf("%s in ungranted workspace, %s: %v", role, perm, err)
				}
			}
		}
	}
}

func TestProjectAndOrganizationAccess(t *testing.T) {
	t.Parallel()
	member := Principal{Kind: KindUser, ID: "u", OrganizationID: "o", Role: RoleMember, Permissions: PermissionsOf(RoleMember)}
	read, _ := ProjectLevel(LevelRead)
	p := member
	p.Grants.AddProject("prj_1", read)
	if !p.CanReadWorkspace("ws_any", "prj_1") || p.CanReadWorkspace("ws_any", "prj_2") {
		t.Fatal("a project grant reaches exactly its project's workspaces")
	}
	if err := p.RequireIn("ws_any", "prj_1", PermRunCreate); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("read project grant creating a run: %v", err)
	}
	for level, wantAdmin := range map[string]bool{LevelRead: false, LevelWrite: false, LevelMaintain: true, LevelAdmin: true} {
		a, _ := ProjectLevel(level)
		if a.WorkspacePermissions().Has(PermWorkspaceAdmin) != wantAdmin {
			t.Errorf("project %s: workspace:admin %v", level, !wantAdmin)
		}
		if a.ProjectPermissions().Has(PermProjectWrite) != (level == LevelAdmin) {
			t.Errorf("project %s: project:write wrong", level)
		}
	}
	outputs := member
	ro, _ := WorkspaceLevel(LevelCustom)
	ro.StateVersions = "read-outputs"
	outputs.Grants.AddWorkspace("ws_a", ro)
	if outputs.RequireIn("ws_a", "prj_1", PermStateReadOutputs) != nil || outputs.RequireIn("ws_a", "prj_1", PermStateRead) == nil {
		t.Fatal("read-outputs reads outputs and never the state body")
	}
	org := member
	org.Grants.AddOrganization(OrganizationAccess{ReadWorkspaces: true, ManagePolicies: true}, false)
	if !org.CanReadWorkspace("ws_x", "prj_9") || org.RequireIn("ws_x", "prj_9", PermRunCreate) == nil ||
		org.Require(PermPolicyWrite) != nil || org.Require(PermMemberManage) == nil {
		t.Fatal("read-workspaces reads every workspace; manage-policies is policy:write and nothing else")
	}
	manage := member
	manage.Grants.AddOrganization(OrganizationAccess{ManageWorkspaces: true}, false)
	if manage.RequireIn("ws_x", "prj_9", PermWorkspaceAdmin) != nil {
		t.Fatal("manage-workspaces is admin on every workspace")
	}
	owners := member
	owners.Grants.AddOrganization(OrganizationAccess{}, true)
	for _, perm := range AllPermissions() {
		if owners.RequireIn("ws_x", "prj_9", perm) != nil {
			t.Fatalf("owners team lacks %s", perm)
		}
	}
	agent := member
	agent.Grants = owners.Grants.Within(AgentCeiling(false))
	if agent.RequireIn("ws_x", "prj_9", PermRunCreate) == nil || agent.RequireIn("ws_x", "prj_9", PermRunRead) != nil {
		t.Fatal("an agent's team grants stay within its ceiling")
	}
	if _, err := WorkspaceLevel("maintain"); err == nil {
		t.Fatal("workspaces have no maintain level")
	}
}

// TestVariableSetPermissions: variable sets are organization-wide; readers
// and above read them, admins and owners change them, and among team
// organization-access flags read-workspaces reads them and
// manage-workspaces changes them. No workspace or project grant reaches
// them, and agents never do.
func TestVariableSetPermissions(t *testing.T) {
	t.Parallel()
	for role, want := range map[Role][2]bool{RoleOwner: {true, true}, RoleAdmin: {true, true}, RoleWriter: {true, false},
		RoleReader: {true, false}, RoleMember: {false, false}} {
		p := Principal{Kind: KindUser, ID: "u", OrganizationID: "o", Role: role, Permissions: PermissionsOf(role)}
		if (p.Require(PermVarsetRead) == nil) != want[0] || (p.Require(PermVarsetWrite) == nil) != want[1] {
			t.Errorf("%s: varset read/write want %v", role, want)
		}
	}
	member := Principal{Kind: KindUser, ID: "u", OrganizationID: "o", Role: RoleMember, Permissions: PermissionsOf(RoleMember)}
	for name, c := range map[string]struct {
		org         OrganizationAccess
		read, write bool
	}{
		"read-workspaces":   {OrganizationAccess{ReadWorkspaces: true}, true, false},
		"manage-workspaces": {OrganizationAccess{ManageWorkspaces: true}, true, true},
		"manage-projects":   {OrganizationAccess{ManageProjects: true}, false, false},
		"manage-policies":   {OrganizationAccess{ManagePolicies: true}, false, false},
	} {
		p := member
		p.Grants.AddOrganization(c.org, false)
		if (p.Require(PermVarsetRead) == nil) != c.read || (p.Require(PermVarsetWrite) == nil) != c.write {
			t.Errorf("%s: varset read %v write %v wanted", name, c.read, c.write)
		}
	}
	granted := member
	admin, _ := WorkspaceLevel(LevelAdmin)
	granted.Grants.AddWorkspace("ws_a", admin)
	projectAdmin, _ := ProjectLevel(LevelAdmin)
	granted.Grants.AddProject("prj_1", projectAdmin)
	if granted.Require(PermVarsetRead) == nil {
		t.Error("a workspace or project grant reaches variable sets")
	}
	if AgentPermissions(RoleOwner, true).Has(PermVarsetRead) {
		t.Error("an agent reads variable sets")
	}
}
