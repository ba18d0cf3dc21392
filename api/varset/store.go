package varset

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/workspace"
)

const setColumns = `s.id, s.organization_id, s.name, s.description, s.global, s.priority, s.created_at, s.updated_at,
	(SELECT count(*) FROM variable_set_variables v WHERE v.variable_set_id = s.id) AS variable_count`

func insertSet(ctx context.Context, q sqlx.ExtContext, s Set) error {
	_, err := q.ExecContext(ctx, `INSERT INTO variable_sets (id, organization_id, name, description, global, priority, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, s.ID, s.OrganizationID, s.Name, s.Description, s.Global, s.Priority, s.CreatedAt, s.UpdatedAt)
	if db.IsUniqueViolation(err, "variable_sets_organization_name_key") {
		return ErrNameTaken
	}
	if err != nil {
		return fmt.Errorf("inserting variable set: %w", err)
	}
	return nil
}

func updateSet(ctx context.Context, q sqlx.ExtContext, s Set) error {
	_, err := q.ExecContext(ctx, `UPDATE variable_sets SET name = $3, description = $4, global = $5, priority = $6, updated_at = $7
		WHERE organization_id = $1 AND id = $2`, s.OrganizationID, s.ID, s.Name, s.Description, s.Global, s.Priority, s.UpdatedAt)
	if db.IsUniqueViolation(err, "variable_sets_organization_name_key") {
		return ErrNameTaken
	}
	if err != nil {
		return fmt.Errorf("updating variable set: %w", err)
	}
	return nil
}

// deleteSet removes a set; its scope rows and variables go by cascade.
func deleteSet(ctx context.Context, q sqlx.ExtContext, organizationID, setID string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM variable_sets WHERE organization_id = $1 AND id = $2`, organizationID, setID); err != nil {
		return fmt.Errorf("deleting variable set: %w", err)
	}
	return nil
}

// setByID reads a set of the organization with its scope, locked for
// update when forUpdate (the lock orders concurrent changes of one set).
func setByID(ctx context.Context, q sqlx.QueryerContext, organizationID, setID string, forUpdate bool) (Set, error) {
	if forUpdate {
		var locked string
		err := sqlx.GetContext(ctx, q, &locked, `SELECT id FROM variable_sets WHERE organization_id = $1 AND id = $2 FOR UPDATE`,
			organizationID, setID)
		if errors.Is(err, sql.ErrNoRows) {
			return Set{}, fault.ErrNotFound
		}
		if err != nil {
			return Set{}, fmt.Errorf("locking variable set: %w", err)
		}
	}
	var s Set
	err := sqlx.GetContext(ctx, q, &s, `SELECT `+setColumns+` FROM variable_sets s WHERE s.organization_id = $1 AND s.id = $2`,
		organizationID, setID)
	if errors.Is(err, sql.ErrNoRows) {
		return Set{}, fault.ErrNotFound
	}
	if err != nil {
		return Set{}, fmt.Errorf("reading variable set: %w", err)
	}
	sets := []Set{s}
	if err := loadScopes(ctx, q, sets); err != nil {
		return Set{}, err
	}
	return sets[0], nil
}

// loadScopes fills the project and workspace lists of sets.
func loadScopes(ctx context.Context, q sqlx.QueryerContext, sets []Set) error {
	if len(sets) == 0 {
		return nil
	}
	ids := make([]string, len(sets))
	at := make(map[string]int, len(sets))
	for i, s := range sets {
		ids[i], at[s.ID] = s.ID, i
		sets[i].ProjectIDs, sets[i].WorkspaceIDs = []string{}, []string{}
	}
	var rows []struct {
		SetID string `db:"variable_set_id"`
		Kind  string `db:"kind"`
		ID    string `db:"target_id"`
	}
	err := sqlx.SelectContext(ctx, q, &rows, `
		SELECT variable_set_id, 'project' AS kind, project_id AS target_id FROM variable_set_projects WHERE variable_set_id = ANY($1)
		UNION ALL
		SELECT variable_set_id, 'workspace', workspace_id FROM variable_set_workspaces WHERE variable_set_id = ANY($1)
		ORDER BY 1, 2, 3`, pq.Array(ids))
	if err != nil {
		return fmt.Errorf("reading variable set scope: %w", err)
	}
	for _, r := range rows {
		s := &sets[at[r.SetID]]
		if r.Kind == "project" {
			s.ProjectIDs = append(s.ProjectIDs, r.ID)
		} else {
			s.WorkspaceIDs = append(s.WorkspaceIDs, r.ID)
		}
	}
	return nil
}

// listSets reads up to limit sets whose name contains query (ignoring
// case), in byte order of name, after the name after.
func listSets(ctx context.Context, q sqlx.QueryerContext, organizationID, query, after string, limit int) ([]Set, error) {
	var sets []Set
	err := sqlx.SelectContext(ctx, q, &sets, `SELECT `+setColumns+` FROM variable_sets s
		WHERE s.organization_id = $1 AND ($2 = '' OR strpos(lower(s.name), lower($2)) > 0) AND s.name COLLATE "C" > $3
		ORDER BY s.name COLLATE "C" LIMIT $4`, organizationID, query, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing variable sets: %w", err)
	}
	return sets, loadScopes(ctx, q, sets)
}

