package authcache

import (
	"context"
	"database/sql"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/dbtest"
)

// The tests of this package are not parallel: what a cache serves depends
// on db.CommittedWrites, which every test of the process moves.

// harness is a live cache on a fresh database, the database through a pool
// (whose writes this process counts) and through a bare lib/pq connection
// (whose writes only the notifications announce, as another process's).
type harness struct {
	cache *Cache
	pool  *sqlx.DB
	other *sql.DB
	clock *testClock
	// deaf makes the cache's probes vanish, as a dead connection would.
	deaf *atomic.Bool
}

// testClock is the cache's time, moved by a test instead of sleeping.
type testClock struct {
	start  time.Time
	offset atomic.Int64
}

func (c *testClock) Now() time.Time { return c.start.Add(time.Duration(c.offset.Load())) }

func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

func newHarness(t *testing.T) harness {
	t.Helper()
	pool, url := dbtest.NewURL(t)
	other, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	h := harness{pool: pool, other: other, clock: &testClock{start: time.Now()}, deaf: &atomic.Bool{}}
	h.cache = newCache(url, func(ctx context.Context, payload string) error {
		if h.deaf.Load() {
			return nil
		}
		return announceThrough(pool)(ctx, payload)
	}, slog.Default())
	c := h.cache
	t.Cleanup(func() { _ = c.Close() })
	c.mu.Lock()
	c.now = h.clock.Now
	c.mu.Unlock()
	eventually(t, "the cache's listener comes up", c.Live)
	return h
}

// eventually waits up to five seconds for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited five seconds for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h harness) keep(key string, p access.Principal, expires time.Time) {
	h.cache.Keep(h.cache.Ticket(), key, p, expires)
}

func (h harness) served(key string) bool {
	_, ok := h.cache.Lookup(key)
	return ok
}

var alice = access.Principal{Kind: access.KindUser, ID: "usr_alice", Name: "Alice", OrganizationID: "org_a", Role: access.RoleMember}

