package tfe

import (
	"context"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/workspace"
)

func (s *server) registerRemoteStateConsumers(r fiber.Router) {
	const path = "/workspaces/:id/relationships/remote-state-consumers"
	r.Get(path, s.guard(s.byWorkspaceID, s.listRemoteStateConsumers))
	r.Post(path, s.guard(s.byWorkspaceID, s.changeRemoteStateConsumers(s.Workspaces.AddRemoteStateConsumers)))
	r.Delete(path, s.guardStop(s.byWorkspaceID, s.changeRemoteStateConsumers(s.Workspaces.RemoveRemoteStateConsumers)))
	r.Patch(path, s.guard(s.byWorkspaceID, s.changeRemoteStateConsumers(s.Workspaces.ReplaceRemoteStateConsumers)))
}

// listRemoteStateConsumers lists, a page at a time, the workspaces whose
// runs may read this workspace's state, as workspace documents (go-tfe
// compares them with the workspaces as they were created).
func (s *server) listRemoteStateConsumers(c *fiber.Ctx, p access.Principal, o owner) error {
	number, size := pageParams(c)
	ctx := c.UserContext()
	rows, total, err := s.Workspaces.ConsumersPage(ctx, p, o.WorkspaceID, number, size)
	if err != nil {
		return s.writeError(c, err)
	}
	data := make([]resource, len(rows))
	for i, w := range rows {
		if data[i], err = s.workspaceResource(ctx, p, owner{OrganizationID: o.OrganizationID, OrganizationSlug: o.OrganizationSlug, WorkspaceID: w.ID}, w); err != nil {
			return s.writeError(c, err)
		}
	}
	return writeDocument(c, http.StatusOK, map[string]any{"data": data, "meta": paginate(number, size, total)})
}

type changeConsumers func(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, consumerIDs []string) error

// changeRemoteStateConsumers decodes {"data":[{"type":"workspaces","id":…}]}
// (at least one) and applies change in one transaction.
func (s *server) changeRemoteStateConsumers(change changeConsumers) handler {
	return func(c *fiber.Ctx, p access.Principal, o owner) error {
		var doc struct {
			Data []ref `json:"data"`
		}
		if err := decodeDocument(c, &doc); err != nil {
			return s.writeError(c, err)
		}
		if len(doc.Data) == 0 {
			return s.writeError(c, errInvalidDocument)
		}
		ids := make([]string, len(doc.Data))
		for i, r := range doc.Data {
			if r.Type != "workspaces" || r.ID == "" {
				return s.writeError(c, errInvalidDocument)
			}
			ids[i] = r.ID
		}
		ctx := c.UserContext()
		err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error { return change(ctx, tx, p, o.WorkspaceID, ids) })
		if err != nil {
			return s.writeError(c, err)
		}
		return c.SendStatus(http.StatusNoContent)
	}
}

// consumerRoutes are the reads a run token may make of another workspace
// that shares its state with the run's own: the workspace itself (the CLI
// looks it up by name), its current state version, that version's body
// and its outputs. Nothing else of another workspace, and nothing written.
var consumerRoutes = map[string]bool{
	"/api/v2/organizations/:org/workspaces/:name":          true,
	"/api/v2/workspaces/:id":                               true,
	"/api/v2/workspaces/:id/current-state-version":         true,
	"/api/v2/workspaces/:id/current-state-version-outputs": true,
	"/api/v2/state-versions/:id":                           true,
	"/api/v2/state-versions/:id/download":                  true,
	"/api/v2/state-versions/:id/outputs":                   true,
	"/api/v2/state-version-outputs/:id":                    true,
}

// consumerPrincipal decides what a run token may do in a workspace other
// than its own, which the request resolved to. The token's principal is
// bounded to its own workspace, so by itself it reads nothing there; when
// the other workspace shares its state with the run's (globally or by
// listing it), a read on one of consumerRoutes is served as a principal
// bounded to that producer instead, holding only the reads a
// terraform_remote_state data source makes: still a run (so the state
// service serves it the current version only), without state:write, the
// lock or anything of runs. Every such read is audited before it is
// served. Anything else, a run that is not trusted (it never holds a
// token, checked again here), or a workspace that does not share, is
// fault.ErrNotFound: the answer of a workspace that does not exist.
//
// Deciding this here, where the request's owner is resolved, keeps the
// rule in one place for every route: the handlers and the state service
// see an ordinary principal and apply their own checks unchanged.
func (s *server) consumerPrincipal(ctx context.Context, c *fiber.Ctx, p access.Principal, o owner) (access.Principal, error) {
	if c.Method() != fiber.MethodGet || !consumerRoutes[c.Route().Path] {
		return access.Principal{}, fault.ErrNotFound
	}
	r, err := s.Runs.RunOwner(ctx, p.ID)
	if err != nil {
		return access.Principal{}, err
	}
	if r.Untrusted() || r.OrganizationID != p.OrganizationID || r.WorkspaceID != p.WorkspaceID {
		return access.Principal{}, fault.ErrNotFound
	}
	shared, err := workspace.SharesStateWith(ctx, s.DB, p.OrganizationID, o.WorkspaceID, p.WorkspaceID)
	if err != nil {
		return access.Principal{}, err
	}
	if !shared {
		return access.Principal{}, fault.ErrNotFound
	}
	var projectID string
	if err := s.DB.GetContext(ctx, &projectID, `SELECT project_id FROM workspaces WHERE id = $1`, o.WorkspaceID); err != nil {
		return access.Principal{}, err
	}
	consumer := access.Principal{
		Kind: access.KindRun, ID: p.ID, Name: p.Name, OrganizationID: p.OrganizationID, Role: access.RoleReader,
		Permissions: access.NewPermissionSet(access.PermOrganizationRead, access.PermWorkspaceRead, access.PermStateRead),
		TokenID:     p.TokenID, ProjectID: projectID, WorkspaceID: o.WorkspaceID,
	}
	err = audit.Record(ctx, s.DB, p, "state.read_by_consumer", "workspace", o.WorkspaceID, map[string]any{
		"run_id": p.ID, "consumer_workspace_id": p.WorkspaceID, "producer_workspace_id": o.WorkspaceID,
		"route": c.Route().Path,
	})
	if err != nil {
		return access.Principal{}, err
	}
	return consumer, nil
}
