package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/fault"
)

// boundModule is a module's code-host binding as an ingestion copies it.
type boundModule struct {
	ID             string `db:"id"`
	OrganizationID string `db:"organization_id"`
	InstallationID int64  `db:"source_installation_id"`
	RepositoryID   int64  `db:"source_repository_id"`
	Owner          string `db:"source_owner"`
	Repository     string `db:"source_repository"`
	Directory      string `db:"source_directory"`
	TagPrefix      string `db:"source_tag_prefix"`
}

const boundColumns = `id, organization_id, source_installation_id, source_repository_id, source_owner, source_repository,
	coalesce(source_directory, '') AS source_directory, coalesce(source_tag_prefix, '') AS source_tag_prefix`

// modulesBoundTo lists an organization's modules bound to a repository
// through an installation.
func modulesBoundTo(ctx context.Context, q sqlx.QueryerContext, organizationID string, installationID, repositoryID int64) ([]boundModule, error) {
	var out []boundModule
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+boundColumns+` FROM registry_modules
		WHERE organization_id = $1 AND source_installation_id = $2 AND source_repository_id = $3 ORDER BY id`,
		organizationID, installationID, repositoryID)
	if err != nil {
		return nil, fmt.Errorf("reading modules bound to the repository: %w", err)
	}
	return out, nil
}

// boundModuleByID reads a module's binding, locked for the transaction;
// fault.ErrNotFound for another organization's module.
func boundModuleByID(ctx context.Context, tx *sqlx.Tx, organizationID, moduleID string) (boundModule, bool, error) {
	var m struct {
		boundModule
		Bound bool `db:"bound"`
	}
	err := sqlx.GetContext(ctx, tx, &m, `SELECT id, organization_id, coalesce(source_installation_id, 0) AS source_installation_id,
			coalesce(source_repository_id, 0) AS source_repository_id, coalesce(source_owner, '') AS source_owner,
			coalesce(source_repository, '') AS source_repository, coalesce(source_directory, '') AS source_directory,
			coalesce(source_tag_prefix, '') AS source_tag_prefix, source_repository_id IS NOT NULL AS bound
		FROM registry_modules WHERE id = $1 AND organization_id = $2 FOR UPDATE`, moduleID, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return boundModule{}, false, fault.ErrNotFound
	}
	if err != nil {
		return boundModule{}, false, fmt.Errorf("reading module binding: %w", err)
	}
	return m.boundModule, m.Bound, nil
}

// saveBinding writes (or, with nil, clears) a module's binding.
func saveBinding(ctx context.Context, tx *sqlx.Tx, moduleID string, b *boundModule, now time.Time) error {
	var err error
	if b == nil {
		_, err = tx.ExecContext(ctx, `UPDATE registry_modules SET source_installation_id = NULL, source_repository_id = NULL,
			source_owner = NULL, source_repository = NULL, source_directory = NULL, source_tag_prefix = NULL,
			status = CASE WHEN status = 'no_version_tags' THEN 'pending' ELSE status END, updated_at = $2
			WHERE id = $1`, moduleID, now)
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE registry_modules SET source_installation_id = $2, source_repository_id = $3,
			source_owner = $4, source_repository = $5, source_directory = $6, source_tag_prefix = $7,
			status = CASE WHEN status = 'no_version_tags' THEN 'pending' ELSE status END, updated_at = $8
			WHERE id = $1`, moduleID, b.InstallationID, b.RepositoryID, b.Owner, b.Repository, b.Directory, b.TagPrefix, now)
	}
	if err != nil {
		return fmt.Errorf("saving module binding: %w", err)
	}
	return nil
}

// markNoVersionTags records that a sync found nothing to publish in a
// module that has no version at all.
func markNoVersionTags(ctx context.Context, tx *sqlx.Tx, moduleID string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE registry_modules SET status = 'no_version_tags', updated_at = $2
		WHERE id = $1 AND status = 'pending'
			AND NOT EXISTS (SELECT 1 FROM registry_module_versions WHERE module_id = $1)`, moduleID, now)
	if err != nil {
		return fmt.Errorf("marking module without version tags: %w", err)
	}
	return nil
}

