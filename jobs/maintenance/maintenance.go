package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"

	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/idempotency"
)

// sweepBatch bounds one DELETE so a large backlog never holds long locks.
const sweepBatch = 1000

// IdempotencySweepArgs schedules deletion of idempotency records older than
// their 24-hour lifetime.
type IdempotencySweepArgs struct{}

// Kind implements river.JobArgs.
func (IdempotencySweepArgs) Kind() string { return "idempotency_sweep" }

// IdempotencySweepWorker deletes expired idempotency records in batches.
type IdempotencySweepWorker struct {
	river.WorkerDefaults[IdempotencySweepArgs]
	DB     *sqlx.DB
	Logger *slog.Logger
}

// Work implements river.Worker.
func (w *IdempotencySweepWorker) Work(ctx context.Context, _ *river.Job[IdempotencySweepArgs]) error {
	var total int64
	for {
		n, err := idempotency.SweepExpired(ctx, w.DB, sweepBatch)
		if err != nil {
			return fmt.Errorf("sweeping idempotency records: %w", err)
		}
		total += n
		if n < sweepBatch {
			break
		}
	}
	if total > 0 {
		w.Logger.InfoContext(ctx, "expired idempotency records deleted", "count", total)
	}
	return nil
}

// signInFailureRetention is how long failed sign-ins are kept: well past
// the longest rate-limit window.
const signInFailureRetention = 24 * time.Hour

// SignInFailureSweepArgs schedules deletion of old failed-sign-in records.
type SignInFailureSweepArgs struct{}

// Kind implements river.JobArgs.
func (SignInFailureSweepArgs) Kind() string { return "sign_in_failure_sweep" }

// SignInFailureSweepWorker deletes failed-sign-in records past retention.
type SignInFailureSweepWorker struct {
	river.WorkerDefaults[SignInFailureSweepArgs]
	DB *sqlx.DB
}

// Work implements river.Worker.
func (w *SignInFailureSweepWorker) Work(ctx context.Context, _ *river.Job[SignInFailureSweepArgs]) error {
	_, err := identity.SweepSignInFailures(ctx, w.DB, time.Now().Add(-signInFailureRetention))
	return err
}
