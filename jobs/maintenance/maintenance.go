package maintenance

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"

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
