package v1

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/state"
)

// StateOutputView is one root-module output of a state version. A sensitive
// output's value is never returned.
type StateOutputView struct {
	ID        string          `json:"id"`
	Object    string          `json:"object" enum:"state_output"`
	Name      string          `json:"name"`
	Sensitive bool            `json:"sensitive"`
	Type      json.RawMessage `json:"type" doc:"The output's type as the state records it (JSON type constraint)."`
	Value     json.RawMessage `json:"value" doc:"The value as JSON; null when the output is sensitive."`
}

func stateOutputView(o state.Output) StateOutputView {
	v := StateOutputView{ID: o.ID, Object: "state_output", Name: o.Name, Sensitive: o.Sensitive,
		Type: json.RawMessage(o.TypeJSON), Value: json.RawMessage("null")}
	if !json.Valid(v.Type) {
		v.Type = json.RawMessage("null")
	}
	if !o.Sensitive && o.ValueJSON != nil && json.Valid([]byte(*o.ValueJSON)) {
		v.Value = json.RawMessage(*o.ValueJSON)
	}
	return v
}

func (a *API) registerStateOutputs() {
	register(a, huma.Operation{
		OperationID: "list-state-version-outputs", Method: http.MethodGet, Path: "/v1/state-versions/{id}/outputs",
		Summary: "A state version's outputs (sensitive values omitted)", Tags: []string{"State"},
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Listed[StateOutputView], error) {
		return whole(ctx, a, func(p access.Principal) ([]StateOutputView, error) {
			// Outputs need only state:read_outputs (a team's read-outputs
			// access), never state:read.
			v, outputs, err := a.deps.Services.State.VersionOutputs(ctx, p, in.ID)
			if err != nil {
				return nil, err
			}
			if !v.Finalized() {
				return nil, fault.ErrNotFound
			}
			return mapSlice(outputs, stateOutputView), nil
		})
	})
}
