package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"github.com/cairnhq/cairn/api/assembly/domain"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/notify"
)

type retryArgs struct {
	Sequence int    `json:"sequence"`
	Retry    string `json:"retry"` // "", "snooze" or "fail": what its first run does
}

func (retryArgs) Kind() string { return "wakes_test_retry" }

// retryWorker snoozes or fails a job the first time it runs, and reports
// every run.
type retryWorker struct {
	river.WorkerDefaults[retryArgs]
	mu      sync.Mutex
	seen    map[int]bool
	started chan wakeStart
}

func (w *retryWorker) Work(ctx context.Context, job *river.Job[retryArgs]) error {
	w.mu.Lock()
	first := !w.seen[job.Args.Sequence]
	w.seen[job.Args.Sequence] = true
	w.mu.Unlock()
	w.started <- wakeStart{sequence: job.Args.Sequence, at: time.Now()}
	switch {
	case first && job.Args.Retry == "snooze":
		return river.JobSnooze(300 * time.Millisecond)
	case first && job.Args.Retry == "fail":
		return errors.New("first attempt fails")
	}
	return nil
}

func (w *retryWorker) waitFor(sequence int, timeout time.Duration) (time.Time, bool) {
	return waitForStart(w.started, sequence, timeout)
}

// TestRetriesDueSoonStartWithoutAPoll: a job snoozed for 300 ms and one
// whose first attempt failed (River retries it a second later) are made
// available by River with a start time in the future, which no
// notification announces; the worker wakes their queue itself, so both
// run again within seconds although its poll is an hour away.
func TestRetriesDueSoonStartWithoutAPoll(t *testing.T) {
	t.Parallel()
	conn, dsn := dbtest.NewURL(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	workers := river.NewWorkers()
	w := &retryWorker{seen: map[int]bool{}, started: make(chan wakeStart, 64)}
	river.AddWorker(workers, w)
	wakes := newQueueWakes([]string{river.QueueDefault}, RetryPoll)
	client, err := river.NewClient(newListeningDriver(conn.DB, dsn, wakes), &river.Config{
		Logger: logger, Workers: workers, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		FetchPollInterval: time.Hour, FetchCooldown: FetchCooldown, Middleware: jobMiddleware(logger, nil, wakes),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := startClient(t, client)
	riverClient, err := river.NewClient(riverdatabasesql.New(conn.DB), &river.Config{Logger: logger, FetchCooldown: domain.InsertNotifyCooldown})
	if err != nil {
		t.Fatal(err)
	}
	inserter := notify.AnnouncingInserter{Jobs: riverClient}
	insert := func(args retryArgs) {
		if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
			_, err := inserter.InsertTx(ctx, tx.Tx, args, &river.InsertOpts{MaxAttempts: 3})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The listener subscribes shortly after Start: insert until a job is
	// delivered.
	delivered := false
	for i := 100; !delivered && i < 115; i++ {
		insert(retryArgs{Sequence: i})
		_, delivered = w.waitFor(i, 2*time.Second)
	}
	if !delivered {
		t.Fatal("no committed job reached the idle worker")
	}
	for i, retry := range []string{"snooze", "fail"} {
		insert(retryArgs{Sequence: i, Retry: retry})
		first, ok := w.waitFor(i, 10*time.Second)
		if !ok {
			t.Fatalf("the %s job never started", retry)
		}
		again, ok := w.waitFor(i, 15*time.Second)
		if !ok {
			t.Fatalf("the %s job was not retried: it waits for the poll an hour away", retry)
		}
		t.Logf("%s: retried after %s", retry, again.Sub(first).Round(time.Millisecond))
	}
}

// TestIdleWorkerWakesNothing: with no retry to come, the worker hands its
// producers no notification of its own; one expected retry wakes only its
// queue, and only until it is due.
func TestIdleWorkerWakesNothing(t *testing.T) {
	t.Parallel()
	wakes := newQueueWakes([]string{"a", "b"}, 20*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if n := wakes.next(); n != nil {
		t.Fatalf("an idle worker woke %v", n)
	}
	wakes.expectRetry("b", time.Now().Add(100*time.Millisecond))
	// A retry due after River's scheduler interval is the scheduler's.
	wakes.expectRetry("a", time.Now().Add(time.Minute))
	deadline := time.Now().Add(100*time.Millisecond + retryGrace + time.Second)
	count := 0
	for time.Now().Before(deadline) {
		select {
		case <-wakes.kick:
		case <-time.After(50 * time.Millisecond):
		}
		for n := wakes.next(); n != nil; n = wakes.next() {
			if n.Payload != notify.JobInsertPayload("b") {
				t.Fatalf("woke %s", n.Payload)
			}
			count++
		}
	}
	if count < 5 {
		t.Fatalf("the queue of a retry due was woken %d times", count)
	}
	for n := wakes.next(); n != nil; n = wakes.next() {
	}
	time.Sleep(200 * time.Millisecond)
	if n := wakes.next(); n != nil {
		t.Fatalf("woken after the retry's window: %v", n)
	}
}
