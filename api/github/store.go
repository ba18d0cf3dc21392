package github

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/fault"
)

const deliveryColumns = `delivery_id, kind, event, action, installation_id, repository_id, payload_sha256, result, outcome,
	ingestion_ids, received_at, settled_at`

func deliveryByID(ctx context.Context, q sqlx.QueryerContext, deliveryID string) (*Delivery, error) {
	var d Delivery
	err := sqlx.GetContext(ctx, q, &d, `SELECT `+deliveryColumns+` FROM github_deliveries WHERE delivery_id = $1`, deliveryID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading delivery: %w", err)
	}
	return &d, nil
}

// insertDelivery records a delivery once; false means another request
// recorded the same ID first.
func insertDelivery(ctx context.Context, tx *sqlx.Tx, d Delivery) (bool, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO github_deliveries (`+deliveryColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (delivery_id) DO NOTHING`,
		d.DeliveryID, d.Kind, d.Event, d.Action, d.InstallationID, d.RepositoryID, d.PayloadSHA256, d.Result, d.Outcome,
		d.IngestionIDs, d.ReceivedAt, d.SettledAt)
	if err != nil {
		return false, fmt.Errorf("recording delivery: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// readFence reads an installation's fence without locking; 0 when no
// lifecycle event or binding has touched it.
func readFence(ctx context.Context, q sqlx.QueryerContext, installationID int64) (int64, error) {
	var f int64
	err := sqlx.GetContext(ctx, q, &f, `SELECT fence FROM github_installation_fences WHERE installation_id = $1`, installationID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading installation fence: %w", err)
	}
	return f, nil
}

// fenceRow is an installation's fence, locked for the transaction.
type fenceRow struct {
	Fence     int64      `db:"fence"`
	RevokedAt *time.Time `db:"revoked_at"`
}

// lockFence creates the fence row if needed and locks it.
func lockFence(ctx context.Context, tx *sqlx.Tx, installationID int64, now time.Time) (fenceRow, error) {
	if _, err := tx.ExecContext(ctx, `INSERT INTO github_installation_fences (installation_id, updated_at) VALUES ($1, $2)
		ON CONFLICT (installation_id) DO NOTHING`, installationID, now); err != nil {
		return fenceRow{}, fmt.Errorf("creating installation fence: %w", err)
	}
	var f fenceRow
	if err := sqlx.GetContext(ctx, tx, &f, `SELECT fence, revoked_at FROM github_installation_fences
		WHERE installation_id = $1 FOR UPDATE`, installationID); err != nil {
		return fenceRow{}, fmt.Errorf("locking installation fence: %w", err)
	}
	return f, nil
}

func advanceFence(ctx context.Context, tx *sqlx.Tx, installationID int64, revoke bool, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE github_installation_fences SET fence = fence + 1, updated_at = $2,
		revoked_at = CASE WHEN $3 THEN coalesce(revoked_at, $2) ELSE revoked_at END WHERE installation_id = $1`,
		installationID, now, revoke)
	if err != nil {
		return fmt.Errorf("advancing installation fence: %w", err)
	}
	return nil
}

const installationColumns = `installation_id, organization_id, account_login, account_id, status, connected_at, suspended_at,
	revoked_at, updated_at`

func installationByID(ctx context.Context, q sqlx.QueryerContext, installationID int64, forUpdate bool) (*Installation, error) {
	query := `SELECT ` + installationColumns + ` FROM github_installations WHERE installation_id = $1`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var in Installation
	err := sqlx.GetContext(ctx, q, &in, query, installationID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading installation: %w", err)
	}
	return &in, nil
}

// liveInstallation is the organization's installation that is not
// revoked, if any.
func liveInstallation(ctx context.Context, q sqlx.QueryerContext, organizationID string) (*Installation, error) {
	var in Installation
	err := sqlx.GetContext(ctx, q, &in, `SELECT `+installationColumns+` FROM github_installations
		WHERE organization_id = $1 AND status <> 'revoked'`, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading installation: %w", err)
	}
	return &in, nil
}

func insertInstallation(ctx context.Context, tx *sqlx.Tx, in Installation) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO github_installations (`+installationColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, in.InstallationID, in.OrganizationID, in.AccountLogin, in.AccountID,
		in.Status, in.ConnectedAt, in.SuspendedAt, in.RevokedAt, in.UpdatedAt)
	if err != nil {
		return fmt.Errorf("binding installation: %w", err)
	}
	return nil
}

func saveInstallationStatus(ctx context.Context, tx *sqlx.Tx, in Installation) error {
	_, err := tx.ExecContext(ctx, `UPDATE github_installations SET status = $2, suspended_at = $3, revoked_at = $4,
		account_login = $5, updated_at = $6 WHERE installation_id = $1`,
		in.InstallationID, in.Status, in.SuspendedAt, in.RevokedAt, in.AccountLogin, in.UpdatedAt)
	if err != nil {
		return fmt.Errorf("updating installation: %w", err)
	}
	return nil
}

// reconcileRepositories makes the installation's selected set exactly
// repos, keeping deselected rows as history. A repository already owned
// by another organization is left where it is (fail closed) and reported.
func reconcileRepositories(ctx context.Context, tx *sqlx.Tx, in Installation, repos []ProviderRepository, now time.Time) ([]int64, error) {
	ids := make([]int64, 0, len(repos))
	var refused []int64
	for _, r := range repos {
		res, err := tx.ExecContext(ctx, `INSERT INTO github_repositories
			(repository_id, installation_id, organization_id, owner, name, selected, updated_at)
			VALUES ($1, $2, $3, $4, $5, true, $6)
			ON CONFLICT (repository_id) DO UPDATE SET installation_id = EXCLUDED.installation_id, owner = EXCLUDED.owner,
				name = EXCLUDED.name, selected = true, updated_at = EXCLUDED.updated_at
			WHERE github_repositories.organization_id = EXCLUDED.organization_id`,
			r.ID, in.InstallationID, in.OrganizationID, r.Owner, r.Name, now)
		if err != nil {
			return nil, fmt.Errorf("selecting repository: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			refused = append(refused, r.ID)
			continue
		}
		ids = append(ids, r.ID)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE github_repositories SET selected = false, updated_at = $3
		WHERE installation_id = $1 AND selected AND NOT (repository_id = ANY($2))`, in.InstallationID, pq.Array(ids), now); err != nil {
		return nil, fmt.Errorf("deselecting repositories: %w", err)
	}
	return refused, nil
}

func deselectAll(ctx context.Context, tx *sqlx.Tx, installationID int64, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE github_repositories SET selected = false, updated_at = $2
		WHERE installation_id = $1 AND selected`, installationID, now)
	if err != nil {
		return fmt.Errorf("deselecting repositories: %w", err)
	}
	return nil
}

// selectedRepository is a repository selected in the organization's
// connected installation.
func selectedRepository(ctx context.Context, q sqlx.QueryerContext, organizationID string, repositoryID int64) (*Repository, error) {
	var r Repository
	err := sqlx.GetContext(ctx, q, &r, `SELECT r.repository_id, r.installation_id, r.organization_id, r.owner, r.name,
			r.selected, r.updated_at
		FROM github_repositories r JOIN github_installations i ON i.installation_id = r.installation_id
		WHERE r.repository_id = $1 AND r.organization_id = $2 AND r.selected AND i.status = 'connected'
			AND i.organization_id = r.organization_id`, repositoryID, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading repository: %w", err)
	}
	return &r, nil
}

func listSelectedRepositories(ctx context.Context, q sqlx.QueryerContext, organizationID string) ([]Repository, error) {
	var rs []Repository
	err := sqlx.SelectContext(ctx, q, &rs, `SELECT r.repository_id, r.installation_id, r.organization_id, r.owner, r.name,
			r.selected, r.updated_at
		FROM github_repositories r JOIN github_installations i ON i.installation_id = r.installation_id
		WHERE r.organization_id = $1 AND r.selected AND i.status = 'connected' ORDER BY r.owner, r.name LIMIT 1000`, organizationID)
	if err != nil {
		return nil, fmt.Errorf("listing repositories: %w", err)
	}
	return rs, nil
}

const settingsColumns = `id, organization_id, workspace_id, version, installation_id, repository_id, repository_owner,
	repository_name, tracked_branch, working_directory, trigger_paths, speculative_credential_version_id, fork_pull_requests,
	created_by_kind, created_by_id, created_at`

func insertSettings(ctx context.Context, tx *sqlx.Tx, s SourceSettings) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO workspace_source_settings (`+settingsColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		s.ID, s.OrganizationID, s.WorkspaceID, s.Version, s.InstallationID, s.RepositoryID, s.RepositoryOwner,
		s.RepositoryName, s.TrackedBranch, s.WorkingDirectory, s.TriggerPaths, s.SpeculativeCredentialVersionID,
		s.ForkPullRequests, s.CreatedByKind, s.CreatedByID, s.CreatedAt)
	if err != nil {
		return fmt.Errorf("inserting source settings: %w", err)
	}
	return nil
}

// settingsHistory lists a workspace's source settings, newest first.
func settingsHistory(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string, limit int) ([]SourceSettings, error) {
	var out []SourceSettings
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+settingsColumns+` FROM workspace_source_settings
		WHERE organization_id = $1 AND workspace_id = $2 ORDER BY version DESC LIMIT $3`, organizationID, workspaceID, limit)
	if err != nil {
		return nil, fmt.Errorf("listing source settings: %w", err)
	}
	return out, nil
}

func settingsByID(ctx context.Context, q sqlx.QueryerContext, id string) (SourceSettings, error) {
	var s SourceSettings
	err := sqlx.GetContext(ctx, q, &s, `SELECT `+settingsColumns+` FROM workspace_source_settings WHERE id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return SourceSettings{}, fault.ErrNotFound
	}
	if err != nil {
		return SourceSettings{}, fmt.Errorf("reading source settings: %w", err)
	}
	return s, nil
}

// trackingSettings are the current settings of every workspace tracking a
// repository, in the organization that owns it.
func trackingSettings(ctx context.Context, q sqlx.QueryerContext, organizationID string, repositoryID int64) ([]SourceSettings, error) {
	var out []SourceSettings
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+settingsColumns+` FROM (
			SELECT DISTINCT ON (workspace_id) * FROM workspace_source_settings
			WHERE organization_id = $1 ORDER BY workspace_id, version DESC
		) current WHERE repository_id = $2 ORDER BY workspace_id`, organizationID, repositoryID)
	if err != nil {
		return nil, fmt.Errorf("reading tracking workspaces: %w", err)
	}
	return out, nil
}

const ingestionColumns = `id, organization_id, workspace_id, identity, source_settings_id, trigger, installation_id,
	repository_id, repository_owner, repository_name, ref, head_sha, pushed_paths, pull_number, base_ref, head_ref, fork,
	head_repository_owner, head_repository_name, status, held_reason, held_at, plan_approved_by, plan_approved_at,
	failure_code, commit_sha, commit_message, configuration_version_id, archive_sha256, configuration_artifact_id, run_id,
	created_at, settled_at`

// createOrReuseIngestion inserts an ingestion unless the workspace already
// has one for the same source event; created reports which.
func createOrReuseIngestion(ctx context.Context, tx *sqlx.Tx, in Ingestion) (string, bool, error) {
	var id string
	err := sqlx.GetContext(ctx, tx, &id, `INSERT INTO source_ingestions (id, organization_id, workspace_id, identity,
			source_settings_id, trigger, installation_id, repository_id, repository_owner, repository_name, ref, head_sha,
			pushed_paths, pull_number, base_ref, head_ref, fork, head_repository_owner, head_repository_name, status, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, 'pending', $20)
		ON CONFLICT (workspace_id, identity) DO NOTHING RETURNING id`,
		in.ID, in.OrganizationID, in.WorkspaceID, in.Identity, in.SourceSettingsID, in.Trigger, in.InstallationID,
		in.RepositoryID, in.RepositoryOwner, in.RepositoryName, in.Ref, in.HeadSHA, in.PushedPaths, in.PullNumber,
		in.BaseRef, in.HeadRef, in.Fork, in.HeadRepositoryOwner, in.HeadRepositoryName, in.CreatedAt)
	if err == nil {
		return id, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", false, fmt.Errorf("creating source ingestion: %w", err)
	}
	err = sqlx.GetContext(ctx, tx, &id, `SELECT id FROM source_ingestions WHERE workspace_id = $1 AND identity = $2`,
		in.WorkspaceID, in.Identity)
	if err != nil {
		return "", false, fmt.Errorf("reading source ingestion: %w", err)
	}
	return id, false, nil
}

func associate(ctx context.Context, tx *sqlx.Tx, deliveryID string, ingestionIDs []string) error {
	for _, id := range ingestionIDs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO source_ingestion_deliveries (delivery_id, ingestion_id) VALUES ($1, $2)
			ON CONFLICT DO NOTHING`, deliveryID, id); err != nil {
			return fmt.Errorf("associating delivery: %w", err)
		}
	}
	return nil
}

func ingestionByID(ctx context.Context, q sqlx.QueryerContext, id string, forUpdate bool) (Ingestion, error) {
	query := `SELECT ` + ingestionColumns + ` FROM source_ingestions WHERE id = $1`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var in Ingestion
	err := sqlx.GetContext(ctx, q, &in, query, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Ingestion{}, fault.ErrNotFound
	}
	if err != nil {
		return Ingestion{}, fmt.Errorf("reading source ingestion: %w", err)
	}
	return in, nil
}

func saveIngestion(ctx context.Context, tx *sqlx.Tx, in Ingestion) error {
	_, err := tx.ExecContext(ctx, `UPDATE source_ingestions SET status = $2, failure_code = $3, commit_sha = $4,
		commit_message = $5, configuration_version_id = $6, archive_sha256 = $7, run_id = $8, settled_at = $9,
		held_reason = $10, held_at = $11, plan_approved_by = $12, plan_approved_at = $13 WHERE id = $1`,
		in.ID, in.Status, in.FailureCode, in.CommitSHA, in.CommitMessage, in.ConfigurationVersionID, in.ArchiveSHA256,
		in.RunID, in.SettledAt, in.HeldReason, in.HeldAt, in.PlanApprovedBy, in.PlanApprovedAt)
	if err != nil {
		return fmt.Errorf("updating source ingestion: %w", err)
	}
	return nil
}

// firstDelivery is the earliest delivery associated with an ingestion.
func firstDelivery(ctx context.Context, q sqlx.QueryerContext, ingestionID string) (string, error) {
	var id string
	err := sqlx.GetContext(ctx, q, &id, `SELECT d.delivery_id FROM source_ingestion_deliveries a
		JOIN github_deliveries d ON d.delivery_id = a.delivery_id WHERE a.ingestion_id = $1
		ORDER BY d.received_at, d.delivery_id LIMIT 1`, ingestionID)
	if err != nil {
		return "", fmt.Errorf("reading ingestion delivery: %w", err)
	}
	return id, nil
}

// workspaceIngestion reads an ingestion of a workspace in the caller's
// organization; another tenant's reads as missing.
func workspaceIngestion(ctx context.Context, q sqlx.QueryerContext, organizationID, id string, forUpdate bool) (Ingestion, error) {
	in, err := ingestionByID(ctx, q, id, forUpdate)
	if err != nil {
		return Ingestion{}, err
	}
	if in.OrganizationID != organizationID {
		return Ingestion{}, fault.ErrNotFound
	}
	return in, nil
}

// heldIngestions lists a page of a workspace's held ingestions, most
// recently held first.
func heldIngestions(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string, page cursor.Page) ([]Ingestion, error) {
	keyset, args := page.Keyset([]any{organizationID, workspaceID}, "held_at", "id")
	var out []Ingestion
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+ingestionColumns+` FROM source_ingestions
		WHERE organization_id = $1 AND workspace_id = $2 AND status = 'held'`+keyset+page.OrderLimit("held_at", "id"), args...)
	if err != nil {
		return nil, fmt.Errorf("listing held ingestions: %w", err)
	}
	return out, nil
}

// recentForkRuns counts a repository's automatic fork-triggered runs
// (those no person approved) created since since.
func recentForkRuns(ctx context.Context, q sqlx.QueryerContext, repositoryID int64, since time.Time) (int, error) {
	var n int
	err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM source_ingestions
		WHERE repository_id = $1 AND fork AND run_id IS NOT NULL AND plan_approved_by IS NULL AND settled_at > $2`,
		repositoryID, since)
	if err != nil {
		return 0, fmt.Errorf("counting fork runs: %w", err)
	}
	return n, nil
}

// lockForkRuns serializes the fork-run throttle of one repository for the
// rest of the transaction: two ingestions deciding at once cannot both see
// room for the last run.
func lockForkRuns(ctx context.Context, tx *sqlx.Tx, repositoryID int64) error {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cairn/fork-runs/' || $1::text, 0))`,
		repositoryID); err != nil {
		return fmt.Errorf("locking the repository's fork runs: %w", err)
	}
	return nil
}
