package launch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

type controlRow struct {
	Version        int            `db:"version"`
	Document       []byte         `db:"document"`
	IdempotencyKey string         `db:"idempotency_key"`
	BeforeDocument sql.NullString `db:"before_document"`
	Reason         string         `db:"reason"`
}

const controlColumns = `version, document, idempotency_key, before_document, reason`

// currentControl reads the control in force: nil when none was ever
// written, ErrMalformed when the stored document does not validate.
func currentControl(ctx context.Context, q sqlx.QueryerContext) (*Control, error) {
	version, doc, err := latestControl(ctx, q)
	if err != nil || doc == nil {
		return nil, err
	}
	c, err := Parse(doc)
	if err != nil {
		return nil, err
	}
	c.Version = version
	return &c, nil
}

// latestControl returns the highest version and its raw document, or 0 and
// nil when no control exists.
func latestControl(ctx context.Context, q sqlx.QueryerContext) (int, []byte, error) {
	var row controlRow
	err := sqlx.GetContext(ctx, q, &row, `
		SELECT `+controlColumns+` FROM launch_control_versions ORDER BY version DESC LIMIT 1`)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("reading launch control: %w", err)
	}
	return row.Version, row.Document, nil
}

func controlByKey(ctx context.Context, q sqlx.QueryerContext, key string) (*controlRow, error) {
	var row controlRow
	err := sqlx.GetContext(ctx, q, &row, `
		SELECT `+controlColumns+` FROM launch_control_versions WHERE idempotency_key = $1`, key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading launch control change: %w", err)
	}
	return &row, nil
}

func insertControl(ctx context.Context, q sqlx.ExtContext, version int, doc, before []byte, ch Change) error {
	// JSON is bound as text: in binary-parameter mode a []byte would be
	// sent as binary jsonb.
	var beforeDoc any
	if before != nil {
		beforeDoc = string(before)
	}
	_, err := q.ExecContext(ctx, `
		INSERT INTO launch_control_versions (version, document, actor, request_id, reason, idempotency_key, before_document)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		version, string(doc), ch.Actor, ch.RequestID, ch.Reason, ch.IdempotencyKey, beforeDoc)
	if err != nil {
		return fmt.Errorf("writing launch control version: %w", err)
	}
	return nil
}

// lockControl serializes control changes so expected-version checks hold.
func lockControl(ctx context.Context, tx *sqlx.Tx) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cairn/launch-control', 0))`)
	if err != nil {
		return fmt.Errorf("locking launch control: %w", err)
	}
	return nil
}

// latestVersion is the version in force (0 when no control exists).
func latestVersion(ctx context.Context, q sqlx.QueryerContext) (int, error) {
	var version int
	if err := sqlx.GetContext(ctx, q, &version, `SELECT COALESCE(max(version), 0) FROM launch_control_versions`); err != nil {
		return 0, fmt.Errorf("reading launch control version: %w", err)
	}
	return version, nil
}

// Facts are a subject's admission facts: the control version in force (0
// when none exists) and whether its organization and workspace are
// suspended now (each subject's newest suspension change says so).
type Facts struct {
	Version               int  `db:"admission_version"`
	OrganizationSuspended bool `db:"admission_organization_suspended"`
	WorkspaceSuspended    bool `db:"admission_workspace_suspended"`
}

// FactsColumns selects the admission facts of the organization and the
// workspace (” for none) that the SQL expressions org and ws name, as the
// columns Facts scans. A query that reads its subject anyway (a run
// token's lookup) reads them in the same round trip (RequireFrom).
func FactsColumns(org, ws string) string {
	return `COALESCE((SELECT max(version) FROM launch_control_versions), 0) AS admission_version,
			COALESCE((SELECT suspended FROM suspension_changes WHERE organization_id = ` + org + ` AND workspace_id = ''
				ORDER BY version DESC LIMIT 1), false) AS admission_organization_suspended,
			` + ws + ` <> '' AND COALESCE((SELECT suspended FROM suspension_changes WHERE organization_id = ` + org + `
				AND workspace_id = ` + ws + ` ORDER BY version DESC LIMIT 1), false) AS admission_workspace_suspended`
}

// admissionFacts reads a subject's admission facts in one statement.
func admissionFacts(ctx context.Context, q sqlx.QueryerContext, s Subject) (Facts, error) {
	var f Facts
	if err := sqlx.GetContext(ctx, q, &f, `SELECT `+FactsColumns("$1", "$2"), s.OrganizationID, s.WorkspaceID); err != nil {
		return Facts{}, fmt.Errorf("reading admission facts: %w", err)
	}
	return f, nil
}

const suspensionColumns = `id, organization_id, workspace_id, version, suspended_before, suspended, reason, actor, request_id,
	created_at, idempotency_key`

