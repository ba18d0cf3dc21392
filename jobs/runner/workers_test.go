package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/assembly"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/jobs/sandbox"
)

// TestJobsOfADeletedRunAreCancelled: a phase or approval-expiry job whose
// run went with its workspace ends as cancelled at once, where an error
// would have River retry a run that no retry can find.
func TestJobsOfADeletedRunAreCancelled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := dbtest.New(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	deps, err := assembly.Assemble(apitest.TestConfig(), conn, logger)
	if err != nil {
		t.Fatal(err)
	}
	driver, err := sandbox.NewLocal(t.TempDir(), sandbox.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	phase := &PhaseWorker{Runner: &Runner{Runs: deps.Services.Runs, Driver: driver, Logger: logger, WorkerID: "wrk_test"}}
	err = phase.Work(ctx, &river.Job[run.PhaseArgs]{JobRow: &rivertype.JobRow{ID: 1, Kind: run.PhaseArgs{}.Kind()},
		Args: run.PhaseArgs{RunID: "run_gone", AttemptID: "att_gone", Phase: run.PhasePlan}})
	var cancelled *rivertype.JobCancelError
	if !errors.As(err, &cancelled) {
		t.Fatalf("phase job of a deleted run: %v, want it cancelled", err)
	}
	expiry := &ExpiryWorker{DB: conn, Runs: deps.Services.Runs}
	err = expiry.Work(ctx, &river.Job[run.ExpiryArgs]{JobRow: &rivertype.JobRow{ID: 2, Kind: run.ExpiryArgs{}.Kind()},
		Args: run.ExpiryArgs{RunID: "run_gone"}})
	if !errors.As(err, &cancelled) {
		t.Fatalf("expiry job of a deleted run: %v, want it cancelled", err)
	}
}
