package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"

	"github.com/cairnhq/cairn/api/dispatch"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/idempotency"
	"github.com/cairnhq/cairn/api/platform/telemetry"
	"github.com/cairnhq/cairn/api/retention"
	"github.com/cairnhq/cairn/api/sweep"
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

// signInThrottleRetention is how long a throttle row is kept after its
// last attempt: by then every policy has drained or nearly so.
const signInThrottleRetention = 24 * time.Hour

// invitationRetention is how long closed and expired invitations stay
// visible after they closed; the audit events outlive them.
const invitationRetention = 30 * 24 * time.Hour

// SignInFailureSweepArgs schedules deletion of old sign-in throttle rows,
// of long-closed invitations, of ended OAuth grants and unused clients, and
// of expired federated sign-in flows, codes and SSO test results (anyone
// can start a flow, so they must not pile up).
type SignInFailureSweepArgs struct{}

// Kind implements river.JobArgs.
func (SignInFailureSweepArgs) Kind() string { return "sign_in_failure_sweep" }

// SignInFailureSweepWorker deletes sign-in throttle rows and invitations
// past retention.
type SignInFailureSweepWorker struct {
	river.WorkerDefaults[SignInFailureSweepArgs]
	DB *sqlx.DB
}

// Work implements river.Worker.
func (w *SignInFailureSweepWorker) Work(ctx context.Context, _ *river.Job[SignInFailureSweepArgs]) error {
	now := time.Now()
	if _, err := identity.SweepThrottles(ctx, w.DB, now.Add(-signInThrottleRetention)); err != nil {
		return err
	}
	if _, err := identity.SweepInvitations(ctx, w.DB, now.Add(-invitationRetention)); err != nil {
		return err
	}
	if _, err := retention.OAuthRecords(ctx, w.DB, now); err != nil {
		return err
	}
	_, err := retention.SignInFlows(ctx, w.DB, now)
	return err
}

// BlobSweepArgs schedules the orphan sweep of artifact storage.
type BlobSweepArgs struct{}

// Kind implements river.JobArgs.
func (BlobSweepArgs) Kind() string { return "blob_orphan_sweep" }

// InsertOpts keeps one sweep per period however many workers enqueue it.
func (BlobSweepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByPeriod: time.Minute}}
}

// BlobSweepWorker deletes objects no committed row references.
type BlobSweepWorker struct {
	river.WorkerDefaults[BlobSweepArgs]
	Sweep  *sweep.Service
	Logger *slog.Logger
}

// Work implements river.Worker.
func (w *BlobSweepWorker) Work(ctx context.Context, _ *river.Job[BlobSweepArgs]) error {
	started := time.Now()
	report, err := w.Sweep.Sweep(ctx)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	_ = telemetry.Emit(ctx, w.Logger, telemetry.Event{Name: "blob_sweep_finished", Fields: map[string]telemetry.Value{
		"outcome":  telemetry.Enum(outcome, "ok", "error"),
		"duration": telemetry.Duration(time.Since(started)),
		"listed":   telemetry.Count(int64(report.Listed)),
		"deleted":  telemetry.Count(int64(report.Deleted)),
		"kept":     telemetry.Count(int64(report.Kept)),
		"foreign":  telemetry.Count(int64(report.Foreign)),
	}})
	return err
}

// Timeout lets a sweep of a large bucket finish.
func (w *BlobSweepWorker) Timeout(*river.Job[BlobSweepArgs]) time.Duration { return time.Hour }

// DispatchReconcileArgs schedules one tick of the workflow dispatch
// reconciler.
type DispatchReconcileArgs struct{}

// Kind implements river.JobArgs.
func (DispatchReconcileArgs) Kind() string { return "workflow_dispatch_reconciler" }

// InsertOpts drops a second insert within the same second (several workers
// each enqueue the periodic job); the row claims keep concurrent ticks
// from redelivering the same record.
func (DispatchReconcileArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByPeriod: time.Second}}
}

// DispatchReconcileWorker redelivers the dispatches whose jobs were lost or
// exhausted, of every kind it has a handler for (policy publications,
// source ingestions), in one bounded tick.
type DispatchReconcileWorker struct {
	river.WorkerDefaults[DispatchReconcileArgs]
	DB       *sqlx.DB
	Handlers map[string]dispatch.Handler
	Logger   *slog.Logger
}

// Work runs one reconciliation tick.
func (w *DispatchReconcileWorker) Work(ctx context.Context, _ *river.Job[DispatchReconcileArgs]) error {
	report, err := dispatch.Reconcile(ctx, w.DB, time.Now(), w.Handlers)
	if report.Claimed > 0 || err != nil {
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		_ = telemetry.Emit(ctx, w.Logger, telemetry.Event{Name: "dispatch_reconciled", Fields: map[string]telemetry.Value{
			"outcome":     telemetry.Enum(outcome, "ok", "error"),
			"claimed":     telemetry.Count(int64(report.Claimed)),
			"redelivered": telemetry.Count(int64(report.Redelivered)),
			"waiting":     telemetry.Count(int64(report.Waiting)),
			"closed":      telemetry.Count(int64(report.Closed)),
			"failed":      telemetry.Count(int64(report.Failed)),
		}})
	}
	return err
}
