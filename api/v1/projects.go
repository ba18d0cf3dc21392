package v1

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/cursor"
)

// CreateProjectRequest is the body of POST /v1/projects.
type CreateProjectRequest struct {
	Name string `json:"name" minLength:"1" maxLength:"200" doc:"Display name, unique in the organization."`
}

type createProjectInput struct {
	IdempotencyHeader
	Body CreateProjectRequest
}

type IDPath struct {
	ID string `path:"id" maxLength:"64"`
}

var projectList = listSpec{endpoint: "projects", invalidCode: "PROJECT_LIST_CURSOR_INVALID"}

func (a *API) registerProjects() {
	register(a, huma.Operation{
		OperationID: "create-project", Method: http.MethodPost, Path: "/v1/projects",
		Summary: "Create a project", Tags: []string{"Projects"}, DefaultStatus: http.StatusCreated,
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *createProjectInput) (*Mutated[ProjectView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (ProjectView, error) {
				proj, err := a.deps.Services.Workspaces.CreateProject(ctx, tx, p, in.Body.Name)
				return projectView(proj), err
			})
	})

	register(a, huma.Operation{
		OperationID: "list-projects", Method: http.MethodGet, Path: "/v1/projects",
		Summary: "List projects, newest first", Tags: []string{"Projects"},
	}, operationOptions{}, func(ctx context.Context, in *ListParams) (*Listed[ProjectView], error) {
		return listOf(ctx, a, projectList, "", *in, func(p access.Principal, page cursor.Page) ([]ProjectView, error) {
			rows, err := a.deps.Services.Workspaces.ListProjects(ctx, p, page)
			return mapSlice(rows, projectView), err
		}, func(v ProjectView) cursor.Position { return cursor.Position{CreatedAt: v.CreatedAt, ID: v.ID} })
	})

	register(a, huma.Operation{
		OperationID: "get-project", Method: http.MethodGet, Path: "/v1/projects/{id}",
		Summary: "Read a project", Tags: []string{"Projects"},
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[ProjectView], error) {
		return single(ctx, a, func(p access.Principal) (ProjectView, error) {
			proj, err := a.deps.Services.Workspaces.GetProject(ctx, p, in.ID)
			return projectView(proj), err
		})
	})
}
