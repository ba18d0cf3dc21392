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

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/server"
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
	client, err := river.NewClient(newListeningDriver(conn.DB, url), &river.Config{
		Logger: logger, Workers: workers, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		FetchPollInterval: time.Minute, FetchCooldown: FetchCooldown,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		_ = client.Stop(stop)
	})
	inserter, err := river.NewClient(riverdatabasesql.New(conn.DB), &river.Config{Logger: logger, FetchCooldown: server.InsertNotifyCooldown})
	if err != nil {
		t.Fatal(err)
	}
	// The listener subscribes shortly after Start; a job inserted before
	// that waits for the poll, so insert until one is delivered, well
	// inside the poll interval.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		var committed time.Time
		err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
			_, err := inserter.InsertTx(ctx, tx.Tx, wakeArgs{Sequence: i}, nil)
			return err
		})
		committed = time.Now()
		if err != nil {
			t.Fatal(err)
		}
		select {
		case started := <-w.started:
			// Generous for a busy machine; a poll would take a minute.
			if d := started.Sub(committed); d > 5*time.Second {
				t.Fatalf("job started %s after its commit", d)
			}
			return
		case <-time.After(2 * time.Second):
		}
	}
	t.Fatal("no committed job reached the idle worker before its poll")
}
