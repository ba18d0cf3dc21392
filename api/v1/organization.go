package v1

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/identity"
)

// OrganizationView is the caller's active organization and its settings.
type OrganizationView struct {
	ID                   string    `json:"id"`
	Object               string    `json:"object" enum:"organization"`
	Name                 string    `json:"name"`
	Slug                 string    `json:"slug" doc:"Also the organization name of the remote-backend API."`
	DefaultExecutionMode string    `json:"default_execution_mode" enum:"local,remote" doc:"Execution mode of a workspace created without one (by the CLI or /v1)."`
	CreatedAt            time.Time `json:"created_at"`
}

func organizationView(o identity.Organization) OrganizationView {
	return OrganizationView{ID: o.ID, Object: "organization", Name: o.Name, Slug: o.Slug,
		DefaultExecutionMode: o.DefaultExecutionMode, CreatedAt: o.CreatedAt}
}

// UpdateOrganizationRequest is the body of PATCH /v1/organization.
type UpdateOrganizationRequest struct {
	DefaultExecutionMode string `json:"default_execution_mode" enum:"local,remote" doc:"Existing workspaces keep their mode."`
}

type updateOrganizationInput struct {
	IdempotencyHeader
	Body UpdateOrganizationRequest
}

func (a *API) registerOrganization() {
	tags := []string{"Organization"}
	register(a, huma.Operation{
		OperationID: "get-organization", Method: http.MethodGet, Path: "/v1/organization",
		Summary: "Read the active organization and its settings", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, _ *struct{}) (*Single[OrganizationView], error) {
		return single(ctx, a, func(p access.Principal) (OrganizationView, error) {
			o, err := a.deps.Services.Identity.Organization(ctx, p)
			return organizationView(o), err
		})
	})

	register(a, huma.Operation{
		OperationID: "update-organization", Method: http.MethodPatch, Path: "/v1/organization",
		Summary: "Change the active organization's settings", Tags: tags,
		Description: "Needs member:manage (organization admins and owners).",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *updateOrganizationInput) (*Mutated[OrganizationView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (OrganizationView, error) {
				o, err := a.deps.Services.Identity.SetDefaultExecutionMode(ctx, tx, p, in.Body.DefaultExecutionMode)
				return organizationView(o), err
			})
	})
}
