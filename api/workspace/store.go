package workspace

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
)

func insertProject(ctx context.Context, q sqlx.ExtContext, p Project) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO projects (id, organization_id, name, description, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		p.ID, p.OrganizationID, p.Name, p.Description, p.CreatedBy, p.CreatedAt)
	if db.IsUniqueViolation(err, "projects_organization_name_key") {
		return ErrProjectNameTaken
	}
	if err != nil {
		return fmt.Errorf("inserting project: %w", err)
	}
	return nil
}

const projectColumns = `id, organization_id, name, description, created_by, created_at`

func projectByID(ctx context.Context, q sqlx.QueryerContext, organizationID, projectID string) (Project, error) {
	var p Project
	err := sqlx.GetContext(ctx, q, &p, `
		SELECT `+projectColumns+` FROM projects
		WHERE organization_id = $1 AND id = $2`, organizationID, projectID)
	if errors.Is(err, sql.ErrNoRows) {
		return p, fault.ErrNotFound
	}
	if err != nil {
		return p, fmt.Errorf("reading project: %w", err)
	}
	return p, nil
}

func listProjects(ctx context.Context, q sqlx.QueryerContext, organizationID string, page cursor.Page) ([]Project, error) {
	keyset, args := page.Keyset([]any{organizationID}, "created_at", "id")
	query := `SELECT ` + projectColumns + ` FROM projects WHERE organization_id = $1` +
		keyset + page.OrderLimit("created_at", "id")
	var out []Project
	if err := sqlx.SelectContext(ctx, q, &out, query, args...); err != nil {
		return nil, fmt.Errorf("listing projects: %w", err)
	}
	return out, nil
}

// searchProjects reads an organization's projects by name: those named
// exactly (any of names), or whose name contains query, or all.
func searchProjects(ctx context.Context, q sqlx.QueryerContext, organizationID string, names []string, query string) ([]Project, error) {
	out := []Project{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+projectColumns+` FROM projects
		WHERE organization_id = $1
		  AND (coalesce(cardinality($2::text[]), 0) = 0 OR name = ANY($2))
		  AND ($3 = '' OR strpos(lower(name), lower($3)) > 0)
		ORDER BY lower(name), id`, organizationID, pq.Array(names), query)
	if err != nil {
		return nil, fmt.Errorf("searching projects: %w", err)
	}
	return out, nil
}

// lockProject locks a project row for a change to it or to what it holds.
func lockProject(ctx context.Context, tx *sqlx.Tx, organizationID, projectID string) (Project, error) {
	var p Project
	err := tx.GetContext(ctx, &p, `SELECT `+projectColumns+` FROM projects WHERE organization_id = $1 AND id = $2 FOR UPDATE`,
		organizationID, projectID)
	if errors.Is(err, sql.ErrNoRows) {
		return p, fault.ErrNotFound
	}
	if err != nil {
		return p, fmt.Errorf("locking project: %w", err)
	}
	return p, nil
}

func updateProject(ctx context.Context, q sqlx.ExtContext, p Project) error {
	_, err := q.ExecContext(ctx, `UPDATE projects SET name = $3, description = $4 WHERE organization_id = $1 AND id = $2`,
		p.OrganizationID, p.ID, p.Name, p.Description)
	if db.IsUniqueViolation(err, "projects_organization_name_key") {
		return ErrProjectNameTaken
	}
	if err != nil {
		return fmt.Errorf("updating project: %w", err)
	}
	return nil
}

// deleteEmptyProject deletes a project that holds no workspace (team grants
// on it go with it); one that holds any is ErrProjectNotEmpty.
func deleteEmptyProject(ctx context.Context, tx *sqlx.Tx, organizationID, projectID string) error {
	var holds bool
	if err := tx.GetContext(ctx, &holds, `SELECT EXISTS (SELECT 1 FROM workspaces WHERE project_id = $1)`, projectID); err != nil {
		return fmt.Errorf("reading project workspaces: %w", err)
	}
	if holds {
		return ErrProjectNotEmpty
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM projects WHERE organization_id = $1 AND id = $2`, organizationID, projectID); err != nil {
		return fmt.Errorf("deleting project: %w", err)
	}
	return nil
}

// lockNames serializes naming within one organization, so choosing a free
// slug and cloud name cannot race with another creation.
func lockNames(ctx context.Context, tx *sqlx.Tx, organizationID string) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cairn/workspace-names/' || $1, 0))`, organizationID)
	if err != nil {
		return fmt.Errorf("locking workspace names: %w", err)
	}
	return nil
}

