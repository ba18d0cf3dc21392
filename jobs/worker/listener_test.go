package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"github.com/cairnhq/cairn/api/assembly"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/dbtest"
)

type wakeArgs struct {
	Sequence int `json:"sequence"`
}

func (wakeArgs) Kind() string { return "listener_test_wake" }

type wakeWorker struct {
	river.WorkerDefaults[wakeArgs]
	started chan time.Time
}

func (w *wakeWorker) Work(ctx context.Context, job *river.Job[wakeArgs]) error {
	w.started <- time.Now()
	return nil
}

// A job committed by another process (an insert-only client, as the API
// has) reaches an idle worker through the listener, long before its next
// poll: the poll here is a minute away, so only the NOTIFY can start it.
func TestCommittedJobWakesIdleWorker(t *testing.T) {
	t.Parallel()
	conn, url := dbtest.NewURL(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	workers := river.NewWorkers()
	w := &wakeWorker{started: make(chan time.Time, 64)}
	river.AddWorker(workers, w)
	client, err := river.NewClient(newListeningDriver(conn.DB, url, []string{river.QueueDefault}), &river.Config{
		Logger: logger, Workers: workers, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		FetchPollInterval: time.Minute, FetchCooldown: FetchCooldown,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := startClient(t, client)
	inserter, err := river.NewClient(riverdatabasesql.New(conn.DB), &river.Config{Logger: logger, FetchCooldown: assembly.InsertNotifyCooldown})
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
		select {
		case <-w.started:
			delivered = true
		case <-time.After(2 * time.Second):
		}
	}
	if !delivered {
		t.Fatal("no committed job reached the idle worker before its poll")
	}
	committed := insert(-1)
	select {
	case started := <-w.started:
		// Generous for a busy machine; a poll would take a minute.
		if d := started.Sub(committed); d > 5*time.Second {
			t.Fatalf("job started %s after its commit", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a job committed to an idle worker waited for its poll")
	}
}

// TestReconnectedListenerWakesEveryQueue: a job no notification announced
// (committed while the listener was reconnecting, say) starts once the
// listener is back, not at the poll a minute away.
func TestReconnectedListenerWakesEveryQueue(t *testing.T) {
	t.Parallel()
	conn, url := dbtest.NewURL(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	workers := river.NewWorkers()
	w := &wakeWorker{started: make(chan time.Time, 64)}
	river.AddWorker(workers, w)
	client, err := river.NewClient(newListeningDriver(conn.DB, url, []string{river.QueueDefault}), &river.Config{
		Logger: logger, Workers: workers, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		FetchPollInterval: time.Minute, FetchCooldown: FetchCooldown,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := startClient(t, client)
	inserter, err := river.NewClient(riverdatabasesql.New(conn.DB), &river.Config{Logger: logger, FetchCooldown: assembly.InsertNotifyCooldown})
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
		select {
		case <-w.started:
			delivered = true
		case <-time.After(2 * time.Second):
		}
	}
	if !delivered {
		t.Fatal("the listener never delivered a notified job")
	}
	// A job written without the NOTIFY every insert sends.
	if _, err := conn.ExecContext(ctx, `INSERT INTO river_job (args, kind, max_attempts, priority, queue, state)
		VALUES ('{"sequence":-1}', $1, 1, 1, $2, 'available')`, wakeArgs{}.Kind(), river.QueueDefault); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.started:
		t.Fatal("an unannounced job started before the listener reconnected: the test would prove nothing")
	case <-time.After(3 * time.Second):
	}
	var cut int
	if err := conn.GetContext(ctx, &cut, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %') t`); err != nil || cut == 0 {
		t.Fatalf("cutting the listener's connection: %d, %v", cut, err)
	}
	select {
	case <-w.started:
	case <-time.After(20 * time.Second):
		t.Fatal("after the listener reconnected, an unannounced job waited for the poll")
	}
}
