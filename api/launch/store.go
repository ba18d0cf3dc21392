package launch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/fault"
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

// admissionFacts reads, in one statement, the control version in force (0
// when none exists) and the subject's active suspensions.
func admissionFacts(ctx context.Context, q sqlx.QueryerContext, s Subject) (int, Suspension, error) {
	var out struct {
		Version      int  `db:"version"`
		Organization bool `db:"organization"`
		Workspace    bool `db:"workspace"`
	}
	err := sqlx.GetContext(ctx, q, &out, `
		SELECT
			COALESCE((SELECT max(version) FROM launch_control_versions), 0) AS version,
			EXISTS (SELECT 1 FROM suspensions WHERE organization_id = $1 AND workspace_id IS NULL AND lifted_at IS NULL) AS organization,
			EXISTS (SELECT 1 FROM suspensions WHERE organization_id = $1 AND workspace_id = $2 AND lifted_at IS NULL) AS workspace`,
		s.OrganizationID, s.WorkspaceID)
	if err != nil {
		return 0, Suspension{}, fmt.Errorf("reading admission facts: %w", err)
	}
	return out.Version, Suspension{Organization: out.Organization, Workspace: out.Workspace}, nil
}

// SuspensionRecord is one suspension, active or lifted.
type SuspensionRecord struct {
	ID             string     `db:"id" json:"id"`
	OrganizationID string     `db:"organization_id" json:"organization_id"`
	WorkspaceID    *string    `db:"workspace_id" json:"workspace_id"`
	Reason         string     `db:"reason" json:"reason"`
	Actor          string     `db:"actor" json:"actor"`
	CreatedAt      time.Time  `db:"created_at" json:"created_at"`
	LiftedAt       *time.Time `db:"lifted_at" json:"lifted_at"`
	LiftedBy       *string    `db:"lifted_by" json:"lifted_by"`
	IdempotencyKey string     `db:"idempotency_key" json:"-"`
}

const suspensionColumns = `id, organization_id, workspace_id, reason, actor, created_at, lifted_at, lifted_by, idempotency_key`

func suspensionByKey(ctx context.Context, q sqlx.QueryerContext, key string) (*SuspensionRecord, error) {
	var r SuspensionRecord
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+suspensionColumns+` FROM suspensions WHERE idempotency_key = $1`, key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading suspension: %w", err)
	}
	return &r, nil
}

func suspensionByID(ctx context.Context, q sqlx.QueryerContext, suspensionID string) (SuspensionRecord, error) {
	var r SuspensionRecord
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+suspensionColumns+` FROM suspensions WHERE id = $1 FOR UPDATE`, suspensionID)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fault.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("reading suspension: %w", err)
	}
	return r, nil
}

func insertSuspension(ctx context.Context, q sqlx.ExtContext, r SuspensionRecord, requestID string) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO suspensions (id, organization_id, workspace_id, reason, actor, request_id, idempotency_key, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		r.ID, r.OrganizationID, r.WorkspaceID, r.Reason, r.Actor, requestID, r.IdempotencyKey, r.CreatedAt)
	if err != nil {
		return fmt.Errorf("writing suspension: %w", err)
	}
	return nil
}

func liftSuspension(ctx context.Context, q sqlx.ExtContext, suspensionID, actor string) error {
	_, err := q.ExecContext(ctx, `UPDATE suspensions SET lifted_at = now(), lifted_by = $2 WHERE id = $1 AND lifted_at IS NULL`,
		suspensionID, actor)
	if err != nil {
		return fmt.Errorf("lifting suspension: %w", err)
	}
	return nil
}

func organizationExists(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) (bool, error) {
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