// takenNames returns the slugs and cloud names (lowercased) in use in an
// organization that start with the given prefixes.
func takenNames(ctx context.Context, q sqlx.QueryerContext, organizationID, slugBase, cloudBase string) (map[string]bool, map[string]bool, error) {
	rows, err := q.QueryxContext(ctx, `
		SELECT slug, lower(cloud_name) FROM workspaces
		WHERE organization_id = $1 AND (slug LIKE $2 || '%' OR lower(cloud_name) LIKE lower($3) || '%')`,
		organizationID, slugBase, cloudBase)
	if err != nil {
		return nil, nil, fmt.Errorf("reading workspace names: %w", err)
	}
	defer rows.Close()
	slugs, clouds := map[string]bool{}, map[string]bool{}
	for rows.Next() {
		var slug, cloud string
		if err := rows.Scan(&slug, &cloud); err != nil {
			return nil, nil, fmt.Errorf("reading workspace names: %w", err)
		}
		slugs[slug], clouds[cloud] = true, true
	}
	return slugs, clouds, rows.Err()
}

func nameTaken(ctx context.Context, q sqlx.QueryerContext, organizationID, name, exceptID string) (bool, error) {
	var taken bool
	err := sqlx.GetContext(ctx, q, &taken, `
		SELECT EXISTS (SELECT 1 FROM workspaces WHERE organization_id = $1 AND lower(name) = lower($2) AND id <> $3)`,
		organizationID, name, exceptID)
	if err != nil {
		return false, fmt.Errorf("checking workspace name: %w", err)
	}
	return taken, nil
}

func insertWorkspace(ctx context.Context, q sqlx.ExtContext, w Workspace) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO workspaces (id, organization_id, project_id, name, slug, cloud_name, current_settings_version,
			execution_mode, created_by, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`,
		w.ID, w.OrganizationID, w.ProjectID, w.Name, w.Slug, w.CloudName, w.SettingsVersion, w.ExecutionMode, w.CreatedBy, w.CreatedAt)
	if db.IsUniqueViolation(err, "workspaces_organization_name_key") {
		return ErrNameTaken
	}
	if err != nil {
		return fmt.Errorf("inserting workspace: %w", err)
	}
	return nil
}

func insertSettingsVersion(ctx context.Context, q sqlx.ExtContext, workspaceID string, version int, s ExecutionSettings, createdBy string) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO workspace_settings_versions (workspace_id, version, tool_version, region, platform, created_by)
		VALUES ($1, $2, $3, $4, $5, $6)`, workspaceID, version, s.ToolVersion, s.Region, s.Platform, createdBy)
	if err != nil {
		return fmt.Errorf("inserting settings version: %w", err)
	}
	return nil
}

const workspaceColumns = `
	w.id, w.organization_id, w.project_id, w.name, w.slug, w.cloud_name, w.current_settings_version,
	w.created_by, w.created_at, w.updated_at, w.execution_mode, w.global_remote_state,
	w.locked_by_kind, w.locked_by_id, w.lock_reason, w.locked_at,
	v.tool_version, v.region, v.platform`

