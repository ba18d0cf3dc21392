package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/run"
)

// StateProtocol is the state protocol the sandboxed CLI speaks: the
// backend override points its remote backend at the API's /api/v2.
const StateProtocol = "tfe-remote-backend"

// PhaseWorker runs a phase attempt's job.
type PhaseWorker struct {
	river.WorkerDefaults[run.PhaseArgs]
	Runner *Runner
	// CapacityRetry is how soon a job whose region is full tries again.
	CapacityRetry time.Duration
	// Identity is what this worker records of itself on every attempt it
	// starts; the job's kind and ID become its workflow ID.
	Identity run.WorkerIdentity
	// JobTimeout bounds the job; it must outlast the sandbox's own wall
	// clock (the phase timeout, the interrupt grace, recording the
	// evidence), which is what really ends a phase. Zero leaves the job
	// unbounded.
	JobTimeout time.Duration
}

// Timeout is the job's bound. River's rescuer never takes back a job whose
// timeout is negative (unbounded), so a job left running by a SIGKILLed
// worker would stay running in river_job for good; bounded, it is rescued
// once the bound passed, and its replay finds its attempt no longer queued.
func (w *PhaseWorker) Timeout(*river.Job[run.PhaseArgs]) time.Duration {
	if w.JobTimeout <= 0 {
		return -1
	}
	return w.JobTimeout
}

// Work starts the attempt (lease and create intent in one transaction) and
// executes it. A full region or a closed launch gate waits; an attempt that
// is no longer current, or an apply its approval no longer authorizes
// (the run ended errored), is done.
func (w *PhaseWorker) Work(ctx context.Context, job *river.Job[run.PhaseArgs]) error {
	st, err := w.Runner.Runs.StartAttempt(ctx, job.Args.AttemptID, w.Runner.WorkerID, w.Runner.Driver.Name())
	switch {
	case errors.Is(err, run.ErrAttemptNotCurrent):
		return nil
	case errors.Is(err, fault.ErrNotFound):
		// The run went with its workspace or organization: no later try
		// can find it, so the job ends as cancelled instead of erroring
		// through its retries.
		return river.JobCancel(fmt.Errorf("attempt %s: %w", job.Args.AttemptID, err))
	case errors.Is(err, run.ErrApplyRefused):
		w.Runner.Logger.Info("apply refused at start", "run_id", job.Args.RunID, "attempt_id", job.Args.AttemptID, "error", err)
		return nil
	case errors.Is(err, run.ErrCredentialsUnavailable):
		w.Runner.Logger.Info("credentials unavailable at start", "run_id", job.Args.RunID, "attempt_id", job.Args.AttemptID, "error", err)
		return nil
	case errors.Is(err, run.ErrNoCapacity):
		return river.JobSnooze(w.CapacityRetry)
	case errors.Is(err, run.ErrGateClosed):
		return river.JobSnooze(30 * time.Second)
	case err != nil:
		return err
	}
	identity := w.Identity
	identity.WorkflowID = fmt.Sprintf("%s-%d", job.Kind, job.ID)
	if err := w.Runner.Runs.RecordWorker(ctx, st.Attempt.ID, w.Runner.WorkerID, identity); err != nil {
		// The attempt runs all the same; its review says the worker's
		// identity was not recorded.
		w.Runner.Logger.Warn("recording the attempt's worker failed", "run_id", job.Args.RunID, "attempt_id", job.Args.AttemptID)
	}
	return w.Runner.Execute(ctx, st)
}

// ExpiryWorker ends runs whose approval deadline passed.
type ExpiryWorker struct {
	river.WorkerDefaults[run.ExpiryArgs]
	Runs *run.Service
	DB   *sqlx.DB
}

// Work expires the run if it is still waiting past its deadline.
func (w *ExpiryWorker) Work(ctx context.Context, job *river.Job[run.ExpiryArgs]) error {
	err := db.WithTx(ctx, w.DB, func(tx *sqlx.Tx) error {
		_, err := w.Runs.ExpireRun(ctx, tx, job.Args.RunID)
		return err
	})
	if errors.Is(err, fault.ErrNotFound) {
		// A deleted run has no deadline left to enforce.
		return river.JobCancel(fmt.Errorf("run %s: %w", job.Args.RunID, err))
	}
	return err
}

// ReapWorker finds attempts whose worker died.
type ReapWorker struct {
	river.WorkerDefaults[run.ReapArgs]
	Runs             *run.Service
	HeartbeatTimeout time.Duration
}

// Work reaps lost attempts.
func (w *ReapWorker) Work(ctx context.Context, _ *river.Job[run.ReapArgs]) error {
	_, err := w.Runs.ReapLostAttempts(ctx, w.HeartbeatTimeout)
	return err
}
