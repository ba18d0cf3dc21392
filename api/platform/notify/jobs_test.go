package notify_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/notify"
)

type announcedArgs struct {
	Sequence int `json:"sequence"`
}

func (announcedArgs) Kind() string { return "notify_test_announced" }

// TestEveryStartableJobIsAnnounced: River notifies a queue at most once
// per cooldown per process, so of two jobs inserted back to back only the
// first is announced by River; the announcing inserter announces both,
// and neither a job scheduled for later nor a duplicate of a unique job.
func TestEveryStartableJobIsAnnounced(t *testing.T) {
	t.Parallel()
	conn, url := dbtest.NewURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var schema string
	if err := conn.GetContext(ctx, &schema, `SELECT current_schema()`); err != nil {
		t.Fatal(err)
	}
	listener := notify.NewListener(url, "test", nil)
	t.Cleanup(func() { _ = listener.Close() })
	if err := listener.Listen(schema + "." + notify.JobInsertTopic); err != nil {
		t.Fatal(err)
	}
	// A cooldown of an hour: River announces only the first insert.
	client, err := river.NewClient(riverdatabasesql.New(conn.DB), &river.Config{FetchCooldown: time.Hour, FetchPollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	insert := func(jobs notify.JobInserter, seq int, opts *river.InsertOpts) {
		t.Helper()
		if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
			_, err := jobs.InsertTx(ctx, tx.Tx, announcedArgs{Sequence: seq}, opts)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	announcements := func(want int) {
		t.Helper()
		got := 0
		for deadline := time.After(2 * time.Second); ; {
			select {
			case n := <-listener.NotificationChannel():
				if n == nil {
					t.Fatal("the listener reconnected: the count would prove nothing")
				}
				if n.Extra != notify.JobInsertPayload(river.QueueDefault) {
					t.Fatalf("payload %q", n.Extra)
				}
				got++
				continue
			case <-deadline:
			}
			break
		}
		if got != want {
			t.Fatalf("%d announcements, want %d", got, want)
		}
	}
	// River alone: the second insert goes unannounced, which is what the
	// inserter mends (and what this test would not see otherwise).
	insert(client, 1, nil)
	insert(client, 2, nil)
	announcements(1)

	announcing := notify.AnnouncingInserter{Jobs: client}
	insert(announcing, 3, nil)
	insert(announcing, 4, nil)
	announcements(2)

	// Scheduled for later: River's scheduler announces it when due.
	insert(announcing, 5, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	// A duplicate of a unique job was announced with the original.
	unique := &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
	insert(announcing, 6, unique)
	announcements(1)
	insert(announcing, 6, unique)
	announcements(0)

	var jobs int
	if err := conn.GetContext(ctx, &jobs, `SELECT count(*) FROM river_job WHERE kind = $1`, announcedArgs{}.Kind()); err != nil {
		t.Fatal(err)
	}
	if jobs != 6 {
		t.Fatalf("%d jobs, want 6", jobs)
	}
}