// scanTargets appends to dst where a row of workspaceColumns scans, in
// their order, then extra. The lists scan by position into a page
// allocated once: sqlx's reflective scan (its field lookup and slice growth
// on every row) took a sixth of the API's CPU on a page of workspaces.
func (w *Workspace) scanTargets(dst []any, extra ...any) []any {
	dst = append(dst,
		&w.ID, &w.OrganizationID, &w.ProjectID, &w.Name, &w.Slug, &w.CloudName, &w.SettingsVersion,
		&w.CreatedBy, &w.CreatedAt, &w.UpdatedAt, &w.ExecutionMode, &w.GlobalRemoteState,
		&w.LockedByKind, &w.LockedByID, &w.LockReason, &w.LockedAt,
		&w.ToolVersion, &w.Region, &w.Platform)
	return append(dst, extra...)
}

const workspaceFrom = `
	FROM workspaces w
	JOIN workspace_settings_versions v ON v.workspace_id = w.id AND v.version = w.current_settings_version`

// workspaceByID reads a workspace of the organization; forUpdate locks its
// row for a read-modify-write.
func workspaceByID(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string, forUpdate bool) (Workspace, error) {
	query := `SELECT` + workspaceColumns + workspaceFrom + ` WHERE w.organization_id = $1 AND w.id = $2`
	if forUpdate {
		query += ` FOR UPDATE OF w`
	}
	var w Workspace
	err := q.QueryRowxContext(ctx, query, organizationID, workspaceID).Scan(w.scanTargets(nil)...)
	if errors.Is(err, sql.ErrNoRows) {
		return w, fault.ErrNotFound
	}
	if err != nil {
		return w, fmt.Errorf("reading workspace: %w", err)
	}
	return w, nil
}

// WorkspaceByCloudName reads a workspace by its remote-backend selector,
// case-insensitively as the remote-backend protocol expects.
func WorkspaceByCloudName(ctx context.Context, q sqlx.QueryerContext, organizationID, cloudName string) (Workspace, error) {
	var w Workspace
	err := sqlx.GetContext(ctx, q, &w, `SELECT`+workspaceColumns+workspaceFrom+`
		WHERE w.organization_id = $1 AND lower(w.cloud_name) = lower($2)`, organizationID, cloudName)
	if errors.Is(err, sql.ErrNoRows) {
		return w, fault.ErrNotFound
	}
	if err != nil {
		return w, fmt.Errorf("reading workspace: %w", err)
	}
	return w, nil
}

// listStatement is the start of every workspace list's query: the
// workspaces of organization $1 in scope ($2 all, or the workspaces $3 and
// projects $4), each with its current run when currentRunLateral is given
// (see Service.ReadCurrentRuns), one round trip fewer for every list. It is
// built once per service, not per page.
func listStatement(currentRunLateral func(workspaceID string) string) string {
	currentRun, join := `, NULL, NULL`, ``
	if currentRunLateral != nil {
		currentRun = `, cr.id, cr.status`
		join = ` LEFT JOIN LATERAL (` + currentRunLateral("w.id") + `) cr ON true`
	}
	return `SELECT` + workspaceColumns + currentRun + workspaceFrom + join + ` WHERE w.organization_id = $1
		AND ($2 OR w.id = ANY($3::text[]) OR w.project_id = ANY($4::text[]))`
}

// listWorkspaces reads a page of the workspaces in scope with statement
// (listStatement), optionally of one project; withCurrentRuns says whether
// statement reads current runs.
func listWorkspaces(ctx context.Context, q sqlx.QueryerContext, statement string, withCurrentRuns bool,
	organizationID, projectID string, scope access.Scope, page cursor.Page) ([]Workspace, error) {
	query := statement
	args := []any{organizationID, scope.All, pq.Array(scope.WorkspaceIDs), pq.Array(scope.ProjectIDs)}
	if projectID != "" {
		query += ` AND w.project_id = $5`
		args = append(args, projectID)
	}
	keyset, args := page.Keyset(args, "w.created_at", "w.id")
	query += keyset + page.OrderLimit("w.created_at", "w.id")
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("listing workspaces: %w", err)
	}
	defer rows.Close()
	// The page and the scan targets are allocated once; each row scans
	// into its place in the page.
	out := make([]Workspace, page.Limit+1)
	var runID, runStatus sql.NullString
	targets := make([]any, 0, 32)
	n := 0
	for ; rows.Next(); n++ {
		if n == len(out) {
			out = append(out, Workspace{})
		}
		w := &out[n]
		if err := rows.Scan(w.scanTargets(targets[:0], &runID, &runStatus)...); err != nil {
			return nil, fmt.Errorf("listing workspaces: %w", err)
		}
		w.CurrentRunRead = withCurrentRuns
		if runID.Valid && runStatus.Valid {
			w.CurrentRun = &CurrentRun{ID: runID.String, Status: runStatus.String}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing workspaces: %w", err)
	}
	return out[:n], nil
}

