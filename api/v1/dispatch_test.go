package v1_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/policy"
)

// testClock is a clock a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

type dispatchRow struct {
	Status       string     `db:"status"`
	Deliveries   int        `db:"deliveries"`
	Starts       int        `db:"starts"`
	Checks       int        `db:"checks"`
	NextAttempt  time.Time  `db:"next_attempt_at"`
	ClaimedUntil *time.Time `db:"claimed_until"`
}

// TestDispatchReconcilerBacksOffBoundsClaimsAndSparesTheBacklog drives the
// workflow dispatch reconciler with a hand-moved clock over 30 policy
// builds that no worker picks up (a backlog): a tick claims at most 25
// due records, each record's checks back off 5 s, 10 s, … up to 5 min, and
// however many ticks pass, a build still queued is never failed nor
// delivered twice. A lost job is delivered again; a build that really
// started MaxStarts times and was lost fails with an orchestration failure.
func TestDispatchReconcilerBacksOffBoundsClaimsAndSparesTheBacklog(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("dispatch")
	w := newWorkspace(t, u, newProject(t, u, "p"), "builds")
	var set struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/policy-sets", map[string]string{"name": "backlog"}).MustStatus(t, http.StatusCreated).Data(t, &set)
	archive := corpusArchive(t, "always-pass")
	const builds = 30
	// The records are armed on the real clock as the versions are created
	// (which takes seconds on a loaded machine): the test clock starts
	// before the first and jumps past the last.
	armedFrom := time.Now().UTC()
	versions := make([]string, builds)
	for i := range versions {
		var v versionDoc
		u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + w.ID + "/policy-sets/" + set.ID + "/versions",
			Body: archive, Header: map[string]string{"Content-Type": "application/gzip", "Idempotency-Key": apitest.NewKey()}}).
			MustStatus(t, http.StatusAccepted).Data(t, &v)
		versions[i] = v.ID
	}
	ctx := context.Background()
	armedUntil := time.Now().UTC()
	clock := &testClock{now: armedFrom}
	policies := env.Server.Services().Policies.WithClock(clock.Now)
	row := func(versionID string) dispatchRow {
		t.Helper()
		var d dispatchRow
		if err := env.DB.Get(&d, `SELECT status, deliveries, starts, checks, next_attempt_at, claimed_until
			FROM workflow_dispatches WHERE id = $1`, policy.DispatchID(versionID)); err != nil {
			t.Fatal(err)
		}
		return d
	}
	tick := func() policy.ReconcileReport {
		t.Helper()
		r, err := policies.Reconcile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Nothing is due before the first backoff.
	if r := tick(); r.Claimed != 0 {
		t.Fatalf("a fresh dispatch was due at once: %+v", r)
	}
	// Past it, one tick claims 25 records, the next the other 5, then none:
	// the 25 are claimed for a minute.
	clock.Set(armedUntil.Add(10 * time.Second))
	if r := tick(); r.Claimed != policy.ReconcileBatch || r.Waiting != policy.ReconcileBatch || r.Redelivered != 0 {
		t.Fatalf("first tick: %+v", r)
	}
	if r := tick(); r.Claimed != builds-policy.ReconcileBatch || r.Waiting != builds-policy.ReconcileBatch {
		t.Fatalf("second tick: %+v", r)
	}
	if r := tick(); r.Claimed != 0 {
		t.Fatalf("third tick took claimed records: %+v", r)
	}

	// The backoff of one record, visit after visit, while its job stays
	// queued behind the backlog: the first visit above set 5 s.
	watched := versions[0]
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 300 * time.Second, 300 * time.Second, 300 * time.Second}
	for i, backoff := range want {
		d := row(watched)
		visitedAt := d.ClaimedUntil.Add(-policy.ReconcileClaim)
		if got := d.NextAttempt.Sub(visitedAt); got != backoff {
			t.Fatalf("visit %d backed off %s, want %s", i+1, got, backoff)
		}
		if d.Checks != i+1 || d.Deliveries != 1 || d.Status != "pending" {
			t.Fatalf("visit %d left %+v", i+1, d)
		}
		if i == len(want)-1 {
			break
		}
		// Every record is due again once its claim and backoff pass.
		next := d.NextAttempt
		if d.ClaimedUntil.After(next) {
			next = *d.ClaimedUntil
		}
		clock.Set(next.Add(time.Millisecond))
		for r := tick(); r.Claimed > 0; r = tick() {
			if r.Failed != 0 || r.Redelivered != 0 || r.Claimed > policy.ReconcileBatch {
				t.Fatalf("a tick under backlog: %+v", r)
			}
		}
	}
	// Nine visits, far past MaxStarts: every build is still pending, with
	// exactly the one queued job it was dispatched with.
	var pending, jobs int
	if err := env.DB.Get(&pending, `SELECT count(*) FROM policy_versions WHERE id = ANY($1) AND status = 'pending'`, pq.Array(versions)); err != nil {
		t.Fatal(err)
	}
	if err := env.DB.Get(&jobs, `SELECT count(*) FROM river_job WHERE kind = 'policy_publication' AND state = 'available'`); err != nil {
		t.Fatal(err)
	}
	if pending != builds || jobs != builds {
		t.Fatalf("under backlog: %d of %d builds pending, %d queued jobs", pending, builds, jobs)
	}

	// A lost job (its row gone, as after a discarded retry) is delivered
	// again at the next due visit, once.
	lost := versions[1]
	if _, err := env.DB.Exec(`DELETE FROM river_job WHERE kind = 'policy_publication' AND args->>'policy_version_id' = $1`, lost); err != nil {
		t.Fatal(err)
	}
	clock.Set(clock.Now().Add(10 * time.Minute))
	redelivered := 0
	for r := tick(); r.Claimed > 0; r = tick() {
		redelivered += r.Redelivered
	}
	if d := row(lost); redelivered != 1 || d.Deliveries != 2 || d.Status != "pending" {
		t.Fatalf("lost job: %d redelivered, dispatch %+v", redelivered, d)
	}

	// A build that really started MaxStarts times (each start takes the
	// version's lease and counts) and whose job is then lost fails.
	doomed := versions[2]
	for range policy.MaxStarts {
		if _, ok, err := policies.StartBuild(ctx, doomed); err != nil || !ok {
			t.Fatalf("starting the build: %v %v", ok, err)
		}
	}
	if d := row(doomed); d.Starts != policy.MaxStarts {
		t.Fatalf("starts %d", d.Starts)
	}
	if _, err := env.DB.Exec(`DELETE FROM river_job WHERE kind = 'policy_publication' AND args->>'policy_version_id' = $1`, doomed); err != nil {
		t.Fatal(err)
	}
	clock.Set(clock.Now().Add(10 * time.Minute))
	failed := 0
	for r := tick(); r.Claimed > 0; r = tick() {
		failed += r.Failed
	}
	var v versionDoc
	u.Get("/v1/policy-versions/"+doomed).MustStatus(t, http.StatusOK).Data(t, &v)
	if failed != 1 || v.Status != "failed" || v.FailureCode == nil || *v.FailureCode != policy.FailureOrchestration {
		t.Fatalf("after MaxStarts: %d failed, version %+v", failed, v)
	}
	if d := row(doomed); d.Status != "completed" {
		t.Fatalf("the failed build's dispatch is %s", d.Status)
	}
}