// pageSets reads one numbered page of sets in name order and their total.
func pageSets(ctx context.Context, q sqlx.QueryerContext, organizationID, query string, offset, limit int) ([]Set, int, error) {
	var total int
	filter := `s.organization_id = $1 AND ($2 = '' OR strpos(lower(s.name), lower($2)) > 0)`
	if err := sqlx.GetContext(ctx, q, &total, `SELECT count(*) FROM variable_sets s WHERE `+filter, organizationID, query); err != nil {
		return nil, 0, fmt.Errorf("counting variable sets: %w", err)
	}
	var sets []Set
	if err := sqlx.SelectContext(ctx, q, &sets, `SELECT `+setColumns+` FROM variable_sets s WHERE `+filter+`
		ORDER BY s.name COLLATE "C" OFFSET $3 LIMIT $4`, organizationID, query, offset, limit); err != nil {
		return nil, 0, fmt.Errorf("listing variable sets: %w", err)
	}
	return sets, total, loadScopes(ctx, q, sets)
}

// setsApplying reads the sets that apply to a workspace of a project (or,
// with workspaceID empty, to a project itself), in name order.
func setsApplying(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID, projectID string) ([]Set, error) {
	var sets []Set
	err := sqlx.SelectContext(ctx, q, &sets, `SELECT `+setColumns+` FROM variable_sets s
		WHERE s.organization_id = $1 AND (s.global
			OR EXISTS (SELECT 1 FROM variable_set_workspaces w WHERE w.variable_set_id = s.id AND w.workspace_id = $2)
			OR EXISTS (SELECT 1 FROM variable_set_projects p WHERE p.variable_set_id = s.id AND p.project_id = $3))
		ORDER BY s.name COLLATE "C"`, organizationID, workspaceID, projectID)
	if err != nil {
		return nil, fmt.Errorf("listing applicable variable sets: %w", err)
	}
	return sets, loadScopes(ctx, q, sets)
}

// scopeTable is the table and column of one kind of scope row.
type scopeTable struct{ table, column string }

var (
	projectScope   = scopeTable{"variable_set_projects", "project_id"}
	workspaceScope = scopeTable{"variable_set_workspaces", "workspace_id"}
)

func addScope(ctx context.Context, q sqlx.ExtContext, t scopeTable, organizationID, setID string, ids []string) error {
	_, err := q.ExecContext(ctx, `INSERT INTO `+t.table+` (variable_set_id, organization_id, `+t.column+`)
		SELECT $1, $2, unnest($3::text[]) ON CONFLICT DO NOTHING`, setID, organizationID, pq.Array(ids))
	if err != nil {
		return fmt.Errorf("adding to variable set scope: %w", err)
	}
	return nil
}

func removeScope(ctx context.Context, q sqlx.ExtContext, t scopeTable, setID string, ids []string) error {
	_, err := q.ExecContext(ctx, `DELETE FROM `+t.table+` WHERE variable_set_id = $1 AND `+t.column+` = ANY($2)`, setID, pq.Array(ids))
	if err != nil {
		return fmt.Errorf("removing from variable set scope: %w", err)
	}
	return nil
}

func clearScope(ctx context.Context, q sqlx.ExtContext, setID string) error {
	for _, t := range []scopeTable{projectScope, workspaceScope} {
		if _, err := q.ExecContext(ctx, `DELETE FROM `+t.table+` WHERE variable_set_id = $1`, setID); err != nil {
			return fmt.Errorf("clearing variable set scope: %w", err)
		}
	}
	return nil
}

// scopeTarget is a workspace or project named in a scope change.
type scopeTarget struct {
	ID        string `db:"id"`
	ProjectID string `db:"project_id"`
}

func workspacesByID(ctx context.Context, q sqlx.QueryerContext, organizationID string, ids []string) ([]scopeTarget, error) {
	var out []scopeTarget
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT id, project_id FROM workspaces WHERE organization_id = $1 AND id = ANY($2)`,
		organizationID, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("reading workspaces: %w", err)
	}
	return out, nil
}

func projectsByID(ctx context.Context, q sqlx.QueryerContext, organizationID string, ids []string) ([]scopeTarget, error) {
	var out []scopeTarget
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT id, id AS project_id FROM projects WHERE organization_id = $1 AND id = ANY($2)`,
		organizationID, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("reading projects: %w", err)
	}
	return out, nil
}

// touchSet advances a set's updated_at when its scope or variables change.
func touchSet(ctx context.Context, q sqlx.ExtContext, setID string, s Set) error {
	if _, err := q.ExecContext(ctx, `UPDATE variable_sets SET updated_at = $2 WHERE id = $1`, setID, s.UpdatedAt); err != nil {
		return fmt.Errorf("touching variable set: %w", err)
	}
	return nil
}

