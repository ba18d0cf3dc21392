package registry

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
)

type moduleRow struct {
	ID                   string         `db:"id"`
	OrganizationID       string         `db:"organization_id"`
	OrganizationName     string         `db:"organization_name"`
	RegistryName         string         `db:"registry_name"`
	Namespace            string         `db:"namespace"`
	Name                 string         `db:"name"`
	Provider             string         `db:"provider"`
	Status               string         `db:"status"`
	SourceInstallationID sql.NullInt64  `db:"source_installation_id"`
	SourceRepositoryID   sql.NullInt64  `db:"source_repository_id"`
	SourceOwner          sql.NullString `db:"source_owner"`
	SourceRepository     sql.NullString `db:"source_repository"`
	SourceDirectory      sql.NullString `db:"source_directory"`
	SourceTagPrefix      sql.NullString `db:"source_tag_prefix"`
	VersionCount         int            `db:"version_count"`
	LatestVersion        *string        `db:"latest_version"`
	CreatedAt            time.Time      `db:"created_at"`
	UpdatedAt            time.Time      `db:"updated_at"`
}

func (r moduleRow) module() Module {
	m := Module{ID: r.ID, OrganizationID: r.OrganizationID, OrganizationName: r.OrganizationName,
		RegistryName: r.RegistryName, Namespace: r.Namespace, Name: r.Name, Provider: r.Provider, Status: r.Status,
		VersionCount: r.VersionCount, LatestVersion: r.LatestVersion, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	if r.SourceRepositoryID.Valid {
		m.Source = &Source{InstallationID: r.SourceInstallationID.Int64, RepositoryID: r.SourceRepositoryID.Int64,
			Owner: r.SourceOwner.String, Repository: r.SourceRepository.String,
			Directory: r.SourceDirectory.String, TagPrefix: r.SourceTagPrefix.String}
	}
	return m
}

// moduleSelect reads modules with their organization's name, their
// version count and their latest resolvable version (the newest release,
// else the newest prerelease).
const moduleSelect = `
	SELECT m.id, m.organization_id, o.slug AS organization_name, m.registry_name, m.namespace, m.name, m.provider,
	       m.status, m.source_installation_id, m.source_repository_id, m.source_owner, m.source_repository,
	       m.source_directory, m.source_tag_prefix, m.created_at, m.updated_at,
	       (SELECT count(*) FROM registry_module_versions v WHERE v.module_id = m.id) AS version_count,
	       (SELECT v.version FROM registry_module_versions v
	         WHERE v.module_id = m.id AND v.status = 'ok' AND v.revoked_at IS NULL
	         ORDER BY split_part(v.version, '+', 1) LIKE '%-%', v.sort_key DESC, v.version DESC
	         LIMIT 1) AS latest_version
	  FROM registry_modules m JOIN organizations o ON o.id = m.organization_id`

func organizationName(ctx context.Context, q sqlx.QueryerContext, organizationID string) (string, error) {
	var name string
	err := sqlx.GetContext(ctx, q, &name, `SELECT slug FROM organizations WHERE id = $1`, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fault.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading organization name: %w", err)
	}
	return name, nil
}

func insertModule(ctx context.Context, tx sqlx.ExtContext, m Module, createdBy string) error {
	src := m.Source
	if src == nil {
		src = &Source{}
	}
	_, err := tx.ExecContext(ctx, `
		INSERT INTO registry_modules (id, organization_id, registry_name, namespace, name, provider, status,
		       source_installation_id, source_repository_id, source_owner, source_repository, source_directory,
		       source_tag_prefix, created_by, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15)`,
		m.ID, m.OrganizationID, m.RegistryName, m.Namespace, m.Name, m.Provider, m.Status,
		nullInt(src.InstallationID), nullInt(src.RepositoryID), nullString(src.Owner), nullString(src.Repository),
		nullString(src.Directory), nullString(src.TagPrefix), createdBy, m.CreatedAt)
	if db.IsUniqueViolation(err, "registry_modules_address_key") {
		return ErrModuleExists
	}
	if err != nil {
		return fmt.Errorf("inserting registry module: %w", err)
	}
	return nil
}

func moduleByID(ctx context.Context, q sqlx.QueryerContext, organizationID, moduleID string) (Module, error) {
	var r moduleRow
	err := sqlx.GetContext(ctx, q, &r, moduleSelect+` WHERE m.organization_id = $1 AND m.id = $2`, organizationID, moduleID)
	return scannedModule(r, err)
}

func moduleByAddress(ctx context.Context, q sqlx.QueryerContext, organizationID, registryName, namespace, name, provider string) (Module, error) {
	var r moduleRow
	err := sqlx.GetContext(ctx, q, &r, moduleSelect+`
		WHERE m.organization_id = $1 AND m.registry_name = $2 AND m.namespace = $3 AND m.name = $4 AND m.provider = $5`,
		organizationID, registryName, namespace, name, provider)
	return scannedModule(r, err)
}

func scannedModule(r moduleRow, err error) (Module, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return Module{}, fault.ErrNotFound
	}
	if err != nil {
		return Module{}, fmt.Errorf("reading registry module: %w", err)
	}
	return r.module(), nil
}

