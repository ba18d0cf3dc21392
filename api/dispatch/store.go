package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

const columns = `id, kind, organization_id, subject_id, status, deliveries, starts, checks, next_attempt_at, claimed_until,
	created_at, completed_at`

// Arm records that a kind's job for subjectID was just inserted, in the
// transaction that inserted it. A completed record of the same identity
// (its subject was settled, and now needs its job again) is reopened and
// counts one more delivery; a pending one is left as it is.
func Arm(ctx context.Context, q sqlx.ExecerContext, kind, organizationID, subjectID string, now time.Time) error {
	_, err := q.ExecContext(ctx, `INSERT INTO workflow_dispatches (`+columns+`)
		VALUES ($1, $2, $3, $4, 'pending', 1, 0, 0, $5, NULL, $6, NULL)
		ON CONFLICT (id) DO UPDATE SET status = 'pending', completed_at = NULL, claimed_until = NULL,
			next_attempt_at = EXCLUDED.next_attempt_at, deliveries = workflow_dispatches.deliveries + 1, starts = 0, checks = 0
		WHERE workflow_dispatches.status = 'completed'`,
		ID(kind, subjectID), kind, organizationID, subjectID, now.Add(backoffFirst), now)
	if err != nil {
		return fmt.Errorf("recording workflow dispatch: %w", err)
	}
	return nil
}

// Complete closes a pending record: its subject no longer needs a job.
func Complete(ctx context.Context, q sqlx.ExecerContext, id string, at time.Time) error {
	_, err := q.ExecContext(ctx, `UPDATE workflow_dispatches SET status = 'completed', completed_at = $2, claimed_until = NULL
		WHERE id = $1 AND status = 'pending'`, id, at)
	if err != nil {
		return fmt.Errorf("completing workflow dispatch: %w", err)
	}
	return nil
}

// Started counts a job that really began its work.
func Started(ctx context.Context, q sqlx.ExecerContext, id string) error {
	_, err := q.ExecContext(ctx, `UPDATE workflow_dispatches SET starts = starts + 1 WHERE id = $1 AND status = 'pending'`, id)
	if err != nil {
		return fmt.Errorf("counting workflow dispatch start: %w", err)
	}
	return nil
}

// claimDue claims up to limit records of the given kinds due at now,
// skipping rows another reconciler holds, so two reconcilers never
// redeliver the same record in one window. Times come from the caller's
// clock, not the database's, so tests can let time pass.
func claimDue(ctx context.Context, q sqlx.QueryerContext, kinds []string, now time.Time, limit int) ([]Record, error) {
	records := []Record{}
	err := sqlx.SelectContext(ctx, q, &records, `SELECT `+columns+` FROM workflow_dispatches
		WHERE status = 'pending' AND kind = ANY($3) AND next_attempt_at <= $1 AND (claimed_until IS NULL OR claimed_until < $1)
		ORDER BY next_attempt_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`, now, limit, pq.Array(kinds))
	if err != nil {
		return nil, fmt.Errorf("claiming due dispatches: %w", err)
	}
	return records, nil
}

// checked records one reconciler visit: the claim, the next due time, and
// whether a job was delivered afresh.
func checked(ctx context.Context, q sqlx.ExecerContext, r Record, claimedUntil, nextAttempt time.Time, delivered bool) error {
	added := 0
	if delivered {
		added = 1
	}
	_, err := q.ExecContext(ctx, `UPDATE workflow_dispatches SET checks = checks + 1, deliveries = deliveries + $2,
		claimed_until = $3, next_attempt_at = $4 WHERE id = $1`, r.ID, added, claimedUntil, nextAttempt)
	if err != nil {
		return fmt.Errorf("updating workflow dispatch: %w", err)
	}
	return nil
}
