package access

import (
	"fmt"

	"github.com/cairnhq/cairn/api/platform/fault"
)

// This file is the one mapping from HCP Terraform's team access model
// (workspace levels, project levels, their custom attributes and the
// organization-access flags) to Cairn's permissions. Grants are additive:
// a principal's permissions in a workspace are its role's baseline, its
// teams' organization access, and every grant of its teams on that
// workspace or its project, together.
//
// Cairn permissions that HCP does not name are placed like this:
//   - run:cancel goes with runs=apply (HCP puts cancel with write);
//   - run:approve is runs=apply;
//   - state:read_outputs is state-versions=read-outputs and never reads a
//     raw state body; state:read needs state-versions=read;
//   - state locking is part of state:write (the CLI locks to write state),
//     so workspace-locking is stored and reported but grants nothing more;
//   - run:recover, state:recover, state:force_unlock,
//     artifact:read_sensitive, credential:write, workspace:write and
//     workspace:admin come only with the admin level (project: admin and
//     maintain), or with manage-workspaces / manage-projects;
//   - manage-modules is registry:write (publishing, deprecating, revoking
//     and deleting private registry modules);
//   - variable sets are organization-wide: read-workspaces reads them
//     (varset:read) and manage-workspaces manages them (varset:write); a
//     project grant's variable-sets attribute (project-owned sets) is
//     stored and reported only;
//   - sentinel-mocks, run-tasks, manage-providers, manage-run-tasks and
//     manage-agent-pools are stored and reported; Cairn has nothing they
//     govern yet.

// Workspace access levels (team-workspaces "access").
const (
	LevelRead     = "read"
	LevelPlan     = "plan"
	LevelWrite    = "write"
	LevelAdmin    = "admin"
	LevelMaintain = "maintain" // projects only
	LevelCustom   = "custom"
)

// WorkspaceAccess is one team's access to one workspace with the values
// of HCP's six attributes. For a fixed level they are the implied values.
type WorkspaceAccess struct {
	Access           string `json:"access" db:"access"`
	Runs             string `json:"runs" db:"runs"`                     // read | plan | apply
	Variables        string `json:"variables" db:"variables"`           // none | read | write
	StateVersions    string `json:"state_versions" db:"state_versions"` // none | read-outputs | read | write
	SentinelMocks    string `json:"sentinel_mocks" db:"sentinel_mocks"` // none | read
	WorkspaceLocking bool   `json:"workspace_locking" db:"workspace_locking"`
	RunTasks         bool   `json:"run_tasks" db:"run_tasks"`
}

// WorkspaceLevel returns the attributes a workspace level implies; custom
// starts from HCP's custom defaults (read runs, nothing else).
func WorkspaceLevel(level string) (WorkspaceAccess, error) {
	switch level {
	case LevelRead:
		return WorkspaceAccess{Access: level, Runs: "read", Variables: "read", StateVersions: "read", SentinelMocks: "none"}, nil
	case LevelPlan:
		return WorkspaceAccess{Access: level, Runs: "plan", Variables: "read", StateVersions: "read", SentinelMocks: "none"}, nil
	case LevelWrite:
		return WorkspaceAccess{Access: level, Runs: "apply", Variables: "write", StateVersions: "write", SentinelMocks: "read", WorkspaceLocking: true}, nil
	case LevelAdmin:
		return WorkspaceAccess{Access: level, Runs: "apply", Variables: "write", StateVersions: "write", SentinelMocks: "read", WorkspaceLocking: true, RunTasks: true}, nil
	case LevelCustom:
		return WorkspaceAccess{Access: level, Runs: "read", Variables: "none", StateVersions: "none", SentinelMocks: "none"}, nil
	}
	return WorkspaceAccess{}, fmt.Errorf("%w: access must be read, plan, write, admin or custom", fault.ErrValidation)
}

// Validate checks the attribute values.
func (a WorkspaceAccess) Validate() error {
	if _, err := WorkspaceLevel(a.Access); err != nil {
		return err
	}
	return validateAttributes(a.Runs, a.Variables, a.StateVersions, a.SentinelMocks)
}

