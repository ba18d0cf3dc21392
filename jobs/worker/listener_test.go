package worker

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"github.com/cairnhq/cairn/api/assembly/domain"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/dbtest"
)

type wakeArgs struct {
	Sequence int `json:"sequence"`
}

func (wakeArgs) Kind() string { return "listener_test_wake" }

type wakeWorker struct {
	river.WorkerDefaults[wakeArgs]
	started chan wakeStart
}

// wakeStart names the job that started, so a test waiting for one job is
// not fooled by an earlier one that was merely late.
type wakeStart struct {
	sequence int
	at       time.Time
}

func (w *wakeWorker) Work(ctx context.Context, job *river.Job[wakeArgs]) error {
	w.started <- wakeStart{sequence: job.Args.Sequence, at: time.Now()}
	return nil
}

// settle returns once no job has started for quiet.
func (w *wakeWorker) settle(quiet time.Duration) {
	for {
		select {
		case <-w.started:
		case <-time.After(quiet):
			return
		}
	}
}

func (w *wakeWorker) waitFor(sequence int, timeout time.Duration) (time.Time, bool) {
	return waitForStart(w.started, sequence, timeout)
}

// waitForStart answers when the job with this sequence started, skipping
// the starts of others, or false once the timeout passes.
func waitForStart(started <-chan wakeStart, sequence int, timeout time.Duration) (time.Time, bool) {
	deadline := time.After(timeout)
	for {
		select {
		case s := <-started:
			if s.sequence == sequence {
				return s.at, true
			}
		case <-deadline:
			return time.Time{}, false
		}
	}
}

// A job committed by another process (an insert-only client, as the API
// has) reaches an idle worker through the listener, long before its next
// poll: the poll here is a minute away, so only the NOTIFY can start it.
func TestCommittedJobWakesIdleWorker(t *testing.T) {
	t.Parallel()
	conn, dsn := dbtest.NewURL(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	workers := river.NewWorkers()
	w := &wakeWorker{started: make(chan wakeStart, 64)}
	river.AddWorker(workers, w)
	client, err := river.NewClient(newListeningDriver(conn.DB, dsn, newQueueWakes([]string{river.QueueDefault}, RetryPoll)), &river.Config{
		Logger: logger, Workers: workers, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		FetchPollInterval: time.Minute, FetchCooldown: FetchCooldown,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := startClient(t, client)
	inserter, err := river.NewClient(riverdatabasesql.New(conn.DB), &river.Config{Logger: logger, FetchCooldown: domain.InsertNotifyCooldown})
	if err != nil {
		t.Fatal(err)
	}
	insert := func(i int) time.Time {
		err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
			_, err := inserter.InsertTx(ctx, tx.Tx, wakeArgs{Sequence: i}, nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	// The listener subscribes shortly after Start, and River fetches once
	// as it starts, so a first job proves nothing: insert until one is
	// delivered, then time another, which only a notification can start
	// before the poll a minute away.
	delivered := false
	for i, deadline := 0, time.Now().Add(30*time.Second); !delivered && time.Now().Before(deadline); i++ {
		insert(i)
		_, delivered = w.waitFor(i, 2*time.Second)
	}
	if !delivered {
		t.Fatal("no committed job reached the idle worker before its poll")
	}
	committed := insert(-1)
	started, ok := w.waitFor(-1, 10*time.Second)
	if !ok {
		t.Fatal("a job committed to an idle worker waited for its poll")
	}
	// Generous for a busy machine; a poll would take a minute.
	if d := started.Sub(committed); d > 5*time.Second {
		t.Fatalf("job started %s after its commit", d)
	}
}

// TestReconnectedListenerWakesEveryQueue: a job no notification announced
// (committed while the listener was reconnecting, say) starts once the
// listener is back, not at the poll a minute away.
// listenerApplication names the listener's connection in pg_stat_activity.
const listenerApplication = "cairn_listener_test"

func TestReconnectedListenerWakesEveryQueue(t *testing.T) {
	t.Parallel()
	conn, dsn := dbtest.NewURL(t)
	// The listener's connection carries a name of its own so the test can
	// cut exactly it, whatever it last ran (River pings it now and then).
	listenerURL, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	query := listenerURL.Query()
	query.Set("application_name", listenerApplication)
	listenerURL.RawQuery = query.Encode()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	workers := river.NewWorkers()
	w := &wakeWorker{started: make(chan wakeStart, 64)}
	river.AddWorker(workers, w)
	client, err := river.NewClient(newListeningDriver(conn.DB, listenerURL.String(), newQueueWakes([]string{river.QueueDefault}, RetryPoll)), &river.Config{
		Logger: logger, Workers: workers, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		FetchPollInterval: time.Minute, FetchCooldown: FetchCooldown,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := startClient(t, client)
	inserter, err := river.NewClient(riverdatabasesql.New(conn.DB), &river.Config{Logger: logger, FetchCooldown: domain.InsertNotifyCooldown})
	if err != nil {
		t.Fatal(err)
	}
	// Once a notified job is delivered the listener is up.
	delivered := false
	for i, deadline := 0, time.Now().Add(30*time.Second); !delivered && time.Now().Before(deadline); i++ {
		if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
			_, err := inserter.InsertTx(ctx, tx.Tx, wakeArgs{Sequence: i}, nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		_, delivered = w.waitFor(i, 2*time.Second)
	}
	if !delivered {
		t.Fatal("the listener never delivered a notified job")
	}
	// Jobs of the loop that are still on their way would fetch with them
	// whatever is available, the unannounced job too: let them all start.
	w.settle(3 * time.Second)
	// A job written without the NOTIFY every insert sends.
	if _, err := conn.ExecContext(ctx, `INSERT INTO river_job (args, kind, max_attempts, priority, queue, state)
		VALUES ('{"sequence":-1}', $1, 1, 1, $2, 'available')`, wakeArgs{}.Kind(), river.QueueDefault); err != nil {
		t.Fatal(err)
	}
	// Jobs inserted in the loop above may still start late; only this
	// one's start would mean the test proves nothing.
	if _, ok := w.waitFor(-1, 3*time.Second); ok {
		t.Fatal("an unannounced job started before the listener reconnected: the test would prove nothing")
	}
	var cut int
	if err := conn.GetContext(ctx, &cut, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1) t`, listenerApplication); err != nil || cut == 0 {
		t.Fatalf("cutting the listener's connection: %d, %v", cut, err)
	}
	if _, ok := w.waitFor(-1, 20*time.Second); !ok {
		t.Fatal("after the listener reconnected, an unannounced job waited for the poll")
	}
}
