package v1

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/cursor"
)

// UserTokenView is a user API token without its plaintext.
type UserTokenView struct {
	ID             string     `json:"id" doc:"Token ID (ut_…)."`
	Object         string     `json:"object" enum:"user_token"`
	OrganizationID string     `json:"organization_id" doc:"The organization the token acts in; empty for an account-wide token."`
	Scope          string     `json:"scope" enum:"organization,account"`
	Description    string     `json:"description"`
	ExpiresAt      *time.Time `json:"expires_at"`
	CreatedAt      time.Time  `json:"created_at"`
	RevokedAt      *time.Time `json:"revoked_at"`
}

func userTokenView(t identity.UserToken) UserTokenView {
	scope := userTokenScopeOrganization
	if t.OrganizationID == "" {
		scope = userTokenScopeAccount
	}
	return UserTokenView{ID: t.ID, Object: "user_token", OrganizationID: t.OrganizationID, Scope: scope, Description: t.Description,
		ExpiresAt: t.ExpiresAt, CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt}
}

const (
	userTokenScopeOrganization = "organization"
	userTokenScopeAccount      = "account"
)

// IssuedUserTokenView is the create response: the only place the plaintext
// exists.
type IssuedUserTokenView struct {
	UserTokenView
	Token string `json:"token" doc:"The cut_ token for the remote-backend API (tofu login). Shown once."`
}

// CreateUserTokenRequest is the body of POST /v1/user-tokens.
type CreateUserTokenRequest struct {
	Description string     `json:"description,omitempty" maxLength:"200"`
	Scope       string     `json:"scope,omitempty" enum:"organization,account" doc:"organization (default): the token acts in the active organization only. account: it acts in every organization you are a member of, each time with your membership's current role and teams there, as HCP Terraform's user tokens do."`
	ExpiresAt   *time.Time `json:"expires_at,omitempty" doc:"Optional expiry."`
}

type createUserTokenInput struct {
	IdempotencyHeader
	Body CreateUserTokenRequest
}

type revokeUserTokenInput struct {
	IdempotencyHeader
	IDPath
}

var userTokenList = listSpec{endpoint: "user-tokens", invalidCode: "USER_TOKEN_LIST_CURSOR_INVALID"}

func (a *API) registerUserTokens() {
	register(a, huma.Operation{
		OperationID: "list-user-tokens", Method: http.MethodGet, Path: "/v1/user-tokens",
		Summary: "List your own API tokens in the active organization, newest first", Tags: []string{"User tokens"},
	}, operationOptions{}, func(ctx context.Context, in *ListParams) (*Listed[UserTokenView], error) {
		return listOf(ctx, a, userTokenList, "", *in, func(p access.Principal, page cursor.Page) ([]UserTokenView, error) {
			rows, err := a.deps.Services.Identity.ListUserTokens(ctx, p, page)
			return mapSlice(rows, userTokenView), err
		}, func(v UserTokenView) cursor.Position { return cursor.Position{CreatedAt: v.CreatedAt, ID: v.ID} })
	})
	register(a, huma.Operation{
		OperationID: "create-user-token", Method: http.MethodPost, Path: "/v1/user-tokens",
		Summary: "Create an API token for the remote-backend protocol", Tags: []string{"User tokens"},
		DefaultStatus: http.StatusCreated,
	}, operationOptions{mutation: true, admit: notAdmitted}, func(ctx context.Context, in *createUserTokenInput) (*Mutated[IssuedUserTokenView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (IssuedUserTokenView, error) {
				t, plaintext, err := a.deps.Services.Identity.CreateUserToken(ctx, tx, p, in.Body.Description, in.Body.ExpiresAt,
					in.Body.Scope == userTokenScopeAccount)
				return IssuedUserTokenView{UserTokenView: userTokenView(t), Token: plaintext}, err
			})
	})
	register(a, huma.Operation{
		OperationID: "revoke-user-token", Method: http.MethodDelete, Path: "/v1/user-tokens/{id}",
		Summary: "Revoke one of your API tokens at once", Tags: []string{"User tokens"},
	}, operationOptions{mutation: true, admit: notAdmitted}, func(ctx context.Context, in *revokeUserTokenInput) (*Mutated[UserTokenView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (UserTokenView, error) {
				t, err := a.deps.Services.Identity.RevokeUserToken(ctx, tx, p, in.ID)
				return userTokenView(t), err
			})
	})
}
