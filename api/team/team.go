package team

import (
	"fmt"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/access"
)

// Visibility of a team: secret teams are seen only by their members and
// by holders of team:read_secret.
const (
	VisibilitySecret       = "secret"
	VisibilityOrganization = "organization"
)

// OwnersName is the name of every organization's built-in team.
const OwnersName = "owners"

// Team is an organization's team.
type Team struct {
	ID                         string  `db:"id"`
	OrganizationID             string  `db:"organization_id"`
	Name                       string  `db:"name"`
	SSOTeamID                  *string `db:"sso_team_id"`
	Visibility                 string  `db:"visibility"`
	Owners                     bool    `db:"owners"`
	AllowMemberTokenManagement bool    `db:"allow_member_token_management"`
	access.OrganizationAccess
	UsersCount int       `db:"users_count"`
	CreatedBy  string    `db:"created_by"`
	CreatedAt  time.Time `db:"created_at"`
	UpdatedAt  time.Time `db:"updated_at"`
}

// Member is a user in a team, with their baseline role in the
// organization.
type Member struct {
	UserID string `db:"user_id"`
	// InvitationID is the invitation the member joined the organization
	// with, if any: /api/v2 names the membership after it.
	InvitationID *string     `db:"invitation_id"`
	Name         string      `db:"name"`
	Email        string      `db:"email"`
	Role         access.Role `db:"role"`
	AddedAt      time.Time   `db:"created_at"`
}

// WorkspaceGrant is a team's access to a workspace.
type WorkspaceGrant struct {
	ID             string `db:"id"`
	OrganizationID string `db:"organization_id"`
	TeamID         string `db:"team_id"`
	WorkspaceID    string `db:"workspace_id"`
	access.WorkspaceAccess
	CreatedAt time.Time `db:"created_at"`
	UpdatedAt time.Time `db:"updated_at"`
}

// ProjectGrant is a team's access to a project.
type ProjectGrant struct {
	ID             string `db:"id"`
	OrganizationID string `db:"organization_id"`
	TeamID         string `db:"team_id"`
	ProjectID      string `db:"project_id"`
	access.ProjectAccess
	CreatedAt time.Time `db:"created_at"`
	UpdatedAt time.Time `db:"updated_at"`
}

// OrganizationAccessPatch sets the flags that are not nil and keeps the
// others (HCP merges organization-access flag by flag). Its JSON names are
// access.OrganizationAccess's, as /v1 takes them.
type OrganizationAccessPatch struct {
	ManagePolicies           *bool `json:"manage_policies,omitempty"`
	ManagePolicyOverrides    *bool `json:"manage_policy_overrides,omitempty"`
	ManageWorkspaces         *bool `json:"manage_workspaces,omitempty"`
	ManageProjects           *bool `json:"manage_projects,omitempty"`
	ManageVCSSettings        *bool `json:"manage_vcs_settings,omitempty"`
	ManageProviders          *bool `json:"manage_providers,omitempty"`
	ManageModules            *bool `json:"manage_modules,omitempty"`
	ManageRunTasks           *bool `json:"manage_run_tasks,omitempty"`
	ReadWorkspaces           *bool `json:"read_workspaces,omitempty"`
	ReadProjects             *bool `json:"read_projects,omitempty"`
	ManageMembership         *bool `json:"manage_membership,omitempty"`
	ManageTeams              *bool `json:"manage_teams,omitempty"`
	ManageOrganizationAccess *bool `json:"manage_organization_access,omitempty"`
	AccessSecretTeams        *bool `json:"access_secret_teams,omitempty"`
	ManageAgentPools         *bool `json:"manage_agent_pools,omitempty"`
}

// Apply merges the patch into o.
func (pt OrganizationAccessPatch) Apply(o access.OrganizationAccess) access.OrganizationAccess {
	for _, f := range []struct {
		from *bool
		to   *bool
	}{
		{pt.ManagePolicies, &o.ManagePolicies}, {pt.ManagePolicyOverrides, &o.ManagePolicyOverrides},
		{pt.ManageWorkspaces, &o.ManageWorkspaces}, {pt.ManageProjects, &o.ManageProjects},
		{pt.ManageVCSSettings, &o.ManageVCSSettings}, {pt.ManageProviders, &o.ManageProviders},
		{pt.ManageModules, &o.ManageModules}, {pt.ManageRunTasks, &o.ManageRunTasks},
		{pt.ReadWorkspaces, &o.ReadWorkspaces}, {pt.ReadProjects, &o.ReadProjects},
		{pt.ManageMembership, &o.ManageMembership}, {pt.ManageTeams, &o.ManageTeams},
		{pt.ManageOrganizationAccess, &o.ManageOrganizationAccess}, {pt.AccessSecretTeams, &o.AccessSecretTeams},
		{pt.ManageAgentPools, &o.ManageAgentPools},
	} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	return o
}

