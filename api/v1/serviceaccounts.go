package v1

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/cursor"
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

var serviceAccountList = listSpec{endpoint: "service-accounts", invalidCode: "SERVICE_ACCOUNT_LIST_CURSOR_INVALID"}

func (a *API) registerServiceAccounts() {
	register(a, huma.Operation{
		OperationID: "list-service-accounts", Method: http.MethodGet, Path: "/v1/service-accounts",
		Summary: "List service accounts, newest first", Tags: []string{"Service accounts"},
	}, operationOptions{}, func(ctx context.Context, in *ListParams) (*Listed[ServiceAccountView], error) {
		return listOf(ctx, a, serviceAccountList, "", *in, func(p access.Principal, page cursor.Page) ([]ServiceAccountView, error) {
			rows, err := a.deps.Services.ServiceAccounts.List(ctx, p, page)
			return mapSlice(rows, serviceAccountView), err
		}, func(v ServiceAccountView) cursor.Position { return cursor.Position{CreatedAt: v.CreatedAt, ID: v.ID} })
	})

	// Tokens have no list operation (SPEC §2): an account's read carries
	// what its managers need to see and revoke them, never a plaintext.
	register(a, huma.Operation{
		OperationID: "get-service-account", Method: http.MethodGet, Path: "/v1/service-accounts/{id}",
		Summary: "Read a service account with its tokens (never their plaintext)", Tags: []string{"Service accounts"},
		Description: "The tokens issued to the account: the live ones first, then the revoked and expired ones, newest first " +
			"within each, at most 100 (tokens_truncated says when older revoked or expired ones are left out). " +
			"Each shows its ID, permissions, boundaries, expiry and revocation, never its plaintext.",
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[ServiceAccountDetailView], error) {
		return single(ctx, a, func(p access.Principal) (ServiceAccountDetailView, error) {
			acct, err := a.deps.Services.ServiceAccounts.Get(ctx, p, in.ID)
			if err != nil {
				return ServiceAccountDetailView{}, err
			}
			return ServiceAccountDetailView{ServiceAccountView: serviceAccountView(acct.ServiceAccount),
				Tokens: mapSlice(acct.Tokens, tokenView), TokensTruncated: acct.TokensTruncated}, nil
		})
	})

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
