package checkrun

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"
)

// SyncArgs asks for the publication of one pending check payload: a
// run's, or a held ingestion's (one of the two is set).
type SyncArgs struct {
	RunID       string `json:"run_id,omitempty"`
	IngestionID string `json:"source_ingestion_id,omitempty"`
}

// externalID names the publication: its owner's ID.
func (a SyncArgs) externalID() string {
	if a.IngestionID != "" {
		return a.IngestionID
	}
	return a.RunID
}

// Kind implements river.JobArgs.
func (SyncArgs) Kind() string { return "check_run_sync" }

// SyncWorker runs Sync. A provider failure is returned so River retries
// with its backoff; once River gives up, the reconciler still finds the
// publication pending.
type SyncWorker struct {
	river.WorkerDefaults[SyncArgs]
	Checks *Service
}

// Work implements river.Worker.
func (w *SyncWorker) Work(ctx context.Context, job *river.Job[SyncArgs]) error {
	err := w.Checks.Sync(ctx, job.Args.externalID())
	if errors.Is(err, ErrLeased) {
		// Whoever holds the lease settles or lets it lapse; look again then.
		return river.JobSnooze(w.Checks.opts.Lease)
	}
	return err
}

// Timeout bounds one sync: its provider calls and two short transactions.
func (w *SyncWorker) Timeout(*river.Job[SyncArgs]) time.Duration { return 2 * time.Minute }

// ReconcileArgs schedules the replay of pending check run publications.
type ReconcileArgs struct{}

// Kind implements river.JobArgs.
func (ReconcileArgs) Kind() string { return "check_run_reconcile" }

// ReconcileInterval is how often the reconciler looks for pending
// publications.
const ReconcileInterval = time.Minute

// ReconcileWorker runs Reconcile.
type ReconcileWorker struct {
	river.WorkerDefaults[ReconcileArgs]
	Checks *Service
}

// Work implements river.Worker.
func (w *ReconcileWorker) Work(ctx context.Context, _ *river.Job[ReconcileArgs]) error {
	synced, failed, err := w.Checks.Reconcile(ctx)
	if synced+failed > 0 {
		w.Checks.logger.InfoContext(ctx, "check run reconciliation", "synced", synced, "failed", failed)
	}
	return err
}