// TestAChangeCommittedAnywhereIsForgotten: a change to a table principals
// are read from, committed by another process, reaches the cache as a
// notification and nothing kept before it is served; a change to a table
// they are not read from leaves them.
func TestAChangeCommittedAnywhereIsForgotten(t *testing.T) {
	h := newHarness(t)
	h.keep("session\x00a", alice, time.Time{})
	got, ok := h.cache.Lookup("session\x00a")
	if !ok || got.ID != alice.ID || got.Role != alice.Role {
		t.Fatalf("a principal just kept: %+v, %v", got, ok)
	}
	if _, err := h.other.Exec(`UPDATE organizations SET name = name`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if !h.served("session\x00a") {
		t.Fatal("a change to organizations, which no principal is read from, was taken for one")
	}
	for _, table := range []string{"users", "memberships", "sessions", "user_tokens", "oauth_grants", "oauth_access_tokens",
		"teams", "team_members", "team_workspace_access", "team_project_access"} {
		h.keep("session\x00a", alice, time.Time{})
		if !h.served("session\x00a") {
			t.Fatalf("%s: the principal was not kept", table)
		}
		writes := db.CommittedWrites()
		// A statement that changes no row still announces itself: what it
		// might have changed is not looked at.
		if _, err := h.other.Exec(`DELETE FROM ` + table + ` WHERE false`); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a change to "+table+" is forgotten", func() bool { return !h.served("session\x00a") })
		if db.CommittedWrites() != writes {
			t.Fatal("control: the other connection's write was counted as this process's")
		}
	}
}

// TestAWriteOfThisProcessIsSeenAtOnce: once a write through this process's
// pool has returned, nothing kept before it is served, without waiting for
// its notification (the table here has none).
func TestAWriteOfThisProcessIsSeenAtOnce(t *testing.T) {
	h := newHarness(t)
	h.keep("session\x00a", alice, time.Time{})
	if _, err := h.pool.Exec(`UPDATE organizations SET name = name`); err != nil {
		t.Fatal(err)
	}
	if h.served("session\x00a") {
		t.Fatal("a principal kept before a write of this process was served after it")
	}
	// A ticket taken before the write keeps nothing after it.
	ticket := h.cache.Ticket()
	if _, err := h.pool.Exec(`UPDATE organizations SET name = name`); err != nil {
		t.Fatal(err)
	}
	h.cache.Keep(ticket, "session\x00b", alice, time.Time{})
	if h.served("session\x00b") {
		t.Fatal("a principal read before a write was kept after it")
	}
}

// TestATicketFromBeforeANotificationKeepsNothing: a credential read before
// a change was announced may hold what the change removed.
func TestATicketFromBeforeANotificationKeepsNothing(t *testing.T) {
	h := newHarness(t)
	ticket := h.cache.Ticket()
	h.keep("probe", alice, time.Time{})
	if _, err := h.other.Exec(`UPDATE users SET name = name`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the change is announced", func() bool { return !h.served("probe") })
	h.cache.Keep(ticket, "session\x00a", alice, time.Time{})
	if h.served("session\x00a") {
		t.Fatal("a principal read before a change was kept after it was announced")
	}
}

// TestAPrincipalIsServedUntilItsCredentialExpiresAndAtMostMaxAge.
func TestAPrincipalIsServedUntilItsCredentialExpiresAndAtMostMaxAge(t *testing.T) {
	h := newHarness(t)
	h.keep("expiring", alice, h.clock.Now().Add(time.Second))
	h.keep("lasting", alice, time.Time{})
	h.clock.Advance(999 * time.Millisecond)
	if !h.served("expiring") {
		t.Fatal("a principal was not served before its credential expired")
	}
	h.clock.Advance(time.Millisecond)
	if h.served("expiring") {
		t.Fatal("a principal was served once its credential expired")
	}
	h.clock.Advance(MaxAge - time.Second - time.Millisecond)
	// The cache's own notification must have come back within
	// heardWithin of the clock's time for anything to be served.
	eventually(t, "the cache hears itself at the clock's new time", h.cache.Live)
	if !h.served("lasting") {
		t.Fatal("a principal without expiry was not served within MaxAge")
	}
	h.clock.Advance(time.Millisecond)
	if h.served("lasting") {
		t.Fatal("a principal was served after MaxAge")
	}
}

// TestALostListenerKeepsNothingUntilItIsBack: notifications sent while the
// listener is away are lost, so a disconnection forgets everything, and
// nothing is kept until the listener is back (lib/pq reconnects it).
func TestALostListenerKeepsNothingUntilItIsBack(t *testing.T) {
	h := newHarness(t)
	h.keep("session\x00a", alice, time.Time{})
	var ended bool
	if err := h.other.QueryRow(`SELECT bool_or(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&ended); err != nil || !ended {
		t.Fatalf("ending the listener's connection: %v, %v", ended, err)
	}
	eventually(t, "the lost connection is noticed", func() bool { return !h.served("session\x00a") })
	// Back again, the cache keeps principals and hears changes.
	eventually(t, "the listener reconnects and keeps again", func() bool {
		h.keep("session\x00b", alice, time.Time{})
		return h.served("session\x00b")
	})
	if _, err := h.other.Exec(`UPDATE sessions SET expires_at = expires_at`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a change after the reconnection is forgotten", func() bool { return !h.served("session\x00b") })
}

// TestANilCacheKeepsNothing: a service without a cache reads every
// credential.
func TestANilCacheKeepsNothing(t *testing.T) {
	var c *Cache
	c.Keep(c.Ticket(), "k", alice, time.Time{})
	if _, ok := c.Lookup("k"); ok || c.Live() || c.Close() != nil {
		t.Fatal("a nil cache served something")
	}
}

// TestUntriggeredNamesTablesWithoutTheTrigger: the check the caching
// packages run on their credential queries finds a table it should.
func TestUntriggeredNamesTablesWithoutTheTrigger(t *testing.T) {
	h := newHarness(t)
	missing, err := Untriggered(context.Background(), h.pool,
		`SELECT u.id FROM users u JOIN organizations o ON o.id = $1 WHERE u.id = $2`, "org", "usr")
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 1 || missing[0] != "organizations" {
		t.Fatalf("untriggered tables %v, want organizations", missing)
	}
}

// TestACacheWhoseNotificationsAreLostStaysOff: behind a proxy that loses
// notifications (a transaction-pooling one), the listener connects and
// listens but hears nothing, and a cache that kept principals there would
// never forget them. Its own notification does not come back, so it keeps
// nothing.
func TestACacheWhoseNotificationsAreLostStaysOff(t *testing.T) {
	_, url := dbtest.NewURL(t)
	lost := newCache(url, func(context.Context, string) error { return nil }, slog.Default())
	t.Cleanup(func() { _ = lost.Close() })
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		lost.Keep(lost.Ticket(), "session\x00a", alice, time.Time{})
		if _, ok := lost.Lookup("session\x00a"); ok || lost.Live() {
			t.Fatal("a cache that never heard its own notification kept a principal")
		}
		time.Sleep(20 * time.Millisecond)
	}
	lost.mu.RLock()
	up := lost.connected && lost.listening
	lost.mu.RUnlock()
	if !up {
		t.Fatal("control: the listener never came up, so the test proves nothing")
	}
}

// TestACacheThatStopsHearingItselfStopsServing: a listener whose connection
// died without a word hears no change; the cache's own notifications stop
// coming back too, and within heardWithin it serves nothing.
func TestACacheThatStopsHearingItselfStopsServing(t *testing.T) {
	h := newHarness(t)
	h.keep("session\x00a", alice, time.Time{})
	h.deaf.Store(true)
	h.clock.Advance(probeEvery)
	if !h.served("session\x00a") {
		t.Fatal("a principal was not served while the cache had heard itself within heardWithin")
	}
	h.clock.Advance(heardWithin - probeEvery)
	if h.served("session\x00a") {
		t.Fatal("a principal was served although the cache had not heard itself for heardWithin")
	}
	// Once its notifications come back, it serves again (the probe lost
	// last is replaced once it is probeEvery old).
	h.deaf.Store(false)
	h.clock.Advance(probeEvery)
	eventually(t, "the cache hears itself again", func() bool {
		h.keep("session\x00b", alice, time.Time{})
		return h.served("session\x00b")
	})
}
