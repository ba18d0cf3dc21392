package v1

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/workspace"
)

// WorkspaceRef names a workspace.
type WorkspaceRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// RemoteStateSharingView is with whom a workspace shares its state.
type RemoteStateSharingView struct {
	Global    bool           `json:"global" doc:"The runs of every workspace of the organization may read this workspace's state."`
	Consumers []WorkspaceRef `json:"consumers" doc:"The workspaces whose runs may read this workspace's state (those the caller reads), by name; kept without effect while global is set."`
}

// PutRemoteStateSharingRequest is the body of PUT
// /v1/workspaces/{id}/remote-state-sharing.
type PutRemoteStateSharingRequest struct {
	Global      bool     `json:"global"`
	ConsumerIDs []string `json:"consumer_ids" maxItems:"500" doc:"The complete list of consumer workspaces; each must be another workspace the caller reads."`
}

type putRemoteStateSharingInput struct {
	IdempotencyHeader
	IDPath
	Body PutRemoteStateSharingRequest
}

func sharingView(s workspace.Sharing) RemoteStateSharingView {
	return RemoteStateSharingView{Global: s.Global, Consumers: mapSlice(s.Consumers, func(w workspace.Workspace) WorkspaceRef {
		return WorkspaceRef{ID: w.ID, Name: w.Name}
	})}
}

func (a *API) registerSharing() {
	tags := []string{"Workspaces"}
	register(a, huma.Operation{
		OperationID: "get-remote-state-sharing", Method: http.MethodGet, Path: "/v1/workspaces/{id}/remote-state-sharing",
		Summary: "Read with whom a workspace shares its state", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[RemoteStateSharingView], error) {
		return single(ctx, a, func(p access.Principal) (RemoteStateSharingView, error) {
			s, err := a.deps.Services.Workspaces.Sharing(ctx, p, in.ID)
			return sharingView(s), err
		})
	})

	register(a, huma.Operation{
		OperationID: "put-remote-state-sharing", Method: http.MethodPut, Path: "/v1/workspaces/{id}/remote-state-sharing",
		Summary: "Replace with whom a workspace shares its state", Tags: tags,
		Description: "Needs workspace:admin. Runs of the listed workspaces (or of every workspace, with global) may read " +
			"this workspace's current state and outputs with terraform_remote_state; people's own access is unchanged. " +
			"A workspace cannot list itself (422); a missing or invisible consumer is 404.",
	}, operationOptions{mutation: true, admit: admitWorkspace}, func(ctx context.Context, in *putRemoteStateSharingInput) (*Mutated[RemoteStateSharingView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (RemoteStateSharingView, error) {
				s, err := a.deps.Services.Workspaces.ReplaceSharing(ctx, tx, p, in.ID, in.Body.Global, in.Body.ConsumerIDs)
				return sharingView(s), err
			})
	})
}
