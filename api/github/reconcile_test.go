package github_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/github/githubfake"
	"github.com/cairnhq/cairn/api/run"
)

// TestLostIngestionJobIsRedelivered: a push accepted while the code host
// is down keeps its durable dispatch record. Its job lost (the row
// deleted) or exhausted (discarded after its attempts), the reconciler
// past the first backoff delivers it again, and the ingestion ends ready
// with its run; a live job only waits; a settled ingestion's record is
// closed and never redispatched.
func TestLostIngestionJobIsRedelivered(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.install(t, 851, 6501)
	wsID := s.workspace(t, "reconcile")
	s.source(t, wsID, map[string]any{"repository_id": 6501, "tracked_branch": "main", "working_directory": "infra"}).
		MustStatus(t, http.StatusCreated)
	ctx := context.Background()
	push := func(before string) string {
		sha := s.fake.Commit(6501, "main", "change after "+before[:4], mainTF())
		var d deliveryDoc
		s.deliver(t, githubfake.NewDelivery("push", s.fake.Push(t, 851, 6501, githubfake.PushOptions{Branch: "main",
			Before: before, After: sha, Paths: [][]string{{"infra/main.tf"}}}))).MustStatus(t, http.StatusOK).Data(t, &d)
		return d.IngestionIDs[0]
	}
	jobs := func(id string) int {
		return s.count(t, `SELECT count(*) FROM river_job WHERE kind = 'source_ingestion' AND args->>'source_ingestion_id' = $1`, id)
	}
	lost := push(strings.Repeat("5", 40))
	exhausted := push(strings.Repeat("6", 40))
	if jobs(lost) != 1 || s.count(t, `SELECT count(*) FROM workflow_dispatches WHERE id = $1 AND kind = 'source-ingestion'
		AND status = 'pending'`, github.WorkflowIDOf(lost)) != 1 {
		t.Fatal("an accepted push has no job or no pending dispatch record")
	}
	// The code host is down: the job of one is lost, the other's runs
	// out of attempts.
	if _, err := s.env.DB.Exec(`DELETE FROM river_job WHERE args->>'source_ingestion_id' = $1`, lost); err != nil {
		t.Fatal(err)
	}
	if _, err := s.env.DB.Exec(`UPDATE river_job SET state = 'discarded', finalized_at = now(), attempt = max_attempts
		WHERE args->>'source_ingestion_id' = $1`, exhausted); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	gh := s.env.Server.Services().GitHub
	at := func(d time.Duration) *github.Service { return gh.WithClock(func() time.Time { return now.Add(d) }) }
	if r, err := at(0).Reconcile(ctx); err != nil || r.Claimed != 0 {
		t.Fatalf("a fresh dispatch was due at once: %+v %v", r, err)
	}
	if r, err := at(10 * time.Second).Reconcile(ctx); err != nil || r.Claimed != 2 || r.Redelivered != 2 {
		t.Fatalf("reconciling two lost jobs: %+v %v", r, err)
	}
	if jobs(lost) != 1 || jobs(exhausted) != 2 {
		t.Fatalf("redelivered jobs: lost %d, exhausted %d", jobs(lost), jobs(exhausted))
	}
	// The code host is back; the redelivered jobs run.
	for _, id := range []string{lost, exhausted} {
		if err := gh.Ingest(ctx, id); err != nil {
			t.Fatal(err)
		}
		if n := s.count(t, `SELECT count(*) FROM source_ingestions i JOIN runs r ON r.id = i.run_id
			WHERE i.id = $1 AND i.status = 'ready' AND r.id = $2`, id, run.RunIDOf(id)); n != 1 {
			t.Fatalf("%s did not end ready with its run", id)
		}
	}
	// Settled: the records close with the ingestion, and nothing is
	// dispatched again however much time passes.
	if n := s.count(t, `SELECT count(*) FROM workflow_dispatches WHERE kind = 'source-ingestion' AND status = 'completed'`); n != 2 {
		t.Fatalf("%d completed dispatch records", n)
	}
	if r, err := at(time.Hour).Reconcile(ctx); err != nil || r.Claimed != 0 {
		t.Fatalf("a settled ingestion was visited again: %+v %v", r, err)
	}
	if jobs(lost) != 1 || jobs(exhausted) != 2 {
		t.Fatalf("a settled ingestion was redispatched: lost %d, exhausted %d", jobs(lost), jobs(exhausted))
	}

	// A live job only waits; a record whose ingestion settled behind the
	// reconciler's back is closed, not redelivered.
	live := push(strings.Repeat("7", 40))
	if r, err := at(10 * time.Second).Reconcile(ctx); err != nil || r.Claimed != 1 || r.Waiting != 1 || jobs(live) != 1 {
		t.Fatalf("a live job: %+v %v, %d jobs", r, err, jobs(live))
	}
	if _, err := s.env.DB.Exec(`UPDATE source_ingestions SET status = 'skipped', settled_at = now() WHERE id = $1`, live); err != nil {
		t.Fatal(err)
	}
	if _, err := s.env.DB.Exec(`DELETE FROM river_job WHERE args->>'source_ingestion_id' = $1`, live); err != nil {
		t.Fatal(err)
	}
	if r, err := at(10 * time.Minute).Reconcile(ctx); err != nil || r.Claimed != 1 || r.Closed != 1 || jobs(live) != 0 {
		t.Fatalf("a settled ingestion's record: %+v %v, %d jobs", r, err, jobs(live))
	}
}