const variableColumns = `id, organization_id, variable_set_id, key, category, value, sensitive, hcl, description,
	value_version, value_digest, created_at, updated_at`

func insertVariable(ctx context.Context, q sqlx.ExtContext, v Variable, sealed []byte) error {
	_, err := q.ExecContext(ctx, `INSERT INTO variable_set_variables (`+variableColumns+`, sealed_value)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		v.ID, v.OrganizationID, v.SetID, v.Key, v.Category, v.Value, v.Sensitive, v.HCL, v.Description,
		v.ValueVersion, v.ValueDigest, v.CreatedAt, v.UpdatedAt, sealed)
	if db.IsUniqueViolation(err, "variable_set_variables_set_category_key") {
		return ErrKeyTaken
	}
	if err != nil {
		return fmt.Errorf("inserting variable set variable: %w", err)
	}
	return nil
}

// updateVariable writes an updated variable; the value columns only when
// valueChanged.
func updateVariable(ctx context.Context, q sqlx.ExtContext, v Variable, sealed []byte, valueChanged bool) error {
	query := `UPDATE variable_set_variables SET key = $3, category = $4, sensitive = $5, hcl = $6, description = $7, updated_at = $8`
	args := []any{v.OrganizationID, v.ID, v.Key, v.Category, v.Sensitive, v.HCL, v.Description, v.UpdatedAt}
	if valueChanged {
		query += `, value = $9, sealed_value = $10, value_version = $11, value_digest = $12`
		args = append(args, v.Value, sealed, v.ValueVersion, v.ValueDigest)
	}
	_, err := q.ExecContext(ctx, query+` WHERE organization_id = $1 AND id = $2`, args...)
	if db.IsUniqueViolation(err, "variable_set_variables_set_category_key") {
		return ErrKeyTaken
	}
	if err != nil {
		return fmt.Errorf("updating variable set variable: %w", err)
	}
	return nil
}

func deleteVariable(ctx context.Context, q sqlx.ExtContext, organizationID, variableID string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM variable_set_variables WHERE organization_id = $1 AND id = $2`,
		organizationID, variableID); err != nil {
		return fmt.Errorf("deleting variable set variable: %w", err)
	}
	return nil
}

// variableByID reads a variable of a set, locked for update when
// forUpdate.
func variableByID(ctx context.Context, q sqlx.QueryerContext, organizationID, setID, variableID string, forUpdate bool) (Variable, error) {
	query := `SELECT ` + variableColumns + ` FROM variable_set_variables WHERE organization_id = $1 AND variable_set_id = $2 AND id = $3`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var v Variable
	err := sqlx.GetContext(ctx, q, &v, query, organizationID, setID, variableID)
	if errors.Is(err, sql.ErrNoRows) {
		return Variable{}, fault.ErrNotFound
	}
	if err != nil {
		return Variable{}, fmt.Errorf("reading variable set variable: %w", err)
	}
	return v, nil
}

func listVariables(ctx context.Context, q sqlx.QueryerContext, organizationID, setID string) ([]Variable, error) {
	var out []Variable
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT `+variableColumns+` FROM variable_set_variables
		WHERE organization_id = $1 AND variable_set_id = $2 ORDER BY category, key`, organizationID, setID); err != nil {
		return nil, fmt.Errorf("listing variable set variables: %w", err)
	}
	return out, nil
}

// candidates reads every value a new run of the workspace could get: the
// workspace's own variables and one row per variable of each set that
// applies to it and each scope by which it applies. This is the one query
// behind both the effective-variables view and run creation.
func candidates(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID, projectID string) ([]workspace.PinnableVariable, error) {
	own, err := workspace.WorkspaceVariables(ctx, q, organizationID, workspaceID)
	if err != nil {
		return nil, err
	}
	var fromSets []workspace.PinnableVariable
	err = sqlx.SelectContext(ctx, q, &fromSets, `
		SELECT v.id, v.key, v.category, v.sensitive, v.hcl, v.value, v.sealed_value, v.value_version, v.value_digest,
			'variable_set' AS source, s.id AS set_id, s.name AS set_name, sc.scope, s.priority
		FROM variable_sets s
		JOIN LATERAL (
			SELECT 'global' AS scope WHERE s.global
			UNION ALL
			SELECT 'project' FROM variable_set_projects p WHERE NOT s.global AND p.variable_set_id = s.id AND p.project_id = $3
			UNION ALL
			SELECT 'workspace' FROM variable_set_workspaces w WHERE NOT s.global AND w.variable_set_id = s.id AND w.workspace_id = $2
		) sc ON true
		JOIN variable_set_variables v ON v.variable_set_id = s.id
		WHERE s.organization_id = $1`, organizationID, workspaceID, projectID)
	if err != nil {
		return nil, fmt.Errorf("reading variable set values to pin: %w", err)
	}
	return append(own, fromSets...), nil
}
