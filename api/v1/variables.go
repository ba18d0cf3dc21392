package v1

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/workspace"
)

// VariableBodyLimit is the envelope limit of variable mutations.
const VariableBodyLimit = 131072

// CreateVariableRequest is the body of POST /v1/workspaces/{id}/variables.
type CreateVariableRequest struct {
	Key         string `json:"key" minLength:"1" maxLength:"128"`
	Value       string `json:"value" maxLength:"65536" doc:"At most 65,536 bytes."`
	Sensitive   bool   `json:"sensitive" doc:"Sealed at rest and never returned by any read."`
	HCL         bool   `json:"hcl,omitempty" doc:"Parse the value as an HCL expression; invalid HCL is rejected."`
	Description string `json:"description,omitempty" maxLength:"2000"`
}

type createVariableInput struct {
	IdempotencyHeader
	IDPath
	Body CreateVariableRequest
}

// ReplaceVariableRequest is the body of PUT /v1/workspace-variables/{id}.
type ReplaceVariableRequest struct {
	Value       *string `json:"value,omitempty" maxLength:"65536" doc:"Omit to keep the stored value, its version and digest; sensitive must then equal the stored flag."`
	Sensitive   bool    `json:"sensitive"`
	HCL         bool    `json:"hcl,omitempty"`
	Description string  `json:"description,omitempty" maxLength:"2000"`
}

type replaceVariableInput struct {
	IdempotencyHeader
	IDPath
	Body ReplaceVariableRequest
}

type deleteVariableInput struct {
	IdempotencyHeader
	IDPath
}

func (a *API) registerVariables() {
	register(a, huma.Operation{
		OperationID: "create-workspace-variable", Method: http.MethodPost, Path: "/v1/workspaces/{id}/variables",
		Summary: "Add a variable to a workspace", Tags: []string{"Variables"}, DefaultStatus: http.StatusCreated,
	}, operationOptions{mutation: true, admit: admitWorkspace, bodyLimit: VariableBodyLimit}, func(ctx context.Context, in *createVariableInput) (*Mutated[VariableView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (VariableView, error) {
				v, err := a.deps.Services.Workspaces.CreateVariable(ctx, tx, p, in.ID, workspace.VariableInput{
					Key: in.Body.Key, Value: &in.Body.Value, Sensitive: in.Body.Sensitive, HCL: in.Body.HCL,
					Description: in.Body.Description,
				})
				return variableView(v), err
			})
	})

	register(a, huma.Operation{
		OperationID: "list-workspace-variables", Method: http.MethodGet, Path: "/v1/workspaces/{id}/variables",
		Summary: "List a workspace's variables", Tags: []string{"Variables"},
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Listed[VariableView], error) {
		return whole(ctx, a, func(p access.Principal) ([]VariableView, error) {
			vars, err := a.deps.Services.Workspaces.ListVariables(ctx, p, in.ID)
			return mapSlice(vars, variableView), err
		})
	})

	register(a, huma.Operation{
		OperationID: "replace-workspace-variable", Method: http.MethodPut, Path: "/v1/workspace-variables/{id}",
		Summary: "Replace a variable", Tags: []string{"Variables"},
	}, operationOptions{mutation: true, admit: admitVariable, bodyLimit: VariableBodyLimit}, func(ctx context.Context, in *replaceVariableInput) (*Mutated[VariableView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (VariableView, error) {
				v, err := a.deps.Services.Workspaces.ReplaceVariable(ctx, tx, p, in.ID, workspace.VariableInput{
					Value: in.Body.Value, Sensitive: in.Body.Sensitive, HCL: in.Body.HCL, Description: in.Body.Description,
				})
				return variableView(v), err
			})
	})

	register(a, huma.Operation{
		OperationID: "delete-workspace-variable", Method: http.MethodDelete, Path: "/v1/workspace-variables/{id}",
		Summary: "Delete a variable", Tags: []string{"Variables"},
	}, operationOptions{mutation: true, admit: admitVariable}, func(ctx context.Context, in *deleteVariableInput) (*Mutated[VariableView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (VariableView, error) {
				v, err := a.deps.Services.Workspaces.DeleteVariable(ctx, tx, p, in.ID)
				return variableView(v), err
			})
	})
}
