package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/fault"
)

const versionColumns = `id, organization_id, workspace_id, number, serial, lineage, md5, force, status, sha256,
	size_bytes, blob_key, json_blob_key, tool_version, resource_count, resources_counted, created_by_kind, created_by_id,
	run_id, created_at, finalized_at`

func insertVersion(ctx context.Context, q sqlx.ExtContext, v Version) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO state_versions (id, organization_id, workspace_id, serial, lineage, md5, force, status,
			created_by_kind, created_by_id, run_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		v.ID, v.OrganizationID, v.WorkspaceID, v.Serial, v.Lineage, v.MD5, v.Force, v.Status,
		v.CreatedByKind, v.CreatedByID, v.RunID, v.CreatedAt)
	if err != nil {
		return fmt.Errorf("inserting state version: %w", err)
	}
	return nil
}

// versionByID reads a version; organizationID "" means any organization
// (for capability URLs, whose signature already names the version).
func versionByID(ctx context.Context, q sqlx.QueryerContext, organizationID, versionID string, forUpdate bool) (Version, error) {
	query := `SELECT ` + versionColumns + ` FROM state_versions WHERE id = $1 AND ($2 = '' OR organization_id = $2)`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var v Version
	err := sqlx.GetContext(ctx, q, &v, query, versionID, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return v, fault.ErrNotFound
	}
	if err != nil {
		return v, fmt.Errorf("reading state version: %w", err)
	}
	return v, nil
}

// currentVersion is the newest finalized version of a workspace, or nil.
func currentVersion(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) (*Version, error) {
	var v Version
	err := sqlx.GetContext(ctx, q, &v, `SELECT `+versionColumns+` FROM state_versions
		WHERE organization_id = $1 AND workspace_id = $2 AND status = 'finalized'
		ORDER BY number DESC LIMIT 1`, organizationID, workspaceID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading current state version: %w", err)
	}
	return &v, nil
}

func finalizeVersion(ctx context.Context, q sqlx.ExtContext, v Version) error {
	_, err := q.ExecContext(ctx, `
		UPDATE state_versions SET status = 'finalized', number = $2, sha256 = $3, size_bytes = $4, blob_key = $5,
			tool_version = $6, resource_count = $7, finalized_at = $8, resources_counted = $9
		WHERE id = $1 AND status = 'pending'`,
		v.ID, v.Number, v.SHA256, v.Size, v.BlobKey, v.ToolVersion, v.ResourceCount, v.FinalizedAt, v.ResourcesCounted)
	if err != nil {
		return fmt.Errorf("finalizing state version: %w", err)
	}
	return nil
}

func setJSONBlob(ctx context.Context, q sqlx.ExtContext, versionID, key string) (string, error) {
	var previous sql.NullString
	err := sqlx.GetContext(ctx, q, &previous, `
		UPDATE state_versions s SET json_blob_key = $2
		FROM (SELECT json_blob_key FROM state_versions WHERE id = $1 FOR UPDATE) old
		WHERE s.id = $1 RETURNING old.json_blob_key`, versionID, key)
	if err != nil {
		return "", fmt.Errorf("recording json state: %w", err)
	}
	return previous.String, nil
}

// LockVersions serializes finalization within one workspace so numbers and
// serial checks cannot race. A plan's commit takes it too, so that no
// state is finalized between its last look at the state and its commit.
func LockVersions(ctx context.Context, tx *sqlx.Tx, workspaceID string) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cairn/state-versions/' || $1, 0))`, workspaceID)
	if err != nil {
		return fmt.Errorf("locking state versions: %w", err)
	}
	return nil
}

// runStillWrites refuses to finalize a version a run's CLI created once
// that run can no longer write state: canceling an apply revokes its run
// token, and the signed upload URL the CLI got before must not outlive it.
// The share lock orders a concurrent revocation: it waits for this
// finalization, or this finalization sees the token revoked.
func runStillWrites(ctx context.Context, tx *sqlx.Tx, v Version) error {
	if v.CreatedByKind != access.KindRun {
		return nil
	}
	var live int
	err := tx.GetContext(ctx, &live, `SELECT count(*) FROM (SELECT 1 FROM run_tokens WHERE run_id = $1 AND phase = 'apply'
		AND revoked_at IS NULL AND expires_at > now() FOR SHARE) t`, v.CreatedByID)
	if err != nil {
		return fmt.Errorf("checking the run's state writer: %w", err)
	}
	if live == 0 {
		return ErrWriterRevoked
	}
	return nil
}