const ingestionColumns = `id, organization_id, module_id, trigger, delivery_id, installation_id, repository_id,
	repository_owner, repository_name, directory, tag, object_sha, commit_sha, version, status, error_code, error_message,
	version_id, created_at, settled_at`

// createOrReuseIngestion inserts an ingestion unless the module already
// has one for the tag; created reports which.
func createOrReuseIngestion(ctx context.Context, tx *sqlx.Tx, in Ingestion) (string, bool, error) {
	var id string
	err := sqlx.GetContext(ctx, tx, &id, `INSERT INTO registry_module_ingestions (id, organization_id, module_id, trigger,
			delivery_id, installation_id, repository_id, repository_owner, repository_name, directory, tag, object_sha,
			version, status, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'pending', $14)
		ON CONFLICT (module_id, tag) DO NOTHING RETURNING id`,
		in.ID, in.OrganizationID, in.ModuleID, in.Trigger, in.DeliveryID, in.InstallationID, in.RepositoryID,
		in.RepositoryOwner, in.RepositoryName, in.Directory, in.Tag, in.ObjectSHA, in.Version, in.CreatedAt)
	if err == nil {
		return id, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", false, fmt.Errorf("creating module ingestion: %w", err)
	}
	if err := sqlx.GetContext(ctx, tx, &id, `SELECT id FROM registry_module_ingestions WHERE module_id = $1 AND tag = $2`,
		in.ModuleID, in.Tag); err != nil {
		return "", false, fmt.Errorf("reading module ingestion: %w", err)
	}
	return id, false, nil
}

// ingestedTags are the tags a module already has ingestions of.
func ingestedTags(ctx context.Context, q sqlx.QueryerContext, moduleID string) (map[string]bool, error) {
	var tags []string
	if err := sqlx.SelectContext(ctx, q, &tags, `SELECT tag FROM registry_module_ingestions WHERE module_id = $1`,
		moduleID); err != nil {
		return nil, fmt.Errorf("reading ingested tags: %w", err)
	}
	out := make(map[string]bool, len(tags))
	for _, t := range tags {
		out[t] = true
	}
	return out, nil
}

// versionStrings are the version strings a module has.
func versionStrings(ctx context.Context, q sqlx.QueryerContext, moduleID string) (map[string]bool, error) {
	var vs []string
	if err := sqlx.SelectContext(ctx, q, &vs, `SELECT version FROM registry_module_versions WHERE module_id = $1`,
		moduleID); err != nil {
		return nil, fmt.Errorf("reading module versions: %w", err)
	}
	out := make(map[string]bool, len(vs))
	for _, v := range vs {
		out[v] = true
	}
	return out, nil
}

func ingestionByID(ctx context.Context, q sqlx.QueryerContext, id string, forUpdate bool) (Ingestion, error) {
	query := `SELECT ` + ingestionColumns + ` FROM registry_module_ingestions WHERE id = $1`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var in Ingestion
	err := sqlx.GetContext(ctx, q, &in, query, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Ingestion{}, fault.ErrNotFound
	}
	if err != nil {
		return Ingestion{}, fmt.Errorf("reading module ingestion: %w", err)
	}
	return in, nil
}

func saveIngestion(ctx context.Context, tx *sqlx.Tx, in Ingestion) error {
	_, err := tx.ExecContext(ctx, `UPDATE registry_module_ingestions SET status = $2, error_code = $3, error_message = $4,
		commit_sha = $5, version_id = $6, settled_at = $7 WHERE id = $1`,
		in.ID, in.Status, in.ErrorCode, in.ErrorMessage, in.CommitSHA, in.VersionID, in.SettledAt)
	if err != nil {
		return fmt.Errorf("updating module ingestion: %w", err)
	}
	return nil
}
