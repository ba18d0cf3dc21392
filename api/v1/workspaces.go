package v1

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/workspace"
)

// ExecutionSettingsRequest are exact execution settings.
type ExecutionSettingsRequest struct {
	ToolVersion string `json:"tool_version" doc:"Exact offered tool version: an OpenTofu version of CAIRN_TOOL_VERSIONS (e.g. 1.10.6), or terraform-<version> for a Terraform version of CAIRN_TERRAFORM_VERSIONS (e.g. terraform-1.5.7)."`
	Region      string `json:"region" enum:"us,eu"`
	Platform    string `json:"platform" enum:"linux_amd64,linux_arm64"`
}

func (s ExecutionSettingsRequest) settings() workspace.ExecutionSettings {
	return workspace.ExecutionSettings{ToolVersion: s.ToolVersion, Region: s.Region, Platform: s.Platform}
}

// CreateWorkspaceRequest is the body of POST /v1/workspaces.
type CreateWorkspaceRequest struct {
	ProjectID         string                   `json:"project_id" maxLength:"64"`
	Name              string                   `json:"name" minLength:"1" maxLength:"200"`
	ExecutionSettings ExecutionSettingsRequest `json:"execution_settings"`
	ExecutionMode     string                   `json:"execution_mode,omitempty" enum:"local,remote" doc:"Omitted: the organization's default_execution_mode."`
}

type createWorkspaceInput struct {
	IdempotencyHeader
	Body CreateWorkspaceRequest
}

// UpdateWorkspaceRequest is the body of PATCH /v1/workspaces/{id}.
type UpdateWorkspaceRequest struct {
	ExecutionSettings ExecutionSettingsRequest `json:"execution_settings" doc:"The complete execution settings; a change records a new settings version."`
	Name              *string                  `json:"name,omitempty" minLength:"1" maxLength:"200" doc:"New display name; slug and cloud_name never change."`
	ExecutionMode     *string                  `json:"execution_mode,omitempty" enum:"local,remote" doc:"Omitted: unchanged."`
}

type updateWorkspaceInput struct {
	IdempotencyHeader
	IDPath
	Body UpdateWorkspaceRequest
}

type listWorkspacesInput struct {
	ListParams
	ProjectID string `query:"project_id" maxLength:"64" doc:"Only workspaces of this project."`
}

// workspaceViews presents workspaces with their current runs, read through
// q in one query; a workspace whose runs p may not read shows none.
func (a *API) workspaceViews(ctx context.Context, q sqlx.QueryerContext, p access.Principal, ws ...workspace.Workspace) ([]WorkspaceView, error) {
	// A principal sees a workspace's current run only where it may read
	// runs. Lists read current runs with the page; a single workspace's is
	// read here.
	readsRuns := make(map[string]bool, len(ws))
	ids := make([]string, 0, len(ws))
	for _, w := range ws {
		readsRuns[w.ID] = p.PermissionsIn(w.ID, w.ProjectID).Has(access.PermRunRead)
		if readsRuns[w.ID] && !w.CurrentRunRead {
			ids = append(ids, w.ID)
		}
	}
	current, err := a.deps.Services.Runs.CurrentRuns(ctx, q, p.OrganizationID, ids)
	if err != nil {
		return nil, err
	}
	return mapSlice(ws, func(w workspace.Workspace) WorkspaceView {
		v := workspaceView(w)
		switch {
		case !readsRuns[w.ID]:
		case w.CurrentRunRead:
			if w.CurrentRun != nil {
				v.CurrentRun = &WorkspaceRunView{ID: w.CurrentRun.ID, Status: w.CurrentRun.Status}
			}
		default:
			if r, ok := current[w.ID]; ok {
				v.CurrentRun = &WorkspaceRunView{ID: r.ID, Status: string(r.Status)}
			}
		}
		return v
	}), nil
}

var workspaceList = listSpec{endpoint: "workspaces", invalidCode: "WORKSPACE_LIST_CURSOR_INVALID"}

func (a *API) registerWorkspaces() {
	register(a, huma.Operation{
		OperationID: "create-workspace", Method: http.MethodPost, Path: "/v1/workspaces",
		Summary: "Create a workspace", Tags: []string{"Workspaces"}, DefaultStatus: http.StatusCreated,
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *createWorkspaceInput) (*Mutated[WorkspaceView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (WorkspaceView, error) {
				w, err := a.deps.Services.Workspaces.CreateWorkspace(ctx, tx, p, workspace.CreateWorkspaceInput{
					ProjectID: in.Body.ProjectID, Name: in.Body.Name, Settings: in.Body.ExecutionSettings.settings(),
					ExecutionMode: in.Body.ExecutionMode,
				})
				return workspaceView(w), err
			})
	})

	register(a, huma.Operation{
		OperationID: "list-workspaces", Method: http.MethodGet, Path: "/v1/workspaces",
		Summary: "List workspaces, newest first", Tags: []string{"Workspaces"},
	}, operationOptions{}, func(ctx context.Context, in *listWorkspacesInput) (*Listed[WorkspaceView], error) {
		return listOf(ctx, a, workspaceList, "project_id="+in.ProjectID, in.ListParams, func(p access.Principal, page cursor.Page) ([]WorkspaceView, error) {
			rows, err := a.deps.Services.Workspaces.ListWorkspaces(ctx, p, in.ProjectID, page)
			if err != nil {
				return nil, err
			}
			return a.workspaceViews(ctx, a.deps.DB, p, rows...)
		}, func(v WorkspaceView) cursor.Position { return cursor.Position{CreatedAt: v.CreatedAt, ID: v.ID} })
	})

	register(a, huma.Operation{
		OperationID: "get-workspace", Method: http.MethodGet, Path: "/v1/workspaces/{id}",
		Summary: "Read a workspace", Tags: []string{"Workspaces"},
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[WorkspaceView], error) {
		return single(ctx, a, func(p access.Principal) (WorkspaceView, error) {
			w, err := a.deps.Services.Workspaces.GetWorkspace(ctx, p, in.ID)
			if err != nil {
				return WorkspaceView{}, err
			}
			views, err := a.workspaceViews(ctx, a.deps.DB, p, w)
			if err != nil {
				return WorkspaceView{}, err
			}
			return views[0], nil
		})
	})

	register(a, huma.Operation{
		OperationID: "update-workspace", Method: http.MethodPatch, Path: "/v1/workspaces/{id}",
		Summary: "Replace execution settings and optionally rename", Tags: []string{"Workspaces"},
	}, operationOptions{mutation: true, admit: admitWorkspace}, func(ctx context.Context, in *updateWorkspaceInput) (*Mutated[WorkspaceView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (WorkspaceView, error) {
				w, err := a.deps.Services.Workspaces.UpdateWorkspace(ctx, tx, p, in.ID, workspace.UpdateWorkspaceInput{
					Settings: in.Body.ExecutionSettings.settings(), Name: in.Body.Name, ExecutionMode: in.Body.ExecutionMode,
				})
				if err != nil {
					return WorkspaceView{}, err
				}
				views, err := a.workspaceViews(ctx, tx, p, w)
				if err != nil {
					return WorkspaceView{}, err
				}
				return views[0], nil
			})
	})
}