// lockSubject serializes suspension changes of one subject, so the
// expected-version check holds against a concurrent change.
func lockSubject(ctx context.Context, tx *sqlx.Tx, organizationID, workspaceID string) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cairn/suspension/' || $1 || '/' || $2, 0))`,
		organizationID, workspaceID)
	if err != nil {
		return fmt.Errorf("locking suspension: %w", err)
	}
	return nil
}

func suspensionByKey(ctx context.Context, q sqlx.QueryerContext, key string) (*SuspensionRecord, error) {
	var r SuspensionRecord
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+suspensionColumns+` FROM suspension_changes WHERE idempotency_key = $1`, key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading suspension change: %w", err)
	}
	return &r, nil
}

// currentSuspension is the subject's newest version and state (0 and not
// suspended when it has no history).
func currentSuspension(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) (int, bool, error) {
	var row struct {
		Version   int  `db:"version"`
		Suspended bool `db:"suspended"`
	}
	err := sqlx.GetContext(ctx, q, &row, `SELECT version, suspended FROM suspension_changes
		WHERE organization_id = $1 AND workspace_id = $2 ORDER BY version DESC LIMIT 1`, organizationID, workspaceID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading suspension: %w", err)
	}
	return row.Version, row.Suspended, nil
}

// maxSuspensionHistory bounds the changes one read returns.
const maxSuspensionHistory = 100

func suspensionHistory(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) ([]SuspensionRecord, error) {
	out := []SuspensionRecord{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+suspensionColumns+` FROM suspension_changes
		WHERE organization_id = $1 AND workspace_id = $2 ORDER BY version DESC LIMIT $3`,
		organizationID, workspaceID, maxSuspensionHistory)
	if err != nil {
		return nil, fmt.Errorf("reading suspension history: %w", err)
	}
	return out, nil
}

func insertSuspension(ctx context.Context, q sqlx.ExtContext, r SuspensionRecord) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO suspension_changes (id, organization_id, workspace_id, version, suspended_before, suspended, reason, actor,
			request_id, idempotency_key, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		r.ID, r.OrganizationID, r.WorkspaceID, r.Version, r.SuspendedBefore, r.Suspended, r.Reason, r.Actor, r.RequestID,
		r.IdempotencyKey, r.CreatedAt)
	if err != nil {
		return fmt.Errorf("writing suspension change: %w", err)
	}
	return nil
}

func subjectExists(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) (bool, error) {
	var ok bool
	err := sqlx.GetContext(ctx, q, &ok, `
		SELECT EXISTS (SELECT 1 FROM organizations WHERE id = $1)
		   AND ($2 = '' OR EXISTS (SELECT 1 FROM workspaces WHERE organization_id = $1 AND id = $2))`,
		organizationID, workspaceID)
	if err != nil {
		return false, fmt.Errorf("checking suspension target: %w", err)
	}
	return ok, nil
}

// acquireLease grants a lease unless the region is at its ceiling. The
// region row lock serializes grants, so two workers can never both take
// the last slot; the holder's unique column makes a replay find its
// existing lease instead of reserving twice.
func acquireLease(ctx context.Context, tx *sqlx.Tx, region string, h LeaseHolder, leaseID string, ceiling int) (bool, error) {
	column, holder, err := h.column()
	if err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `SELECT region FROM capacity_regions WHERE region = $1 FOR UPDATE`, region); err != nil {
		return false, fmt.Errorf("locking region capacity: %w", err)
	}
	var existing int
	if err := tx.GetContext(ctx, &existing, `SELECT count(*) FROM capacity_leases WHERE `+column+` = $1`, holder); err != nil {
		return false, fmt.Errorf("reading lease: %w", err)
	}
	if existing > 0 {
		return true, nil
	}
	var active int
	if err := tx.GetContext(ctx, &active, `SELECT count(*) FROM capacity_leases WHERE region = $1 AND released_at IS NULL`, region); err != nil {
		return false, fmt.Errorf("counting leases: %w", err)
	}
	if active >= ceiling {
		return false, nil
	}
	// clock_timestamp, not the caller's clock or the transaction start:
	// the grant happens only now, after the region lock was waited for, so
	// lease intervals never appear to overlap when grants were serialized.
	if _, err := tx.ExecContext(ctx, `INSERT INTO capacity_leases (id, region, `+column+`, acquired_at) VALUES ($1, $2, $3, clock_timestamp())`,
		leaseID, region, holder); err != nil {
		return false, fmt.Errorf("inserting lease: %w", err)
	}
	return true, nil
}

func releaseLease(ctx context.Context, q sqlx.ExtContext, h LeaseHolder) error {
	column, holder, err := h.column()
	if err != nil {
		return err
	}
	_, err = q.ExecContext(ctx, `UPDATE capacity_leases SET released_at = greatest(clock_timestamp(), acquired_at)
		WHERE `+column+` = $1 AND released_at IS NULL`, holder)
	if err != nil {
		return fmt.Errorf("releasing lease: %w", err)
	}
	return nil
}
