package checkrun

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// publication is a check run reservation and what it owes. Its owner is a
// run or, for an ingestion held before any run exists, that ingestion;
// ExternalID is the owner's ID either way.
type publication struct {
	ExternalID      string  `db:"external_id"`
	RunID           *string `db:"run_id"`
	IngestionID     *string `db:"ingestion_id"`
	OrganizationID  string  `db:"organization_id"`
	InstallationID  int64   `db:"installation_id"`
	RepositoryID    int64   `db:"repository_id"`
	RepositoryOwner string  `db:"repository_owner"`
	RepositoryName  string  `db:"repository_name"`
	HeadSHA         string  `db:"head_sha"`
	CheckName       string  `db:"check_name"`
	CheckRunID      *int64  `db:"check_run_id"`
	Desired         []byte  `db:"desired"`
	DesiredDigest   []byte  `db:"desired_digest"`
	PublishedDigest []byte  `db:"published_digest"`
	Pending         bool    `db:"pending"`
	CreateSent      bool    `db:"create_sent"`
	LeaseToken      *string `db:"lease_token"`
	// Leased is whether another sync's lease is still live, on the
	// database clock.
	Leased   bool `db:"leased"`
	Failures int  `db:"failures"`
}

func (p publication) target() Target {
	return Target{InstallationID: p.InstallationID, RepositoryID: p.RepositoryID, RepositoryOwner: p.RepositoryOwner,
		RepositoryName: p.RepositoryName, HeadSHA: p.HeadSHA}
}

// syncArgs is the job that publishes this publication.
func (p publication) syncArgs() SyncArgs {
	if p.IngestionID != nil {
		return SyncArgs{IngestionID: *p.IngestionID}
	}
	return SyncArgs{RunID: p.ExternalID}
}

const publicationColumns = `external_id, run_id, ingestion_id, organization_id, installation_id, repository_id,
	repository_owner, repository_name, head_sha, check_name, check_run_id, desired, desired_digest, published_digest, pending,
	create_sent, lease_token, coalesce(lease_expires_at > now(), false) AS leased, failures`

// publicationForUpdate locks the publication of a run or held ingestion;
// nil when it has no check target.
func publicationForUpdate(ctx context.Context, tx *sqlx.Tx, externalID string) (*publication, error) {
	var p publication
	err := tx.GetContext(ctx, &p, `SELECT `+publicationColumns+` FROM check_run_publications WHERE external_id = $1 FOR UPDATE`,
		externalID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading check run publication: %w", err)
	}
	return &p, nil
}

func insertPublication(ctx context.Context, tx *sqlx.Tx, p publication) (bool, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO check_run_publications (external_id, run_id, ingestion_id, organization_id,
		installation_id, repository_id, repository_owner, repository_name, head_sha, check_name, desired, desired_digest, pending)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, true) ON CONFLICT (external_id) DO NOTHING`,
		p.ExternalID, p.RunID, p.IngestionID, p.OrganizationID, p.InstallationID, p.RepositoryID, p.RepositoryOwner, p.RepositoryName, p.HeadSHA,
		p.CheckName, string(p.Desired), p.DesiredDigest)
	if err != nil {
		return false, fmt.Errorf("reserving check run publication: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func setDesired(ctx context.Context, tx *sqlx.Tx, externalID string, desired, digest []byte) (pending bool, err error) {
	err = tx.GetContext(ctx, &pending, `UPDATE check_run_publications SET desired = $2, desired_digest = $3,
		pending = published_digest IS DISTINCT FROM $3, updated_at = now() WHERE external_id = $1 RETURNING pending`,
		externalID, string(desired), digest)
	if err != nil {
		return false, fmt.Errorf("updating check run payload: %w", err)
	}
	return pending, nil
}

// claim takes the lease; create_sent is set before any create can be
// sent, so whoever comes next searches before creating.
func claim(ctx context.Context, tx *sqlx.Tx, externalID, token string, leaseSeconds float64) error {
	_, err := tx.ExecContext(ctx, `UPDATE check_run_publications SET lease_token = $2,
		lease_expires_at = now() + make_interval(secs => $3), create_sent = create_sent OR check_run_id IS NULL
		WHERE external_id = $1`, externalID, token, leaseSeconds)
	if err != nil {
		return fmt.Errorf("leasing check run publication: %w", err)
	}
	return nil
}

// settle records what the provider accepted, under the lease that sent it;
// the publication stays pending when the run moved on meanwhile.
func settle(ctx context.Context, tx *sqlx.Tx, externalID, token string, checkRunID int64, digest []byte) (held, pending bool, err error) {
	err = tx.GetContext(ctx, &pending, `UPDATE check_run_publications SET check_run_id = $3, published_digest = $4,
		pending = desired_digest IS DISTINCT FROM $4, lease_token = NULL, lease_expires_at = NULL, failures = 0,
		last_error = NULL, updated_at = now() WHERE external_id = $1 AND lease_token = $2 RETURNING pending`,
		externalID, token, checkRunID, digest)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("recording check run publication: %w", err)
	}
	return true, pending, nil
}

// fail releases the lease and counts the failure. A check run ID found
// and verified on the way is kept even though the write after it failed.
func fail(ctx context.Context, conn *sqlx.DB, externalID, token string, checkRunID *int64, code string) error {
	_, err := conn.ExecContext(ctx, `UPDATE check_run_publications SET check_run_id = coalesce(check_run_id, $3),
		lease_token = NULL, lease_expires_at = NULL, failures = failures + 1, last_error = $4, updated_at = now()
		WHERE external_id = $1 AND lease_token = $2`, externalID, token, checkRunID, code)
	if err != nil {
		return fmt.Errorf("recording check run failure: %w", err)
	}
	return nil
}

// duePublications lists pending publications with no live lease whose
// backoff has passed, oldest first.
func duePublications(ctx context.Context, conn *sqlx.DB, backoffSeconds float64, limit int) ([]string, error) {
	var ids []string
	err := conn.SelectContext(ctx, &ids, `SELECT external_id FROM check_run_publications
		WHERE pending AND (lease_expires_at IS NULL OR lease_expires_at < now())
		AND updated_at <= now() - make_interval(secs => least(failures, 10) * $1::double precision)
		ORDER BY updated_at LIMIT $2`, backoffSeconds, limit)
	if err != nil {
		return nil, fmt.Errorf("listing pending check runs: %w", err)
	}
	return ids, nil
}
