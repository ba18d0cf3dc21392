package v1

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/trigger"
)

// Run triggers on /v1: a workspace's sources (inbound: applying them makes
// it run) and destinations (outbound: it makes them run). Adding and
// removing a source needs workspace:admin in the destination.

// WorkspaceRefView names a workspace.
type WorkspaceRefView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// RunTriggerView is one run trigger: applying a run of source creates a
// run in workspace.
type RunTriggerView struct {
	ID        string           `json:"id" doc:"Run trigger ID (rt_…)."`
	Workspace WorkspaceRefView `json:"workspace" doc:"The destination: the workspace that gets a run."`
	Source    WorkspaceRefView `json:"source" doc:"The source: the workspace whose applied runs fire the trigger."`
	CreatedAt time.Time        `json:"created_at"`
}

func runTriggerView(t trigger.Trigger) RunTriggerView {
	return RunTriggerView{ID: t.ID, Workspace: WorkspaceRefView{ID: t.WorkspaceID, Name: t.WorkspaceName},
		Source: WorkspaceRefView{ID: t.SourceWorkspaceID, Name: t.SourceName}, CreatedAt: t.CreatedAt}
}

// RunTriggersView is a workspace's triggers both ways, oldest first; the
// other end of each is a workspace the caller can read.
type RunTriggersView struct {
	Inbound  []RunTriggerView `json:"inbound" doc:"Triggers whose destination is this workspace: its sources."`
	Outbound []RunTriggerView `json:"outbound" doc:"Triggers whose source is this workspace: the workspaces it makes run."`
}

// CreateRunTriggerRequest is the body of POST /v1/workspaces/{id}/run-triggers.
type CreateRunTriggerRequest struct {
	SourceWorkspaceID string `json:"source_workspace_id" minLength:"1" maxLength:"64" doc:"The workspace whose applied runs make this one run."`
}

type createRunTriggerInput struct {
	IdempotencyHeader
	IDPath
	Body CreateRunTriggerRequest
}

type deleteRunTriggerInput struct {
	IdempotencyHeader
	IDPath
}

func (a *API) registerRunTriggers() {
	tags := []string{"Run triggers"}
	register(a, huma.Operation{
		OperationID: "list-workspace-run-triggers", Method: http.MethodGet, Path: "/v1/workspaces/{id}/run-triggers",
		Summary: "List a workspace's run triggers", Tags: tags,
		Description: "Its sources (inbound) and the workspaces it makes run (outbound), oldest first.",
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[RunTriggersView], error) {
		return single(ctx, a, func(p access.Principal) (RunTriggersView, error) {
			sources, err := a.deps.Services.Triggers.Inbound(ctx, p, in.ID)
			if err != nil {
				return RunTriggersView{}, err
			}
			destinations, err := a.deps.Services.Triggers.Outbound(ctx, p, in.ID)
			return RunTriggersView{Inbound: mapSlice(sources, runTriggerView), Outbound: mapSlice(destinations, runTriggerView)}, err
		})
	})

	register(a, huma.Operation{
		OperationID: "create-run-trigger", Method: http.MethodPost, Path: "/v1/workspaces/{id}/run-triggers",
		Summary: "Add a run trigger source to a workspace", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Needs workspace:admin in the workspace and run:read in the source. Refused (422) for the workspace " +
			"itself (RUN_TRIGGER_SELF), a source it already has (RUN_TRIGGER_EXISTS), a 21st source (RUN_TRIGGER_LIMIT_REACHED) " +
			"and a source the workspace already makes run, directly or through others (RUN_TRIGGER_CYCLE).",
	}, operationOptions{mutation: true, admit: admitWorkspace}, func(ctx context.Context, in *createRunTriggerInput) (*Mutated[RunTriggerView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (RunTriggerView, error) {
				t, err := a.deps.Services.Triggers.Create(ctx, tx, p, in.ID, in.Body.SourceWorkspaceID)
				return runTriggerView(t), err
			})
	})

	// Removing a trigger only stops runs: never held back by launch control.
	register(a, huma.Operation{
		OperationID: "delete-run-trigger", Method: http.MethodDelete, Path: "/v1/run-triggers/{id}",
		Summary: "Remove a run trigger", Tags: tags,
		Description: "Needs workspace:admin in the trigger's destination workspace.",
	}, operationOptions{mutation: true, admit: notAdmitted}, func(ctx context.Context, in *deleteRunTriggerInput) (*Mutated[RunTriggerView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (RunTriggerView, error) {
				t, err := a.deps.Services.Triggers.Delete(ctx, tx, p, in.ID)
				return runTriggerView(t), err
			})
	})
}
