package v1

import (
	"context"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/state"
)

// StateVersionCreatorView names who wrote a state version.
type StateVersionCreatorView struct {
	Kind string `json:"kind" enum:"user,service_account,operator,run,team"`
	ID   string `json:"id"`
}

// StateVersionView is one finalized state version's metadata; the state
// itself is never part of /v1.
type StateVersionView struct {
	ID          string                  `json:"id" doc:"State version ID (sv_…)."`
	Object      string                  `json:"object" enum:"state_version"`
	WorkspaceID string                  `json:"workspace_id"`
	Number      int                     `json:"number" doc:"Version number within the workspace, from 1."`
	Serial      int64                   `json:"serial"`
	Lineage     string                  `json:"lineage"`
	MD5         string                  `json:"md5"`
	SHA256      string                  `json:"sha256"`
	SizeBytes   int64                   `json:"size_bytes"`
	ToolVersion string                  `json:"tool_version" doc:"OpenTofu version that wrote the state, as the state records it."`
	CreatedBy   StateVersionCreatorView `json:"created_by"`
	RunID       *string                 `json:"run_id" doc:"The run that wrote it, if any."`
	CreatedAt   time.Time               `json:"created_at"`
	FinalizedAt time.Time               `json:"finalized_at"`
}

func stateVersionView(v state.Version) StateVersionView {
	out := StateVersionView{
		ID: v.ID, Object: "state_version", WorkspaceID: v.WorkspaceID, Serial: v.Serial, Lineage: v.Lineage,
		MD5: v.MD5, ToolVersion: v.ToolVersion, CreatedBy: StateVersionCreatorView{Kind: v.CreatedByKind, ID: v.CreatedByID},
		RunID: v.RunID, CreatedAt: v.CreatedAt,
	}
	if v.Number != nil {
		out.Number = *v.Number
	}
	if v.Size != nil {
		out.SizeBytes = *v.Size
	}
	if v.FinalizedAt != nil {
		out.FinalizedAt = *v.FinalizedAt
	}
	out.SHA256 = hex.EncodeToString(v.SHA256)
	return out
}

type workspaceStateInput struct {
	IDPath
	ListParams
}

var stateVersionList = listSpec{endpoint: "state-versions", invalidCode: "STATE_VERSION_LIST_CURSOR_INVALID"}

func (a *API) registerState() {
	register(a, huma.Operation{
		OperationID: "list-workspace-state-versions", Method: http.MethodGet, Path: "/v1/workspaces/{id}/state-versions",
		Summary: "A workspace's state history, newest first", Tags: []string{"State"},
	}, operationOptions{}, func(ctx context.Context, in *workspaceStateInput) (*Listed[StateVersionView], error) {
		return listOf(ctx, a, stateVersionList, "workspace="+in.ID, in.ListParams, func(p access.Principal, page cursor.Page) ([]StateVersionView, error) {
			rows, err := a.deps.Services.State.History(ctx, p, in.ID, page)
			return mapSlice(rows, stateVersionView), err
		}, func(v StateVersionView) cursor.Position { return cursor.Position{CreatedAt: v.CreatedAt, ID: v.ID} })
	})
	register(a, huma.Operation{
		OperationID: "get-state-version", Method: http.MethodGet, Path: "/v1/state-versions/{id}",
		Summary: "One state version's metadata", Tags: []string{"State"},
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[StateVersionView], error) {
		return single(ctx, a, func(p access.Principal) (StateVersionView, error) {
			v, err := a.deps.Services.State.Get(ctx, p, in.ID)
			if err == nil && !v.Finalized() {
				// A pending version has no verified bytes yet: not a version.
				return StateVersionView{}, fault.ErrNotFound
			}
			return stateVersionView(v), err
		})
	})
}
