package trigger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/platform/fault"
)

const triggerSelect = `SELECT t.id, t.organization_id, t.workspace_id, d.name AS workspace_name,
	d.cloud_name AS workspace_cloud_name, d.project_id AS workspace_project_id, t.source_workspace_id,
	s.name AS source_name, s.cloud_name AS source_cloud_name, s.project_id AS source_project_id,
	t.created_by_kind, t.created_by_id, t.created_at
	FROM run_triggers t JOIN workspaces d ON d.id = t.workspace_id JOIN workspaces s ON s.id = t.source_workspace_id`

// lockOrganization serializes trigger changes of one organization until
// the transaction ends, so two concurrent creations cannot each miss the
// other's half of a cycle.
func lockOrganization(ctx context.Context, tx *sqlx.Tx, organizationID string) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cairn/run-triggers/' || $1, 0))`, organizationID)
	if err != nil {
		return fmt.Errorf("locking run triggers: %w", err)
	}
	return nil
}

func insertTrigger(ctx context.Context, q sqlx.ExtContext, t Trigger) error {
	_, err := q.ExecContext(ctx, `INSERT INTO run_triggers (id, organization_id, workspace_id, source_workspace_id,
		created_by_kind, created_by_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		t.ID, t.OrganizationID, t.WorkspaceID, t.SourceWorkspaceID, t.CreatedByKind, t.CreatedByID, t.CreatedAt)
	if err != nil {
		return fmt.Errorf("inserting run trigger: %w", err)
	}
	return nil
}

func deleteTrigger(ctx context.Context, q sqlx.ExtContext, id string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM run_triggers WHERE id = $1`, id); err != nil {
		return fmt.Errorf("deleting run trigger: %w", err)
	}
	return nil
}

// triggerByID reads a trigger of an organization; forUpdate locks it.
func triggerByID(ctx context.Context, q sqlx.QueryerContext, organizationID, id string, forUpdate bool) (Trigger, error) {
	query := triggerSelect + ` WHERE t.organization_id = $1 AND t.id = $2`
	if forUpdate {
		query += ` FOR UPDATE OF t`
	}
	var t Trigger
	err := sqlx.GetContext(ctx, q, &t, query, organizationID, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Trigger{}, fault.ErrNotFound
	}
	if err != nil {
		return Trigger{}, fmt.Errorf("reading run trigger: %w", err)
	}
	return t, nil
}

// inbound reads a destination's triggers, oldest first.
func inbound(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) ([]Trigger, error) {
	return triggersWhere(ctx, q, `t.workspace_id`, organizationID, workspaceID)
}

// outbound reads the triggers naming a workspace as their source, oldest
// first.
func outbound(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) ([]Trigger, error) {
	return triggersWhere(ctx, q, `t.source_workspace_id`, organizationID, workspaceID)
}

// triggersWhere reads the triggers whose column (one of the two ends,
// never input) is the workspace.
func triggersWhere(ctx context.Context, q sqlx.QueryerContext, column, organizationID, workspaceID string) ([]Trigger, error) {
	var out []Trigger
	err := sqlx.SelectContext(ctx, q, &out, triggerSelect+` WHERE t.organization_id = $1 AND `+column+` = $2
		ORDER BY t.created_at, t.id`, organizationID, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("listing run triggers: %w", err)
	}
	return out, nil
}

// edges reads every trigger of an organization as an edge, in a stable
// order.
func edges(ctx context.Context, q sqlx.QueryerContext, organizationID string) ([]Edge, error) {
	var out []Edge
	err := sqlx.SelectContext(ctx, q, &out, `SELECT source_workspace_id, workspace_id FROM run_triggers
		WHERE organization_id = $1 ORDER BY created_at, id`, organizationID)
	if err != nil {
		return nil, fmt.Errorf("reading run trigger edges: %w", err)
	}
	return out, nil
}

// workspaceNames names workspaces of an organization by ID.
func workspaceNames(ctx context.Context, q sqlx.QueryerContext, organizationID string, ids []string) (map[string]named, error) {
	var rows []named
	err := sqlx.SelectContext(ctx, q, &rows, `SELECT id, name, project_id FROM workspaces
		WHERE organization_id = $1 AND id = ANY($2::text[])`, organizationID, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("naming workspaces: %w", err)
	}
	out := make(map[string]named, len(rows))
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, nil
}

type named struct {
	ID        string `db:"id"`
	Name      string `db:"name"`
	ProjectID string `db:"project_id"`
}