// Empty reports whether the patch sets nothing.
func (pt OrganizationAccessPatch) Empty() bool {
	return pt.Apply(access.OrganizationAccess{}) == access.OrganizationAccess{} &&
		pt.Apply(allOrganizationAccess()) == allOrganizationAccess()
}

func allOrganizationAccess() access.OrganizationAccess {
	t := true
	return OrganizationAccessPatch{&t, &t, &t, &t, &t, &t, &t, &t, &t, &t, &t, &t, &t, &t, &t}.Apply(access.OrganizationAccess{})
}

// ValidateName accepts a team name: 1 to 200 characters, trimmed.
func ValidateName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return "", fmt.Errorf("%w: name must be 1 to 200 characters", ErrInvalid)
	}
	return name, nil
}

func validateVisibility(v string) error {
	if v != VisibilitySecret && v != VisibilityOrganization {
		return fmt.Errorf("%w: visibility must be secret or organization", ErrInvalid)
	}
	return nil
}

// attribute is one optional input attribute and where it lands.
type attribute[T comparable] struct {
	name string
	in   *T
	to   *T
}

// applyAttributes sets every given attribute that differs from the
// current value; with a fixed level that is a ReadOnlyAttributeError.
func applyAttributes[T comparable](level string, attrs ...attribute[T]) error {
	for _, a := range attrs {
		if a.in == nil || *a.in == *a.to {
			continue
		}
		if level != access.LevelCustom {
			return ReadOnlyAttributeError{Attribute: a.name, Level: level}
		}
		*a.to = *a.in
	}
	return nil
}

// WorkspaceAccessInput asks for a level and, with access "custom", any of
// the six attributes; nil keeps the current (or default) value.
type WorkspaceAccessInput struct {
	Access                                        string
	Runs, Variables, StateVersions, SentinelMocks *string
	WorkspaceLocking, RunTasks                    *bool
}

// resolve applies the input over current (zero for a new grant). With a
// fixed level the attributes are the level's and setting one to another
// value is a ReadOnlyAttributeError.
func (in WorkspaceAccessInput) resolve(current access.WorkspaceAccess) (access.WorkspaceAccess, error) {
	level := in.Access
	if level == "" {
		level = current.Access
	}
	out, err := access.WorkspaceLevel(level)
	if err != nil {
		return out, err
	}
	if level == access.LevelCustom && current.Access == access.LevelCustom {
		out = current
	}
	if err := applyAttributes(level,
		attribute[string]{"Runs", in.Runs, &out.Runs}, attribute[string]{"Variables", in.Variables, &out.Variables},
		attribute[string]{"State versions", in.StateVersions, &out.StateVersions},
		attribute[string]{"Sentinel mocks", in.SentinelMocks, &out.SentinelMocks}); err != nil {
		return out, err
	}
	if err := applyAttributes(level, attribute[bool]{"Workspace locking", in.WorkspaceLocking, &out.WorkspaceLocking},
		attribute[bool]{"Run tasks", in.RunTasks, &out.RunTasks}); err != nil {
		return out, err
	}
	return out, out.Validate()
}

// ProjectAccessInput asks for a project level and, with access "custom",
// any of the project and workspace attributes; nil keeps the value.
type ProjectAccessInput struct {
	Access                                                                       string
	Settings, Teams, VariableSets, Runs, Variables, StateVersions, SentinelMocks *string
	Create, Locking, Move, Delete, RunTasks                                      *bool
}

func (in ProjectAccessInput) resolve(current access.ProjectAccess) (access.ProjectAccess, error) {
	level := in.Access
	if level == "" {
		level = current.Access
	}
	out, err := access.ProjectLevel(level)
	if err != nil {
		return out, err
	}
	if level == access.LevelCustom && current.Access == access.LevelCustom {
		out = current
	}
	if err := applyAttributes(level,
		attribute[string]{"Settings", in.Settings, &out.Settings}, attribute[string]{"Teams", in.Teams, &out.Teams},
		attribute[string]{"Variable sets", in.VariableSets, &out.VariableSets}, attribute[string]{"Runs", in.Runs, &out.Runs},
		attribute[string]{"Variables", in.Variables, &out.Variables},
		attribute[string]{"State versions", in.StateVersions, &out.StateVersions},
		attribute[string]{"Sentinel mocks", in.SentinelMocks, &out.SentinelMocks}); err != nil {
		return out, err
	}
	if err := applyAttributes(level,
		attribute[bool]{"Create", in.Create, &out.Create}, attribute[bool]{"Locking", in.Locking, &out.Locking},
		attribute[bool]{"Move", in.Move, &out.Move}, attribute[bool]{"Delete", in.Delete, &out.Delete},
		attribute[bool]{"Run tasks", in.RunTasks, &out.RunTasks}); err != nil {
		return out, err
	}
	return out, out.Validate()
}
