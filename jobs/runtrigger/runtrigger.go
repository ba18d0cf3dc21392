package runtrigger

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/trigger"
)

// Worker fans one applied run out. Runs are unique per (source run,
// destination), so a retried job creates none twice.
type Worker struct {
	river.WorkerDefaults[run.TriggerArgs]
	Triggers *trigger.Service
	Logger   *slog.Logger
}

// Timeout bounds one fan-out: at most a few dozen run creations.
func (w *Worker) Timeout(*river.Job[run.TriggerArgs]) time.Duration { return 2 * time.Minute }

// Work fans out; an error is retried with River's backoff.
func (w *Worker) Work(ctx context.Context, job *river.Job[run.TriggerArgs]) error {
	fired, err := w.Triggers.Fire(ctx, job.Args.RunID)
	if err != nil {
		return err
	}
	w.Logger.InfoContext(ctx, "run triggers fired", "run_id", job.Args.RunID, "created", len(fired.Created),
		"skipped", len(fired.Skipped))
	return nil
}
