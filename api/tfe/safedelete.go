package tfe

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// errLockedCannotDelete refuses a safe delete of a locked workspace.
	errLockedCannotDelete = fmt.Errorf("safe delete of a locked workspace: %w", fault.ErrConflict)
	// errNotSafeToDelete refuses a safe delete of a workspace whose
	// current state still holds resources.
	errNotSafeToDelete = fmt.Errorf("safe delete of a workspace managing resources: %w", fault.ErrConflict)
)

// registerSafeDelete adds the delete the tfe provider uses by default: it
// removes a workspace only while nothing holds its lock and its current
// state manages no resources.
func (s *server) registerSafeDelete(r fiber.Router) {
	r.Post("/organizations/:org/workspaces/:name/actions/safe-delete", s.guardStop(s.byWorkspaceName, s.safeDeleteWorkspace))
	r.Post("/workspaces/:id/actions/safe-delete", s.guardStop(s.byWorkspaceID, s.safeDeleteWorkspace))
}

func (s *server) safeDeleteWorkspace(c *fiber.Ctx, p access.Principal, o owner) error {
	ctx := c.UserContext()
	var keys []string
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		// The row lock holds state writers (which lock the workspace
		// first) until the delete commits, so the count cannot go stale.
		w, err := s.Workspaces.WorkspaceForWrite(ctx, tx, p, o.WorkspaceID, access.PermWorkspaceAdmin)
		if err != nil {
			return err
		}
		if w.Locked() {
			return errLockedCannotDelete
		}
		if err := s.managesNoResources(ctx, tx, w.OrganizationID, w.ID); err != nil {
			return err
		}
		_, keys, err = s.Workspaces.DeleteWorkspace(ctx, tx, p, w.ID)
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	s.State.DeleteObjects(ctx, keys)
	return c.SendStatus(http.StatusNoContent)
}

// managesNoResources is errNotSafeToDelete when the workspace's current
// state counts resources.
func (s *server) managesNoResources(ctx context.Context, tx *sqlx.Tx, organizationID, workspaceID string) error {
	cur, err := s.State.CurrentIn(ctx, tx, organizationID, workspaceID)
	if err != nil {
		return err
	}
	if cur != nil && cur.ResourceCount > 0 {
		return errNotSafeToDelete
	}
	return nil
}