// lockModule takes the module's row lock: version creation, status
// changes and deletion of one module are serialised on it.
func lockModule(ctx context.Context, tx *sqlx.Tx, organizationID, moduleID string) error {
	var got string
	err := tx.GetContext(ctx, &got, `SELECT id FROM registry_modules WHERE organization_id = $1 AND id = $2 FOR UPDATE`,
		organizationID, moduleID)
	if errors.Is(err, sql.ErrNoRows) {
		return fault.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("locking registry module: %w", err)
	}
	return nil
}

// moduleListFilter is a list query's filters as SQL, in a canonical
// string for the cursor.
type moduleListFilter struct {
	query, provider, registryName string
}

func (f moduleListFilter) canonical() string {
	raw, _ := json.Marshal([]string{f.query, f.provider, f.registryName})
	return string(raw)
}

// listModules reads one page by name, provider and ID, after the
// position (name, provider, id) when given; it fetches limit+1 rows.
func listModules(ctx context.Context, q sqlx.QueryerContext, organizationID string, f moduleListFilter, after []string, limit int) ([]Module, error) {
	where := []string{"m.organization_id = $1"}
	args := []any{organizationID}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", fmt.Sprintf("$%d", len(args))))
	}
	if f.query != "" {
		add(`m.name ILIKE ? ESCAPE '\'`, "%"+likeEscaper.Replace(f.query)+"%")
	}
	if f.provider != "" {
		add("m.provider = ?", f.provider)
	}
	if f.registryName != "" {
		add("m.registry_name = ?", f.registryName)
	}
	if after != nil {
		args = append(args, after[0], after[1], after[2])
		n := len(args)
		where = append(where, fmt.Sprintf("(m.name, m.provider, m.id) > ($%d, $%d, $%d)", n-2, n-1, n))
	}
	args = append(args, limit+1)
	var rows []moduleRow
	err := sqlx.SelectContext(ctx, q, &rows, moduleSelect+` WHERE `+strings.Join(where, " AND ")+
		fmt.Sprintf(` ORDER BY m.name, m.provider, m.id LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("listing registry modules: %w", err)
	}
	out := make([]Module, len(rows))
	for i, r := range rows {
		out[i] = r.module()
	}
	return out, nil
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// modulesByName reads the modules of a name (every provider, or one).
func modulesByName(ctx context.Context, q sqlx.QueryerContext, organizationID, registryName, namespace, name string, provider *string) ([]Module, error) {
	var rows []moduleRow
	err := sqlx.SelectContext(ctx, q, &rows, moduleSelect+`
		WHERE m.organization_id = $1 AND m.registry_name = $2 AND m.namespace = $3 AND m.name = $4
		  AND ($5::text IS NULL OR m.provider = $5) ORDER BY m.provider`,
		organizationID, registryName, namespace, name, provider)
	if err != nil {
		return nil, fmt.Errorf("reading registry modules by name: %w", err)
	}
	out := make([]Module, len(rows))
	for i, r := range rows {
		out[i] = r.module()
	}
	return out, nil
}

// deleteModuleRow deletes a module (its versions go with it) and returns
// the blob keys its versions referenced.
func deleteModuleRow(ctx context.Context, tx *sqlx.Tx, organizationID, moduleID string) ([]string, error) {
	var keys []string
	err := tx.SelectContext(ctx, &keys, `
		SELECT blob_key FROM registry_module_versions WHERE module_id = $1 AND organization_id = $2 AND blob_key IS NOT NULL`,
		moduleID, organizationID)
	if err != nil {
		return nil, fmt.Errorf("reading registry module archives: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM registry_modules WHERE organization_id = $1 AND id = $2`, organizationID, moduleID); err != nil {
		return nil, fmt.Errorf("deleting registry module: %w", err)
	}
	return keys, nil
}