func updateWorkspace(ctx context.Context, q sqlx.ExtContext, w Workspace) error {
	_, err := q.ExecContext(ctx, `
		UPDATE workspaces SET name = $3, current_settings_version = $4, execution_mode = $5, updated_at = $6
		WHERE organization_id = $1 AND id = $2`,
		w.OrganizationID, w.ID, w.Name, w.SettingsVersion, w.ExecutionMode, w.UpdatedAt)
	if db.IsUniqueViolation(err, "workspaces_organization_name_key") {
		return ErrNameTaken
	}
	if err != nil {
		return fmt.Errorf("updating workspace: %w", err)
	}
	return nil
}

const variableColumns = `id, organization_id, workspace_id, key, category, value, sensitive, hcl, description,
	value_version, value_digest, created_at, updated_at`

// variableKeyIndex keeps one variable per category and key in a workspace.
const variableKeyIndex = "workspace_variables_workspace_category_key_key"

func insertVariable(ctx context.Context, q sqlx.ExtContext, v Variable, sealed []byte) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO workspace_variables
			(id, organization_id, workspace_id, key, value, sealed_value, sensitive, hcl, description,
			 value_version, value_digest, created_at, updated_at, category)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13)`,
		v.ID, v.OrganizationID, v.WorkspaceID, v.Key, v.Value, sealed, v.Sensitive, v.HCL, v.Description,
		v.ValueVersion, v.ValueDigest, v.CreatedAt, v.Category)
	if db.IsUniqueViolation(err, variableKeyIndex) {
		return ErrVariableKeyTaken
	}
	if err != nil {
		return fmt.Errorf("inserting variable: %w", err)
	}
	return nil
}

// variableByID reads a variable of the organization, locked for update.
func variableByID(ctx context.Context, q sqlx.QueryerContext, organizationID, variableID string) (Variable, error) {
	var v Variable
	err := sqlx.GetContext(ctx, q, &v, `SELECT `+variableColumns+` FROM workspace_variables
		WHERE organization_id = $1 AND id = $2 FOR UPDATE`, organizationID, variableID)
	if errors.Is(err, sql.ErrNoRows) {
		return v, fault.ErrNotFound
	}
	if err != nil {
		return v, fmt.Errorf("reading variable: %w", err)
	}
	return v, nil
}

// updateVariable writes a replaced variable. sealed is written only when
// the value changed (setSealed), so an unchanged sensitive value keeps its
// ciphertext.
func updateVariable(ctx context.Context, q sqlx.ExtContext, v Variable, sealed []byte, valueChanged bool) error {
	query := `UPDATE workspace_variables SET sensitive = $3, hcl = $4, description = $5, updated_at = $6, key = $7, category = $8`
	args := []any{v.OrganizationID, v.ID, v.Sensitive, v.HCL, v.Description, v.UpdatedAt, v.Key, v.Category}
	if valueChanged {
		query += `, value = $9, sealed_value = $10, value_version = $11, value_digest = $12`
		args = append(args, v.Value, sealed, v.ValueVersion, v.ValueDigest)
	}
	query += ` WHERE organization_id = $1 AND id = $2`
	_, err := q.ExecContext(ctx, query, args...)
	if db.IsUniqueViolation(err, variableKeyIndex) {
		return ErrVariableKeyTaken
	}
	if err != nil {
		return fmt.Errorf("updating variable: %w", err)
	}
	return nil
}

func deleteVariable(ctx context.Context, q sqlx.ExtContext, organizationID, variableID string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM workspace_variables WHERE organization_id = $1 AND id = $2`,
		organizationID, variableID); err != nil {
		return fmt.Errorf("deleting variable: %w", err)
	}
	return nil
}