func validateAttributes(runs, variables, stateVersions, sentinelMocks string) error {
	for _, c := range []struct {
		name, value string
		allowed     []string
	}{
		{"runs", runs, []string{"read", "plan", "apply"}},
		{"variables", variables, []string{"none", "read", "write"}},
		{"state-versions", stateVersions, []string{"none", "read-outputs", "read", "write"}},
		{"sentinel-mocks", sentinelMocks, []string{"none", "read"}},
	} {
		if !contains(c.allowed, c.value) {
			return fmt.Errorf("%w: %s must be one of %v", fault.ErrValidation, c.name, c.allowed)
		}
	}
	return nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// workspaceAdminPermissions are what only an admin grant (or an
// organization-wide manage flag) adds in a workspace.
var workspaceAdminPermissions = []Permission{
	PermWorkspaceWrite, PermWorkspaceAdmin, PermRunRecover, PermStateRecover, PermStateForceUnlock,
	PermArtifactReadSensitive, PermCredentialWrite,
}

// attributePermissions maps runs, variables and state-versions values to
// permissions in a workspace. Every grant reads the workspace and its runs.
func attributePermissions(runs, variables, stateVersions string) []Permission {
	perms := []Permission{PermWorkspaceRead, PermRunRead}
	switch runs {
	case "plan":
		perms = append(perms, PermRunCreate)
	case "apply":
		perms = append(perms, PermRunCreate, PermRunApprove, PermRunCancel)
	}
	switch variables {
	case "read":
		perms = append(perms, PermVariableRead)
	case "write":
		perms = append(perms, PermVariableRead, PermVariableWrite)
	}
	switch stateVersions {
	case "read-outputs":
		perms = append(perms, PermStateReadOutputs)
	case "read":
		perms = append(perms, PermStateRead)
	case "write":
		perms = append(perms, PermStateRead, PermStateWrite)
	}
	return perms
}

// Permissions is what the grant allows in its workspace.
func (a WorkspaceAccess) Permissions() PermissionSet {
	perms := attributePermissions(a.Runs, a.Variables, a.StateVersions)
	if a.Access == LevelAdmin {
		perms = append(perms, workspaceAdminPermissions...)
	}
	return NewPermissionSet(perms...)
}

// ProjectAccess is one team's access to one project: settings and team
// management of the project itself, and the access it gives in every
// workspace of the project.
type ProjectAccess struct {
	Access string `json:"access" db:"access"`
	// Project access.
	Settings     string `json:"settings" db:"settings"`           // read | update | delete
	Teams        string `json:"teams" db:"teams"`                 // none | read | manage
	VariableSets string `json:"variable_sets" db:"variable_sets"` // none | read | write
	// Workspace access in the project's workspaces.
	Runs          string `json:"runs" db:"runs"`
	Variables     string `json:"variables" db:"variables"`
	StateVersions string `json:"state_versions" db:"state_versions"`
	SentinelMocks string `json:"sentinel_mocks" db:"sentinel_mocks"`
	Create        bool   `json:"create" db:"create_workspaces"`
	Locking       bool   `json:"locking" db:"locking"`
	Move          bool   `json:"move" db:"move_workspaces"`
	Delete        bool   `json:"delete" db:"delete_workspaces"`
	RunTasks      bool   `json:"run_tasks" db:"run_tasks"`
}

// ProjectLevel returns the attributes a project level implies; custom
// starts from read settings and read runs.
func ProjectLevel(level string) (ProjectAccess, error) {
	full := ProjectAccess{Access: level, Settings: "read", Teams: "none", VariableSets: "write",
		Runs: "apply", Variables: "write", StateVersions: "write", SentinelMocks: "read", Locking: true}
	switch level {
	case LevelRead:
		return ProjectAccess{Access: level, Settings: "read", Teams: "none", VariableSets: "none",
			Runs: "read", Variables: "read", StateVersions: "read", SentinelMocks: "none"}, nil
	case LevelWrite:
		return full, nil
	case LevelMaintain:
		full.Create, full.Delete = true, true
		return full, nil
	case LevelAdmin:
		full.Settings, full.Teams = "delete", "manage"
		full.Create, full.Delete, full.Move, full.RunTasks = true, true, true, true
		return full, nil
	case LevelCustom:
		return ProjectAccess{Access: level, Settings: "read", Teams: "none", VariableSets: "none",
			Runs: "read", Variables: "none", StateVersions: "none", SentinelMocks: "none"}, nil
	}
	return ProjectAccess{}, fmt.Errorf("%w: access must be admin, maintain, write, read or custom", fault.ErrValidation)
}

// Validate checks the attribute values.
func (a ProjectAccess) Validate() error {
	if _, err := ProjectLevel(a.Access); err != nil {
		return err
	}
	for _, c := range []struct {
		name, value string
		allowed     []string
	}{
		{"settings", a.Settings, []string{"read", "update", "delete"}},
		{"teams", a.Teams, []string{"none", "read", "manage"}},
		{"variable-sets", a.VariableSets, []string{"none", "read", "write"}},
	} {
		if !contains(c.allowed, c.value) {
			return fmt.Errorf("%w: %s must be one of %v", fault.ErrValidation, c.name, c.allowed)
		}
	}
	return validateAttributes(a.Runs, a.Variables, a.StateVersions, a.SentinelMocks)
}

// WorkspacePermissions is what the grant allows in every workspace of its
// project. Admin and maintain manage the project's workspaces; a custom
// grant may create (workspace:write) and delete (workspace:admin) them.
func (a ProjectAccess) WorkspacePermissions() PermissionSet {
	perms := attributePermissions(a.Runs, a.Variables, a.StateVersions)
	switch {
	case a.Access == LevelAdmin || a.Access == LevelMaintain:
		perms = append(perms, workspaceAdminPermissions...)
	case a.Access == LevelCustom:
		if a.Create {
			perms = append(perms, PermWorkspaceWrite)
		}
		if a.Delete {
			perms = append(perms, PermWorkspaceAdmin)
		}
	}
	return NewPermissionSet(perms...)
}

// ProjectPermissions is what the grant allows on the project itself.
func (a ProjectAccess) ProjectPermissions() PermissionSet {
	if a.Settings == "update" || a.Settings == "delete" {
		return NewPermissionSet(PermProjectRead, PermProjectWrite)
	}
	return NewPermissionSet(PermProjectRead)
}

// OrganizationAccess is a team's organization-wide flags (HCP
// "organization-access"), all false by default.
type OrganizationAccess struct {
	ManagePolicies           bool `json:"manage_policies" db:"manage_policies"`
	ManagePolicyOverrides    bool `json:"manage_policy_overrides" db:"manage_policy_overrides"`
	ManageWorkspaces         bool `json:"manage_workspaces" db:"manage_workspaces"`
	ManageProjects           bool `json:"manage_projects" db:"manage_projects"`
	ManageVCSSettings        bool `json:"manage_vcs_settings" db:"manage_vcs_settings"`
	ManageProviders          bool `json:"manage_providers" db:"manage_providers"`
	ManageModules            bool `json:"manage_modules" db:"manage_modules"`
	ManageRunTasks           bool `json:"manage_run_tasks" db:"manage_run_tasks"`
	ReadWorkspaces           bool `json:"read_workspaces" db:"read_workspaces"`
	ReadProjects             bool `json:"read_projects" db:"read_projects"`
	ManageMembership         bool `json:"manage_membership" db:"manage_membership"`
	ManageTeams              bool `json:"manage_teams" db:"manage_teams"`
	ManageOrganizationAccess bool `json:"manage_organization_access" db:"manage_organization_access"`
	AccessSecretTeams        bool `json:"access_secret_teams" db:"access_secret_teams"`
	ManageAgentPools         bool `json:"manage_agent_pools" db:"manage_agent_pools"`
}

// Permissions is what the flags allow, in the organization and in every
// workspace of it: manage-workspaces (and manage-projects) is admin on
// every workspace, read-workspaces is read on every workspace.
func (o OrganizationAccess) Permissions() PermissionSet {
	var perms []Permission
	add := func(on bool, ps ...Permission) {
		if on {
			perms = append(perms, ps...)
		}
	}
	readAll := attributePermissions("read", "read", "read")
	adminAll := append(attributePermissions("apply", "write", "write"), workspaceAdminPermissions...)
	add(o.ReadWorkspaces, append(readAll, PermVarsetRead)...)
	add(o.ManageWorkspaces, append(adminAll, PermProjectRead, PermVarsetRead, PermVarsetWrite)...)
	add(o.ReadProjects, PermProjectRead)
	add(o.ManageProjects, append(adminAll, PermProjectRead, PermProjectWrite)...)
	add(o.ManagePolicies, PermPolicyRead, PermPolicyWrite)
	add(o.ManagePolicyOverrides, PermPolicyRead, PermPolicyOverrideSoft)
	add(o.ManageVCSSettings, PermVCSInstall)
	add(o.ManageModules, PermRegistryRead, PermRegistryWrite)
	add(o.ManageMembership, PermMemberManage)
	add(o.ManageTeams, PermTeamManage)
	add(o.ManageOrganizationAccess, PermTeamManage, PermTeamOrganizationAccess)
	add(o.AccessSecretTeams, PermTeamReadSecret)
	return NewPermissionSet(perms...)
}

// workspaceScoped are the permissions that act on a workspace or what is
// in it. A baseline holding any of them reaches every workspace; one
// holding none (the member role) reaches only what teams grant.
var workspaceScoped = NewPermissionSet(PermWorkspaceRead, PermWorkspaceWrite, PermWorkspaceAdmin,
	PermVariableRead, PermVariableWrite, PermRunRead, PermRunCreate, PermRunApprove, PermRunCancel, PermRunRecover,
	PermStateRead, PermStateReadOutputs, PermStateWrite, PermStateForceUnlock, PermStateRecover,
	PermArtifactReadSensitive, PermCredentialWrite)

// TeamGrants is what a principal's teams grant it, resolved from the
// database on every request so that a revoked grant narrows the next one.
// The zero value grants nothing.
type TeamGrants struct {
	// TeamIDs are the principal's teams.
	TeamIDs      []string
	organization PermissionSet
	workspaces   map[string]PermissionSet
	projects     map[string]PermissionSet // in each workspace of the project
	projectsOwn  map[string]PermissionSet // on the project itself
	anywhere     PermissionSet
}

// AddOrganization adds a team's organization access; owners adds every
// permission (the built-in owners team).
func (g *TeamGrants) AddOrganization(o OrganizationAccess, owners bool) {
	perms := o.Permissions()
	if owners {
		perms = NewPermissionSet(AllPermissions()...)
	}
	g.organization = g.organization.Union(perms)
	g.anywhere = g.anywhere.Union(perms)
}

// AddWorkspace adds a team's grant on a workspace.
func (g *TeamGrants) AddWorkspace(workspaceID string, a WorkspaceAccess) {
	if g.workspaces == nil {
		g.workspaces = map[string]PermissionSet{}
	}
	perms := a.Permissions()
	g.workspaces[workspaceID] = g.workspaces[workspaceID].Union(perms)
	g.anywhere = g.anywhere.Union(perms)
}

// AddProject adds a team's grant on a project.
func (g *TeamGrants) AddProject(projectID string, a ProjectAccess) {
	if g.projects == nil {
		g.projects, g.projectsOwn = map[string]PermissionSet{}, map[string]PermissionSet{}
	}
	in, own := a.WorkspacePermissions(), a.ProjectPermissions()
	g.projects[projectID] = g.projects[projectID].Union(in)
	g.projectsOwn[projectID] = g.projectsOwn[projectID].Union(own)
	g.anywhere = g.anywhere.Union(in).Union(own)
}

// Within confines every grant to ceiling (an agent's scopes).
func (g TeamGrants) Within(ceiling PermissionSet) TeamGrants {
	out := TeamGrants{TeamIDs: g.TeamIDs, organization: g.organization.Intersect(ceiling), anywhere: g.anywhere.Intersect(ceiling)}
	confine := func(m map[string]PermissionSet) map[string]PermissionSet {
		if m == nil {
			return nil
		}
		c := make(map[string]PermissionSet, len(m))
		for k, v := range m {
			c[k] = v.Intersect(ceiling)
		}
		return c
	}
	out.workspaces, out.projects, out.projectsOwn = confine(g.workspaces), confine(g.projects), confine(g.projectsOwn)
	return out
}

// Scope is the set of workspaces a principal reaches, for filtering lists:
// every workspace, or those listed and those in the listed projects.
type Scope struct {
	All          bool
	WorkspaceIDs []string
	ProjectIDs   []string
}

// Admits reports whether the scope holds a workspace of a project.
func (s Scope) Admits(workspaceID, projectID string) bool {
	return s.All || contains(s.WorkspaceIDs, workspaceID) || contains(s.ProjectIDs, projectID)
}
