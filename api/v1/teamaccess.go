package v1

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/team"
)

// Team access on /v1: HCP's levels and custom attributes per workspace and
// per project, decided by the one mapping in api/access. Granting or
// changing access needs team:manage and workspace:admin where it lands.

// WorkspaceTeamAccessView is a team's access to a workspace.
type WorkspaceTeamAccessView struct {
	ID               string    `json:"id" doc:"Grant ID (tws_…)."`
	Object           string    `json:"object" enum:"workspace_team_access"`
	TeamID           string    `json:"team_id"`
	TeamName         string    `json:"team_name"`
	WorkspaceID      string    `json:"workspace_id"`
	Access           string    `json:"access" enum:"read,plan,write,admin,custom"`
	Runs             string    `json:"runs" enum:"read,plan,apply"`
	Variables        string    `json:"variables" enum:"none,read,write"`
	StateVersions    string    `json:"state_versions" enum:"none,read-outputs,read,write"`
	WorkspaceLocking bool      `json:"workspace_locking"`
	RunTasks         bool      `json:"run_tasks"`
	SentinelMocks    string    `json:"sentinel_mocks" enum:"none,read"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
}

func workspaceTeamAccessView(g team.WorkspaceGrant, teamName string) WorkspaceTeamAccessView {
	return WorkspaceTeamAccessView{ID: g.ID, Object: "workspace_team_access", TeamID: g.TeamID, TeamName: teamName,
		WorkspaceID: g.WorkspaceID, Access: g.Access, Runs: g.Runs, Variables: g.Variables, StateVersions: g.StateVersions,
		WorkspaceLocking: g.WorkspaceLocking, RunTasks: g.RunTasks, SentinelMocks: g.SentinelMocks,
		CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt}
}

// ProjectSettingsAccessView is what a project grant allows on the project
// itself.
type ProjectSettingsAccessView struct {
	Settings     string `json:"settings" enum:"read,update,delete"`
	Teams        string `json:"teams" enum:"none,read,manage"`
	VariableSets string `json:"variable_sets" enum:"none,read,write"`
}

// ProjectWorkspaceAccessView is what a project grant allows in every
// workspace of the project.
type ProjectWorkspaceAccessView struct {
	Runs             string `json:"runs" enum:"read,plan,apply"`
	Variables        string `json:"variables" enum:"none,read,write"`
	StateVersions    string `json:"state_versions" enum:"none,read-outputs,read,write"`
	SentinelMocks    string `json:"sentinel_mocks" enum:"none,read"`
	CreateWorkspaces bool   `json:"create_workspaces"`
	Locking          bool   `json:"locking"`
	MoveWorkspaces   bool   `json:"move_workspaces"`
	DeleteWorkspaces bool   `json:"delete_workspaces"`
	RunTasks         bool   `json:"run_tasks"`
}

// ProjectTeamAccessView is a team's access to a project and its
// workspaces.
type ProjectTeamAccessView struct {
	ID              string                     `json:"id" doc:"Grant ID (tprj_…)."`
	Object          string                     `json:"object" enum:"project_team_access"`
	TeamID          string                     `json:"team_id"`
	TeamName        string                     `json:"team_name"`
	ProjectID       string                     `json:"project_id"`
	Access          string                     `json:"access" enum:"read,write,maintain,admin,custom"`
	ProjectAccess   ProjectSettingsAccessView  `json:"project_access"`
	WorkspaceAccess ProjectWorkspaceAccessView `json:"workspace_access"`
	CreatedAt       time.Time                  `json:"created_at"`
	UpdatedAt       time.Time                  `json:"updated_at"`
}

func projectTeamAccessView(g team.ProjectGrant, teamName string) ProjectTeamAccessView {
	return ProjectTeamAccessView{ID: g.ID, Object: "project_team_access", TeamID: g.TeamID, TeamName: teamName,
		ProjectID: g.ProjectID, Access: g.Access,
		ProjectAccess: ProjectSettingsAccessView{Settings: g.Settings, Teams: g.Teams, VariableSets: g.VariableSets},
		WorkspaceAccess: ProjectWorkspaceAccessView{Runs: g.Runs, Variables: g.Variables, StateVersions: g.StateVersions,
			SentinelMocks: g.SentinelMocks, CreateWorkspaces: g.Create, Locking: g.Locking, MoveWorkspaces: g.Move,
			DeleteWorkspaces: g.Delete, RunTasks: g.RunTasks},
		CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt}
}

// WorkspaceAccessAttributes are HCP's custom workspace attributes: settable
// only with access custom (a fixed level implies them).
type WorkspaceAccessAttributes struct {
	Runs             *string `json:"runs,omitempty" enum:"read,plan,apply"`
	Variables        *string `json:"variables,omitempty" enum:"none,read,write"`
	StateVersions    *string `json:"state_versions,omitempty" enum:"none,read-outputs,read,write"`
	WorkspaceLocking *bool   `json:"workspace_locking,omitempty"`
	RunTasks         *bool   `json:"run_tasks,omitempty"`
	SentinelMocks    *string `json:"sentinel_mocks,omitempty" enum:"none,read"`
}

func (r WorkspaceAccessAttributes) input(level string) team.WorkspaceAccessInput {
	return team.WorkspaceAccessInput{Access: level, Runs: r.Runs, Variables: r.Variables, StateVersions: r.StateVersions,
		SentinelMocks: r.SentinelMocks, WorkspaceLocking: r.WorkspaceLocking, RunTasks: r.RunTasks}
}

// GrantWorkspaceTeamAccessRequest is the body of POST
// /v1/workspaces/{id}/team-access.
type GrantWorkspaceTeamAccessRequest struct {
	TeamID string `json:"team_id" minLength:"1" maxLength:"64"`
	Access string `json:"access" enum:"read,plan,write,admin,custom"`
	WorkspaceAccessAttributes
}

type grantWorkspaceTeamAccessInput struct {
	IdempotencyHeader
	IDPath
	Body GrantWorkspaceTeamAccessRequest
}

// UpdateWorkspaceTeamAccessRequest is the body of PATCH
// /v1/workspace-team-access/{id}.
type UpdateWorkspaceTeamAccessRequest struct {
	Access string `json:"access,omitempty" enum:"read,plan,write,admin,custom" doc:"Omitted: unchanged."`
	WorkspaceAccessAttributes
}

type updateWorkspaceTeamAccessInput struct {
	IdempotencyHeader
	IDPath
	Body UpdateWorkspaceTeamAccessRequest
}

type revokeTeamAccessInput struct {
	IdempotencyHeader
	IDPath
}

// ProjectSettingsAccessRequest sets a custom project grant's access to the
// project itself.
type ProjectSettingsAccessRequest struct {
	Settings     *string `json:"settings,omitempty" enum:"read,update,delete"`
	Teams        *string `json:"teams,omitempty" enum:"none,read,manage"`
	VariableSets *string `json:"variable_sets,omitempty" enum:"none,read,write"`
}

// ProjectWorkspaceAccessRequest sets a custom project grant's access in
// the project's workspaces.
type ProjectWorkspaceAccessRequest struct {
	Runs             *string `json:"runs,omitempty" enum:"read,plan,apply"`
	Variables        *string `json:"variables,omitempty" enum:"none,read,write"`
	StateVersions    *string `json:"state_versions,omitempty" enum:"none,read-outputs,read,write"`
	SentinelMocks    *string `json:"sentinel_mocks,omitempty" enum:"none,read"`
	CreateWorkspaces *bool   `json:"create_workspaces,omitempty"`
	Locking          *bool   `json:"locking,omitempty"`
	MoveWorkspaces   *bool   `json:"move_workspaces,omitempty"`
	DeleteWorkspaces *bool   `json:"delete_workspaces,omitempty"`
	RunTasks         *bool   `json:"run_tasks,omitempty"`
}

// ProjectAccessAttributes are a project grant's custom attributes.
type ProjectAccessAttributes struct {
	ProjectAccess   *ProjectSettingsAccessRequest  `json:"project_access,omitempty" doc:"Only with access custom."`
	WorkspaceAccess *ProjectWorkspaceAccessRequest `json:"workspace_access,omitempty" doc:"Only with access custom."`
}

func (r ProjectAccessAttributes) input(level string) team.ProjectAccessInput {
	in := team.ProjectAccessInput{Access: level}
	if pa := r.ProjectAccess; pa != nil {
		in.Settings, in.Teams, in.VariableSets = pa.Settings, pa.Teams, pa.VariableSets
	}
	if wa := r.WorkspaceAccess; wa != nil {
		in.Runs, in.Variables, in.StateVersions, in.SentinelMocks = wa.Runs, wa.Variables, wa.StateVersions, wa.SentinelMocks
		in.Create, in.Locking, in.Move, in.Delete, in.RunTasks = wa.CreateWorkspaces, wa.Locking, wa.MoveWorkspaces,
			wa.DeleteWorkspaces, wa.RunTasks
	}
	return in
}

// GrantProjectTeamAccessRequest is the body of POST
// /v1/projects/{id}/team-access.
type GrantProjectTeamAccessRequest struct {
	TeamID string `json:"team_id" minLength:"1" maxLength:"64"`
	Access string `json:"access" enum:"read,write,maintain,admin,custom"`
	ProjectAccessAttributes
}

type grantProjectTeamAccessInput struct {
	IdempotencyHeader
	IDPath
	Body GrantProjectTeamAccessRequest
}

// UpdateProjectTeamAccessRequest is the body of PATCH
// /v1/project-team-access/{id}.
type UpdateProjectTeamAccessRequest struct {
	Access string `json:"access,omitempty" enum:"read,write,maintain,admin,custom" doc:"Omitted: unchanged."`
	ProjectAccessAttributes
}

type updateProjectTeamAccessInput struct {
	IdempotencyHeader
	IDPath
	Body UpdateProjectTeamAccessRequest
}

// teamNames names the teams the principal may see, for rendering grants
// (lists hold only grants of those teams).
func (a *API) teamNames(ctx context.Context, p access.Principal) (map[string]string, error) {
	teams, err := a.deps.Services.Teams.List(ctx, p, team.ListFilter{})
	names := make(map[string]string, len(teams))
	for _, t := range teams {
		names[t.ID] = t.Name
	}
	return names, err
}

// workspaceGrantIn renders a workspace grant just changed in tx with its
// team's name.
func workspaceGrantIn(ctx context.Context, tx *sqlx.Tx, p access.Principal, g team.WorkspaceGrant, err error) (WorkspaceTeamAccessView, error) {
	if err != nil {
		return WorkspaceTeamAccessView{}, err
	}
	t, err := team.TeamIn(ctx, tx, p.OrganizationID, g.TeamID)
	return workspaceTeamAccessView(g, t.Name), err
}

// projectGrantIn renders a project grant just changed in tx with its
// team's name.
func projectGrantIn(ctx context.Context, tx *sqlx.Tx, p access.Principal, g team.ProjectGrant, err error) (ProjectTeamAccessView, error) {
	if err != nil {
		return ProjectTeamAccessView{}, err
	}
	t, err := team.TeamIn(ctx, tx, p.OrganizationID, g.TeamID)
	return projectTeamAccessView(g, t.Name), err
}

func (a *API) registerTeamAccess() {
	tags := []string{"Team access"}
	register(a, huma.Operation{
		OperationID: "list-workspace-team-access", Method: http.MethodGet, Path: "/v1/workspaces/{id}/team-access",
		Summary: "List the teams' access to a workspace", Tags: tags,
		Description: "Grants of the teams you may see, oldest first.",
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Listed[WorkspaceTeamAccessView], error) {
		return whole(ctx, a, func(p access.Principal) ([]WorkspaceTeamAccessView, error) {
			grants, err := a.deps.Services.Teams.WorkspaceGrants(ctx, p, in.ID)
			if err != nil {
				return nil, err
			}
			names, err := a.teamNames(ctx, p)
			return mapSlice(grants, func(g team.WorkspaceGrant) WorkspaceTeamAccessView {
				return workspaceTeamAccessView(g, names[g.TeamID])
			}), err
		})
	})

	register(a, huma.Operation{
		OperationID: "grant-workspace-team-access", Method: http.MethodPost, Path: "/v1/workspaces/{id}/team-access",
		Summary: "Give a team access to a workspace", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Needs team:manage and workspace:admin in the workspace. The attributes are settable only with access custom.",
	}, operationOptions{mutation: true, admit: admitWorkspace}, func(ctx context.Context, in *grantWorkspaceTeamAccessInput) (*Mutated[WorkspaceTeamAccessView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (WorkspaceTeamAccessView, error) {
				g, err := a.deps.Services.Teams.GrantWorkspace(ctx, tx, p, in.Body.TeamID, in.ID, in.Body.input(in.Body.Access))
				return workspaceGrantIn(ctx, tx, p, g, err)
			})
	})

	register(a, huma.Operation{
		OperationID: "update-workspace-team-access", Method: http.MethodPatch, Path: "/v1/workspace-team-access/{id}",
		Summary: "Change a team's access to a workspace", Tags: tags,
		Description: "Needs team:manage and workspace:admin in the workspace.",
	}, operationOptions{mutation: true, admit: admitWorkspaceGrant}, func(ctx context.Context, in *updateWorkspaceTeamAccessInput) (*Mutated[WorkspaceTeamAccessView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (WorkspaceTeamAccessView, error) {
				g, err := a.deps.Services.Teams.UpdateWorkspaceGrant(ctx, tx, p, in.ID, in.Body.input(in.Body.Access))
				return workspaceGrantIn(ctx, tx, p, g, err)
			})
	})

	// Revoking only narrows access: never held back by launch control.
	register(a, huma.Operation{
		OperationID: "revoke-workspace-team-access", Method: http.MethodDelete, Path: "/v1/workspace-team-access/{id}",
		Summary: "Revoke a team's access to a workspace", Tags: tags,
		Description: "Needs team:manage and workspace:admin in the workspace.",
	}, operationOptions{mutation: true, admit: notAdmitted}, func(ctx context.Context, in *revokeTeamAccessInput) (*Mutated[WorkspaceTeamAccessView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (WorkspaceTeamAccessView, error) {
				g, err := a.deps.Services.Teams.RevokeWorkspaceGrant(ctx, tx, p, in.ID)
				return workspaceGrantIn(ctx, tx, p, g, err)
			})
	})

	register(a, huma.Operation{
		OperationID: "list-project-team-access", Method: http.MethodGet, Path: "/v1/projects/{id}/team-access",
		Summary: "List the teams' access to a project", Tags: tags,
		Description: "Grants of the teams you may see, oldest first. A project grant reaches every workspace of the project.",
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Listed[ProjectTeamAccessView], error) {
		return whole(ctx, a, func(p access.Principal) ([]ProjectTeamAccessView, error) {
			grants, err := a.deps.Services.Teams.ProjectGrants(ctx, p, in.ID)
			if err != nil {
				return nil, err
			}
			names, err := a.teamNames(ctx, p)
			return mapSlice(grants, func(g team.ProjectGrant) ProjectTeamAccessView {
				return projectTeamAccessView(g, names[g.TeamID])
			}), err
		})
	})

	// A project grant reaches every workspace of the project, so launch
	// control judges it organization-wide.
	register(a, huma.Operation{
		OperationID: "grant-project-team-access", Method: http.MethodPost, Path: "/v1/projects/{id}/team-access",
		Summary: "Give a team access to a project and its workspaces", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Needs team:manage and workspace:admin on the project. The attributes are settable only with access custom.",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *grantProjectTeamAccessInput) (*Mutated[ProjectTeamAccessView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (ProjectTeamAccessView, error) {
				g, err := a.deps.Services.Teams.GrantProject(ctx, tx, p, in.Body.TeamID, in.ID, in.Body.input(in.Body.Access))
				return projectGrantIn(ctx, tx, p, g, err)
			})
	})

	register(a, huma.Operation{
		OperationID: "update-project-team-access", Method: http.MethodPatch, Path: "/v1/project-team-access/{id}",
		Summary: "Change a team's access to a project", Tags: tags,
		Description: "Needs team:manage and workspace:admin on the project.",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *updateProjectTeamAccessInput) (*Mutated[ProjectTeamAccessView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (ProjectTeamAccessView, error) {
				g, err := a.deps.Services.Teams.UpdateProjectGrant(ctx, tx, p, in.ID, in.Body.input(in.Body.Access))
				return projectGrantIn(ctx, tx, p, g, err)
			})
	})

	register(a, huma.Operation{
		OperationID: "revoke-project-team-access", Method: http.MethodDelete, Path: "/v1/project-team-access/{id}",
		Summary: "Revoke a team's access to a project", Tags: tags,
		Description: "Needs team:manage and workspace:admin on the project.",
	}, operationOptions{mutation: true, admit: notAdmitted}, func(ctx context.Context, in *revokeTeamAccessInput) (*Mutated[ProjectTeamAccessView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (ProjectTeamAccessView, error) {
				g, err := a.deps.Services.Teams.RevokeProjectGrant(ctx, tx, p, in.ID)
				return projectGrantIn(ctx, tx, p, g, err)
			})
	})
}