func listVariables(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) ([]Variable, error) {
	var out []Variable
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+variableColumns+` FROM workspace_variables
		WHERE organization_id = $1 AND workspace_id = $2 ORDER BY key, category`, organizationID, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("listing variables: %w", err)
	}
	return out, nil
}

func setLock(ctx context.Context, q sqlx.ExtContext, w Workspace) error {
	_, err := q.ExecContext(ctx, `
		UPDATE workspaces SET locked_by_kind = $3, locked_by_id = $4, lock_reason = $5, locked_at = $6, updated_at = $7
		WHERE organization_id = $1 AND id = $2`,
		w.OrganizationID, w.ID, w.LockedByKind, w.LockedByID, w.LockReason, w.LockedAt, w.UpdatedAt)
	if err != nil {
		return fmt.Errorf("writing workspace lock: %w", err)
	}
	return nil
}

func projectByName(ctx context.Context, q sqlx.QueryerContext, organizationID, name string) (Project, error) {
	var p Project
	err := sqlx.GetContext(ctx, q, &p, `
		SELECT `+projectColumns+` FROM projects
		WHERE organization_id = $1 AND lower(name) = lower($2)`, organizationID, name)
	if errors.Is(err, sql.ErrNoRows) {
		return p, fault.ErrNotFound
	}
	if err != nil {
		return p, fmt.Errorf("reading project: %w", err)
	}
	return p, nil
}

