package notify_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/notify"
)

// TestSubscribersWakeOnTheirKeyOnly: a committed pg_notify wakes the
// subscribers of its payload's key and no other; repeats before a read
// coalesce; a closed subscription is no longer woken.
func TestSubscribersWakeOnTheirKeyOnly(t *testing.T) {
	t.Parallel()
	db, url := dbtest.NewURL(t)
	hub := notify.New(url, "cairn_test_events", slog.Default())
	t.Cleanup(func() { _ = hub.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := hub.Subscribe(ctx, "run_a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := hub.Subscribe(ctx, "run_b")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := db.Exec(`SELECT pg_notify('cairn_test_events', 'run_a')`); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-a.C:
	case <-time.After(5 * time.Second):
		t.Fatal("run_a's subscriber was not woken")
	}
	time.Sleep(200 * time.Millisecond)
	select {
	case <-b.C:
		t.Fatal("run_b's subscriber was woken by run_a")
	default:
	}
	// Three notifications, at most one more pending wake-up.
	select {
	case <-a.C:
	default:
	}
	select {
	case <-a.C:
		t.Fatal("wake-ups did not coalesce")
	default:
	}
	a.Close()
	if _, err := db.Exec(`SELECT pg_notify('cairn_test_events', 'run_a')`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	select {
	case <-a.C:
		t.Fatal("a closed subscription was woken")
	default:
	}
}
