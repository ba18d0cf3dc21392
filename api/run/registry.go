package run

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
)

// RegistryModule is one private registry module version a run's sandboxed
// CLI downloaded in one attempt: evidence of what the run's configuration
// was built from. It names the version as it was when downloaded and is
// kept when the version is later revoked or deleted.
type RegistryModule struct {
	AttemptID string `db:"attempt_id"`
	Phase     string `db:"phase"`
	// Address is namespace/name/provider.
	Address       string `db:"module_address"`
	Version       string `db:"version"`
	VersionID     string `db:"version_id"`
	ArchiveSHA256 string `db:"archive_sha256"`
	// Deprecated is whether the version was deprecated when downloaded,
	// DeprecationReason the reason it gave (nil: none).
	Deprecated        bool      `db:"deprecated"`
	DeprecationReason *string   `db:"deprecation_reason"`
	DownloadedAt      time.Time `db:"downloaded_at"`
}

// RecordRegistryDownload records that the run token p resolved a registry
// module version to download it, against the attempt the token was issued
// to. Any other principal records nothing. A CLI that asks twice in one
// attempt (a retry, or two module blocks of one version) leaves one row.
func (s *Service) RecordRegistryDownload(ctx context.Context, p access.Principal, m RegistryModule) error {
	if p.Kind != access.KindRun || p.TokenID == "" {
		return nil
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO run_registry_modules (attempt_id, version_id, run_id, organization_id,
		module_address, version, archive_sha256, deprecated, deprecation_reason)
		SELECT t.attempt_id, $2, t.run_id, t.organization_id, $3, $4, $5, $6, $7 FROM run_tokens t
		WHERE t.id = $1 AND t.run_id = $8 AND t.organization_id = $9
		ON CONFLICT (attempt_id, version_id) DO NOTHING`,
		p.TokenID, m.VersionID, m.Address, m.Version, m.ArchiveSHA256, m.Deprecated, m.DeprecationReason, p.ID, p.OrganizationID)
	if err != nil {
		return fmt.Errorf("recording a registry module download: %w", err)
	}
	return nil
}

// RegistryModulesOf returns the registry module versions r's attempts
// downloaded, read through q, in the order they were downloaded.
func (s *Service) RegistryModulesOf(ctx context.Context, q sqlx.QueryerContext, r Run) ([]RegistryModule, error) {
	return registryModules(ctx, q, `m.run_id = $1`, r.ID)
}

// AttemptRegistryModules returns the registry module versions one attempt
// downloaded, in the order it downloaded them.
func (s *Service) AttemptRegistryModules(ctx context.Context, attemptID string) ([]RegistryModule, error) {
	return registryModules(ctx, s.db, `m.attempt_id = $1`, attemptID)
}

func registryModules(ctx context.Context, q sqlx.QueryerContext, where, arg string) ([]RegistryModule, error) {
	out := []RegistryModule{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT m.attempt_id, a.phase, m.module_address, m.version, m.version_id,
		m.archive_sha256, m.deprecated, m.deprecation_reason, m.downloaded_at
		FROM run_registry_modules m JOIN run_attempts a ON a.id = m.attempt_id
		WHERE `+where+` ORDER BY m.downloaded_at, m.module_address, m.version`, arg)
	if err != nil {
		return nil, fmt.Errorf("reading registry module evidence: %w", err)
	}
	return out, nil
}