// deleteWorkspaceTree removes a workspace and every row that belongs to it,
// returning the object keys of its stored artifacts so the caller can
// delete them after the transaction commits (references go first).
func deleteWorkspaceTree(ctx context.Context, tx *sqlx.Tx, organizationID, workspaceID string) ([]string, error) {
	var keys []string
	if err := tx.SelectContext(ctx, &keys, `
		SELECT k FROM state_versions, LATERAL (VALUES (blob_key), (json_blob_key)) AS x(k)
		WHERE organization_id = $1 AND workspace_id = $2 AND k IS NOT NULL
		UNION ALL
		SELECT blob_key FROM configuration_versions WHERE organization_id = $1 AND workspace_id = $2 AND blob_key IS NOT NULL
		UNION ALL
		SELECT a.blob_key FROM run_artifacts a JOIN runs r ON r.id = a.run_id WHERE r.organization_id = $1 AND r.workspace_id = $2
		UNION ALL
		SELECT g.blob_key FROM run_log_segments g JOIN runs r ON r.id = g.run_id WHERE r.organization_id = $1 AND r.workspace_id = $2`, organizationID, workspaceID); err != nil {
		return nil, fmt.Errorf("listing workspace artifacts: %w", err)
	}
	runsOf := `(SELECT id FROM runs WHERE organization_id = $1 AND workspace_id = $2)`
	for _, stmt := range []string{
		// A connected workspace's ingestions name its configurations and
		// runs, so they go first; a publication of their check runs goes
		// with each.
		`DELETE FROM source_ingestion_deliveries WHERE ingestion_id IN
			(SELECT id FROM source_ingestions WHERE organization_id = $1 AND workspace_id = $2)`,
		`DELETE FROM source_ingestions WHERE organization_id = $1 AND workspace_id = $2`,
		`DELETE FROM workspace_source_settings WHERE organization_id = $1 AND workspace_id = $2`,
		`DELETE FROM run_registry_modules WHERE run_id IN ` + runsOf,
		`DELETE FROM policy_overrides WHERE run_id IN ` + runsOf,
		`DELETE FROM policy_results WHERE run_id IN ` + runsOf,
		`DELETE FROM policy_checks WHERE run_id IN ` + runsOf,
		`DELETE FROM run_policy_snapshots WHERE run_id IN ` + runsOf,
		`UPDATE policy_attachments SET status = 'detached', detached_at = now()
			WHERE organization_id = $1 AND scope = 'workspace' AND scope_id = $2 AND status = 'active'`,
		`DELETE FROM run_tokens WHERE run_id IN ` + runsOf,
		`DELETE FROM run_recoveries WHERE run_id IN ` + runsOf,
		`DELETE FROM run_log_chunks WHERE run_id IN ` + runsOf,
		`DELETE FROM run_log_segments WHERE run_id IN ` + runsOf,
		`DELETE FROM run_artifacts WHERE run_id IN ` + runsOf,
		`DELETE FROM capacity_leases WHERE attempt_id IN (SELECT id FROM run_attempts WHERE run_id IN ` + runsOf + `)`,
		`DELETE FROM run_attempts WHERE run_id IN ` + runsOf,
		`DELETE FROM run_events WHERE run_id IN ` + runsOf,
		`DELETE FROM run_comments WHERE run_id IN ` + runsOf,
		`DELETE FROM runs WHERE organization_id = $1 AND workspace_id = $2`,
		`DELETE FROM configuration_versions WHERE organization_id = $1 AND workspace_id = $2`,
		`DELETE FROM state_version_outputs WHERE state_version_id IN (SELECT id FROM state_versions WHERE organization_id = $1 AND workspace_id = $2)`,
		`DELETE FROM state_versions WHERE organization_id = $1 AND workspace_id = $2`,
		`DELETE FROM workspace_variables WHERE organization_id = $1 AND workspace_id = $2`,
		`UPDATE service_account_tokens SET revoked_at = now() WHERE organization_id = $1 AND workspace_id = $2 AND revoked_at IS NULL`,
		// A profile names its current version (a deferred reference), each
		// version its profile: versions first, and the profile's reference
		// is checked at commit, when both are gone.
		`DELETE FROM credential_profile_versions WHERE organization_id = $1 AND profile_id IN
			(SELECT id FROM credential_profiles WHERE organization_id = $1 AND workspace_id = $2)`,
		`DELETE FROM credential_profiles WHERE organization_id = $1 AND workspace_id = $2`,
		`DELETE FROM workspace_settings_versions WHERE workspace_id = (SELECT id FROM workspaces WHERE organization_id = $1 AND id = $2)`,
		`DELETE FROM workspaces WHERE organization_id = $1 AND id = $2`,
	} {
		if _, err := tx.ExecContext(ctx, stmt, organizationID, workspaceID); err != nil {
			return nil, fmt.Errorf("deleting workspace: %w", err)
		}
	}
	return keys, nil
}

// organizationExecutionMode is the mode a workspace created without one
// takes.
func organizationExecutionMode(ctx context.Context, q sqlx.QueryerContext, organizationID string) (string, error) {
	var mode string
	err := sqlx.GetContext(ctx, q, &mode, `SELECT default_execution_mode FROM organizations WHERE id = $1`, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fault.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading the organization's default execution mode: %w", err)
	}
	return mode, nil
}

// workspacesByID reads the organization's workspaces of ids, by name; IDs
// it does not hold are left out.
func workspacesByID(ctx context.Context, q sqlx.QueryerContext, organizationID string, ids []string) ([]Workspace, error) {
	return workspacesByName(ctx, q, "reading workspaces", `
		WHERE w.organization_id = $1 AND w.id = ANY($2::text[])`, organizationID, pq.Array(ids))
}

// listConsumers reads the workspaces a workspace lists as consumers of its
// state, by name.
func listConsumers(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) ([]Workspace, error) {
	return workspacesByName(ctx, q, "reading remote-state consumers", `
		JOIN workspace_remote_state_consumers x ON x.consumer_workspace_id = w.id
		WHERE x.organization_id = $1 AND x.workspace_id = $2`, organizationID, workspaceID)
}