func nextNumber(ctx context.Context, q sqlx.QueryerContext, workspaceID string) (int, error) {
	var n int
	err := sqlx.GetContext(ctx, q, &n, `SELECT COALESCE(MAX(number), 0) + 1 FROM state_versions WHERE workspace_id = $1`, workspaceID)
	if err != nil {
		return 0, fmt.Errorf("numbering state version: %w", err)
	}
	return n, nil
}

func insertOutputs(ctx context.Context, q sqlx.ExtContext, outputs []Output) error {
	for _, o := range outputs {
		if _, err := q.ExecContext(ctx, `
			INSERT INTO state_version_outputs (id, state_version_id, name, sensitive, type_json, value_json)
			VALUES ($1, $2, $3, $4, $5, $6)`, o.ID, o.StateVersionID, o.Name, o.Sensitive, o.TypeJSON, o.ValueJSON); err != nil {
			return fmt.Errorf("inserting state output: %w", err)
		}
	}
	return nil
}

func outputsOf(ctx context.Context, q sqlx.QueryerContext, versionID string) ([]Output, error) {
	var out []Output
	err := sqlx.SelectContext(ctx, q, &out, `
		SELECT id, state_version_id, name, sensitive, type_json, value_json FROM state_version_outputs
		WHERE state_version_id = $1 ORDER BY name`, versionID)
	if err != nil {
		return nil, fmt.Errorf("listing state outputs: %w", err)
	}
	return out, nil
}

// outputByID reads an output of a version in the organization.
func outputByID(ctx context.Context, q sqlx.QueryerContext, organizationID, outputID string) (Output, Version, error) {
	var row struct {
		Output
		VersionOrganization string `db:"version_organization"`
		VersionWorkspace    string `db:"version_workspace"`
	}
	err := sqlx.GetContext(ctx, q, &row, `
		SELECT o.id, o.state_version_id, o.name, o.sensitive, o.type_json, o.value_json,
		       v.organization_id AS version_organization, v.workspace_id AS version_workspace
		FROM state_version_outputs o JOIN state_versions v ON v.id = o.state_version_id
		WHERE o.id = $1 AND v.organization_id = $2`, outputID, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return Output{}, Version{}, fault.ErrNotFound
	}
	if err != nil {
		return Output{}, Version{}, fmt.Errorf("reading state output: %w", err)
	}
	return row.Output, Version{ID: row.StateVersionID, OrganizationID: row.VersionOrganization, WorkspaceID: row.VersionWorkspace}, nil
}

// listVersions reads a page of a workspace's versions, newest first.
func listVersions(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string, finalizedOnly bool, page cursor.Page) ([]Version, error) {
	keyset, args := page.Keyset([]any{organizationID, workspaceID}, "created_at", "id")
	query := `SELECT ` + versionColumns + ` FROM state_versions WHERE organization_id = $1 AND workspace_id = $2`
	if finalizedOnly {
		query += ` AND status = 'finalized'`
	}
	query += keyset + page.OrderLimit("created_at", "id")
	var out []Version
	if err := sqlx.SelectContext(ctx, q, &out, query, args...); err != nil {
		return nil, fmt.Errorf("listing state versions: %w", err)
	}
	return out, nil
}

// countFinalized counts a workspace's finalized versions.
func countFinalized(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) (int, error) {
	var n int
	err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM state_versions WHERE organization_id = $1 AND workspace_id = $2 AND status = 'finalized'`,
		organizationID, workspaceID)
	if err != nil {
		return 0, fmt.Errorf("counting state versions: %w", err)
	}
	return n, nil
}

// pageByOffset reads finalized versions for offset pagination (the
// remote-backend protocol pages by number), newest first.
func pageByOffset(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string, offset, limit int) ([]Version, error) {
	var out []Version
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+versionColumns+` FROM state_versions
		WHERE organization_id = $1 AND workspace_id = $2 AND status = 'finalized'
		ORDER BY number DESC OFFSET $3 LIMIT $4`, organizationID, workspaceID, offset, limit)
	if err != nil {
		return nil, fmt.Errorf("listing state versions: %w", err)
	}
	return out, nil
}