// refreshModuleStatus sets the module's status from its versions.
func refreshModuleStatus(ctx context.Context, tx *sqlx.Tx, moduleID string, at time.Time) error {
	var st struct {
		Status string `db:"status"`
		HasOK  bool   `db:"has_ok"`
		HasAny bool   `db:"has_any"`
	}
	err := tx.GetContext(ctx, &st, `
		SELECT m.status,
		       EXISTS (SELECT 1 FROM registry_module_versions v WHERE v.module_id = m.id AND v.status = 'ok') AS has_ok,
		       EXISTS (SELECT 1 FROM registry_module_versions v WHERE v.module_id = m.id AND v.status <> 'pending') AS has_any
		  FROM registry_modules m WHERE m.id = $1`, moduleID)
	if err != nil {
		return fmt.Errorf("reading registry module status: %w", err)
	}
	next := moduleStatusAfter(st.Status, st.HasOK, st.HasAny)
	if next == st.Status {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE registry_modules SET status = $2, updated_at = $3 WHERE id = $1`, moduleID, next, at); err != nil {
		return fmt.Errorf("updating registry module status: %w", err)
	}
	return nil
}

type versionRow struct {
	ID               string         `db:"id"`
	ModuleID         string         `db:"module_id"`
	OrganizationID   string         `db:"organization_id"`
	Version          string         `db:"version"`
	SortKey          []byte         `db:"sort_key"`
	Status           string         `db:"status"`
	ErrorCode        *string        `db:"error_code"`
	ErrorMessage     *string        `db:"error_message"`
	BlobKey          sql.NullString `db:"blob_key"`
	ArchiveSHA256    *string        `db:"archive_sha256"`
	ArchiveBytes     *int64         `db:"archive_bytes"`
	Origin           string         `db:"origin"`
	Tag              *string        `db:"tag"`
	CommitSHA        *string        `db:"commit_sha"`
	DeprecatedReason sql.NullString `db:"deprecated_reason"`
	DeprecatedLink   sql.NullString `db:"deprecated_link"`
	DeprecatedAt     *time.Time     `db:"deprecated_at"`
	DeprecatedBy     sql.NullString `db:"deprecated_by"`
	RevokedReason    sql.NullString `db:"revoked_reason"`
	RevokedAt        *time.Time     `db:"revoked_at"`
	RevokedBy        sql.NullString `db:"revoked_by"`
	CreatedAt        time.Time      `db:"created_at"`
	PublishedAt      *time.Time     `db:"published_at"`
}

const versionColumns = `id, module_id, organization_id, version, sort_key, status, error_code, error_message, blob_key,
	archive_sha256, archive_bytes, origin, tag, commit_sha, deprecated_reason, deprecated_link, deprecated_at,
	deprecated_by, revoked_reason, revoked_at, revoked_by, created_at, published_at`

func (r versionRow) version() Version {
	v := Version{ID: r.ID, ModuleID: r.ModuleID, OrganizationID: r.OrganizationID, Version: r.Version, Status: r.Status,
		ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage, ArchiveSHA256: r.ArchiveSHA256, ArchiveBytes: r.ArchiveBytes,
		Origin: r.Origin, Tag: r.Tag, CommitSHA: r.CommitSHA, CreatedAt: r.CreatedAt.UTC(), PublishedAt: utc(r.PublishedAt)}
	if r.DeprecatedAt != nil {
		v.Deprecation = &Deprecation{Reason: r.DeprecatedReason.String, Link: r.DeprecatedLink.String,
			At: r.DeprecatedAt.UTC(), By: r.DeprecatedBy.String}
	}
	if r.RevokedAt != nil {
		v.Revocation = &Revocation{Reason: r.RevokedReason.String, At: r.RevokedAt.UTC(), By: r.RevokedBy.String}
	}
	return v
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func insertVersion(ctx context.Context, tx *sqlx.Tx, v Version, sortKey []byte, createdBy string) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO registry_module_versions (id, module_id, organization_id, version, sort_key, status, origin, tag,
		       commit_sha, created_by, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		v.ID, v.ModuleID, v.OrganizationID, v.Version, sortKey, v.Status, v.Origin, v.Tag, v.CommitSHA, createdBy, v.CreatedAt)
	if db.IsUniqueViolation(err, "registry_module_versions_version_key") {
		return ErrVersionExists
	}
	if err != nil {
		return fmt.Errorf("inserting registry module version: %w", err)
	}
	return nil
}

// versionByID reads a version; organizationID "" reads it in any
// organization (only for capability-bound reads).
func versionByID(ctx context.Context, q sqlx.QueryerContext, organizationID, versionID string, forUpdate bool) (versionRow, error) {
	query := `SELECT ` + versionColumns + ` FROM registry_module_versions WHERE id = $1 AND ($2 = '' OR organization_id = $2)`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var r versionRow
	err := sqlx.GetContext(ctx, q, &r, query, versionID, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return versionRow{}, fault.ErrNotFound
	}
	if err != nil {
		return versionRow{}, fmt.Errorf("reading registry module version: %w", err)
	}
	return r, nil
}

func versionByString(ctx context.Context, q sqlx.QueryerContext, organizationID, moduleID, version string) (Version, error) {
	var r versionRow
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+versionColumns+` FROM registry_module_versions
		WHERE organization_id = $1 AND module_id = $2 AND version = $3`, organizationID, moduleID, version)
	if errors.Is(err, sql.ErrNoRows) {
		return Version{}, fault.ErrNotFound
	}
	if err != nil {
		return Version{}, fmt.Errorf("reading registry module version: %w", err)
	}
	return r.version(), nil
}

// listVersions reads one page of a module's versions, newest (semver)
// first, after the position (hex sort key, version) when given; it
// fetches limit+1 rows. resolvable keeps only ok, unrevoked versions.
func listVersions(ctx context.Context, q sqlx.QueryerContext, moduleID string, afterKey []byte, afterVersion string, limit int, resolvable bool) ([]versionRow, error) {
	query := `SELECT ` + versionColumns + ` FROM registry_module_versions WHERE module_id = $1
		AND ($2::bytea IS NULL OR (sort_key, version) < ($2, $3))
		AND (NOT $4 OR (status = 'ok' AND revoked_at IS NULL))
		ORDER BY sort_key DESC, version DESC`
	args := []any{moduleID, afterKey, afterVersion, resolvable}
	if limit > 0 {
		query += ` LIMIT $5`
		args = append(args, limit+1)
	}
	var rows []versionRow
	if err := sqlx.SelectContext(ctx, q, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("listing registry module versions: %w", err)
	}
	return rows, nil
}

// publishedArchive is what a version's upload recorded.
type publishedArchive struct {
	BlobKey   string
	SHA256    string
	Bytes     int64
	Facts     *Facts
	ErrorCode string // "" when published
	Message   string
}

func recordArchive(ctx context.Context, tx *sqlx.Tx, versionID string, a publishedArchive, at time.Time) error {
	if a.ErrorCode != "" {
		_, err := tx.ExecContext(ctx, `
			UPDATE registry_module_versions SET status = 'errored', error_code = $2, error_message = $3,
			       archive_sha256 = $4, archive_bytes = $5
			 WHERE id = $1`, versionID, a.ErrorCode, a.Message, nullString(a.SHA256), nullInt(a.Bytes))
		if err != nil {
			return fmt.Errorf("recording errored registry module version: %w", err)
		}
		return nil
	}
	facts, err := json.Marshal(a.Facts)
	if err != nil {
		return fmt.Errorf("encoding registry module facts: %w", err)
	}
	_, err = tx.ExecContext(ctx, `
		UPDATE registry_module_versions SET status = 'ok', blob_key = $2, archive_sha256 = $3, archive_bytes = $4,
		       facts = $5, published_at = $6
		 WHERE id = $1`, versionID, a.BlobKey, a.SHA256, a.Bytes, string(facts), at)
	if err != nil {
		return fmt.Errorf("recording published registry module version: %w", err)
	}
	return nil
}

func versionFacts(ctx context.Context, q sqlx.QueryerContext, versionID string) (Facts, error) {
	var raw []byte
	err := sqlx.GetContext(ctx, q, &raw, `SELECT facts FROM registry_module_versions WHERE id = $1 AND facts IS NOT NULL`, versionID)
	if errors.Is(err, sql.ErrNoRows) {
		return Facts{}, fault.ErrNotFound
	}
	if err != nil {
		return Facts{}, fmt.Errorf("reading registry module facts: %w", err)
	}
	var f Facts
	if err := json.Unmarshal(raw, &f); err != nil {
		return Facts{}, fmt.Errorf("decoding registry module facts: %w", err)
	}
	return f, nil
}

func setDeprecation(ctx context.Context, tx *sqlx.Tx, versionID string, d *Deprecation) error {
	var reason, link, by any
	var at any
	if d != nil {
		reason, link, at, by = d.Reason, nullString(d.Link), d.At, d.By
	}
	_, err := tx.ExecContext(ctx, `
		UPDATE registry_module_versions SET deprecated_reason = $2, deprecated_link = $3, deprecated_at = $4,
		       deprecated_by = $5 WHERE id = $1`, versionID, reason, link, at, by)
	if err != nil {
		return fmt.Errorf("updating registry module version deprecation: %w", err)
	}
	return nil
}

func setRevocation(ctx context.Context, tx *sqlx.Tx, versionID string, r *Revocation) error {
	var reason, at, by any
	if r != nil {
		reason, at, by = r.Reason, r.At, r.By
	}
	_, err := tx.ExecContext(ctx, `
		UPDATE registry_module_versions SET revoked_reason = $2, revoked_at = $3, revoked_by = $4 WHERE id = $1`,
		versionID, reason, at, by)
	if err != nil {
		return fmt.Errorf("updating registry module version revocation: %w", err)
	}
	return nil
}

func deleteVersionRow(ctx context.Context, tx *sqlx.Tx, versionID string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM registry_module_versions WHERE id = $1`, versionID); err != nil {
		return fmt.Errorf("deleting registry module version: %w", err)
	}
	return nil
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func nullInt(n int64) sql.NullInt64 { return sql.NullInt64{Int64: n, Valid: n != 0} }