// workspacesByName reads the workspaces that joinWhere selects, ordered by
// name; what names the read in its error.
func workspacesByName(ctx context.Context, q sqlx.QueryerContext, what, joinWhere string, args ...any) ([]Workspace, error) {
	out := []Workspace{}
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT`+workspaceColumns+workspaceFrom+joinWhere+` ORDER BY lower(w.cloud_name), w.id`, args...); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// consumersPage reads a page of the workspaces that may read w's state
// (every other one while w shares globally, else its list) within scope
// and a token's workspace and project boundaries, by name, with their
// total.
func consumersPage(ctx context.Context, q sqlx.QueryerContext, w Workspace, scope access.Scope, boundWorkspace, boundProject string, number, size int) ([]Workspace, int, error) {
	where := ` WHERE w.organization_id = $1 AND w.id <> $2
		AND ($3 OR EXISTS (SELECT 1 FROM workspace_remote_state_consumers x WHERE x.workspace_id = $2 AND x.consumer_workspace_id = w.id))
		AND ($4 OR w.id = ANY($5::text[]) OR w.project_id = ANY($6::text[]))
		AND ($7 = '' OR w.id = $7) AND ($8 = '' OR w.project_id = $8)`
	args := []any{w.OrganizationID, w.ID, w.GlobalRemoteState, scope.All, pq.Array(scope.WorkspaceIDs), pq.Array(scope.ProjectIDs),
		boundWorkspace, boundProject}
	var total int
	if err := sqlx.GetContext(ctx, q, &total, `SELECT count(*) FROM workspaces w`+where, args...); err != nil {
		return nil, 0, fmt.Errorf("counting remote-state consumers: %w", err)
	}
	out := []Workspace{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT`+workspaceColumns+workspaceFrom+where+`
		ORDER BY lower(w.cloud_name), w.id LIMIT $9 OFFSET $10`, append(args, size, (number-1)*size)...)
	if err != nil {
		return nil, 0, fmt.Errorf("listing remote-state consumers: %w", err)
	}
	return out, total, nil
}

func setGlobalRemoteState(ctx context.Context, q sqlx.ExtContext, w Workspace) error {
	_, err := q.ExecContext(ctx, `UPDATE workspaces SET global_remote_state = $3, updated_at = $4 WHERE organization_id = $1 AND id = $2`,
		w.OrganizationID, w.ID, w.GlobalRemoteState, w.UpdatedAt)
	if err != nil {
		return fmt.Errorf("updating global remote state: %w", err)
	}
	return nil
}

// insertConsumers lists consumers of w's state and returns the IDs that
// were not listed before.
func insertConsumers(ctx context.Context, q sqlx.QueryerContext, w Workspace, consumers []Workspace, createdBy string) ([]string, error) {
	added := []string{}
	err := sqlx.SelectContext(ctx, q, &added, `
		INSERT INTO workspace_remote_state_consumers (organization_id, workspace_id, consumer_workspace_id, created_by)
		SELECT $1, $2, c, $4 FROM unnest($3::text[]) AS c
		ON CONFLICT DO NOTHING RETURNING consumer_workspace_id`, w.OrganizationID, w.ID, pq.Array(workspaceIDs(consumers)), createdBy)
	if err != nil {
		return nil, fmt.Errorf("adding remote-state consumers: %w", err)
	}
	slices.Sort(added)
	return added, nil
}

// deleteConsumers takes consumers off w's list and returns the IDs that
// were on it.
func deleteConsumers(ctx context.Context, q sqlx.QueryerContext, w Workspace, consumers []Workspace) ([]string, error) {
	removed := []string{}
	err := sqlx.SelectContext(ctx, q, &removed, `
		DELETE FROM workspace_remote_state_consumers
		WHERE organization_id = $1 AND workspace_id = $2 AND consumer_workspace_id = ANY($3::text[])
		RETURNING consumer_workspace_id`, w.OrganizationID, w.ID, pq.Array(workspaceIDs(consumers)))
	if err != nil {
		return nil, fmt.Errorf("removing remote-state consumers: %w", err)
	}
	slices.Sort(removed)
	return removed, nil
}

func workspaceIDs(ws []Workspace) []string {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	return ids
}
