package v1

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/serviceaccount"
)

// CreateServiceAccountRequest is the body of POST /v1/service-accounts.
type CreateServiceAccountRequest struct {
	Name        string `json:"name" minLength:"1" maxLength:"200"`
	Description string `json:"description,omitempty" maxLength:"2000"`
}

type createServiceAccountInput struct {
	IdempotencyHeader
	Body CreateServiceAccountRequest
}

// IssueTokenRequest is the body of POST /v1/service-accounts/{id}/tokens.
type IssueTokenRequest struct {
	Permissions []string  `json:"permissions" minItems:"1" maxItems:"64" doc:"Explicit subset of the issuer's permissions."`
	ProjectID   string    `json:"project_id,omitempty" maxLength:"64" doc:"Bound the token to one project."`
	WorkspaceID string    `json:"workspace_id,omitempty" maxLength:"64" doc:"Bound the token to one workspace."`
	ExpiresAt   time.Time `json:"expires_at" doc:"At most 365 days ahead."`
}

type issueTokenInput struct {
	IdempotencyHeader
	IDPath
	Body IssueTokenRequest
}

type revokeTokenInput struct {
	IdempotencyHeader
	IDPath
	TokenID string `path:"tokenId" maxLength:"64"`
}

func (a *API) registerServiceAccounts() {
	register(a, huma.Operation{
		OperationID: "create-service-account", Method: http.MethodPost, Path: "/v1/service-accounts",
		Summary: "Create a service account", Tags: []string{"Service accounts"}, DefaultStatus: http.StatusCreated,
	}, operationOptions{mutation: true, admit: notAdmitted}, func(ctx context.Context, in *createServiceAccountInput) (*Mutated[ServiceAccountView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (ServiceAccountView, error) {
				sa, err := a.deps.Services.ServiceAccounts.Create(ctx, tx, p, in.Body.Name, in.Body.Description)
				return serviceAccountView(sa), err
			})
	})

	register(a, huma.Operation{
		OperationID: "issue-service-account-token", Method: http.MethodPost, Path: "/v1/service-accounts/{id}/tokens",
		Summary: "Issue a token (the only response that carries its plaintext)", Tags: []string{"Service accounts"},
		DefaultStatus: http.StatusCreated,
	}, operationOptions{mutation: true, admit: notAdmitted}, func(ctx context.Context, in *issueTokenInput) (*Mutated[IssuedTokenView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (IssuedTokenView, error) {
				issued, err := a.deps.Services.ServiceAccounts.IssueToken(ctx, tx, p, in.ID, serviceaccount.IssueInput{
					Permissions: in.Body.Permissions, ProjectID: in.Body.ProjectID, WorkspaceID: in.Body.WorkspaceID,
					ExpiresAt: in.Body.ExpiresAt,
				})
				return IssuedTokenView{TokenView: tokenView(issued.Token), Token: issued.Plaintext}, err
			})
	})

	register(a, huma.Operation{
		OperationID: "revoke-service-account-token", Method: http.MethodDelete, Path: "/v1/service-accounts/{id}/tokens/{tokenId}",
		Summary: "Revoke a token at once", Tags: []string{"Service accounts"},
	}, operationOptions{mutation: true, admit: notAdmitted}, func(ctx context.Context, in *revokeTokenInput) (*Mutated[TokenView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (TokenView, error) {
				t, err := a.deps.Services.ServiceAccounts.RevokeToken(ctx, tx, p, in.ID, in.TokenID)
				return tokenView(t), err
			})
	})
}
