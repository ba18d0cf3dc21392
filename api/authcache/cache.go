package authcache

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/notify"
)

// Channel is the notification channel of principal changes (migration
// 00059).
const Channel = "cairn_principals"

// MaxAge is the longest a principal is served from memory.
const MaxAge = 10 * time.Second

// maxEntries bounds the memory the cache holds: when it is full it starts
// over empty.
const maxEntries = 10_000

// Cache holds the principals of recently presented credentials. A nil
// Cache keeps nothing.
type Cache struct {
	logger   *slog.Logger
	listener *pq.Listener
	now      func() time.Time
	// announce sends a notification with payload on Channel through the
	// database the way the API's writes reach it.
	announce func(ctx context.Context, payload string) error

	mu      sync.RWMutex
	entries map[string]entry
	// generation changes whenever everything is forgotten: a ticket taken
	// before then cannot keep what it read.
	generation uint64
	connected  bool
	listening  bool
	// probe is the payload of the notification the cache last sent itself
	// (at probeSent) and has not heard back yet ("" when none is on its
	// way); heard is when the last one came back (zero: none since the
	// listener came up). warned is set once the cache said it is off.
	probe     string
	probeSent time.Time
	heard     time.Time
	warned    bool
	closed    bool
}

type entry struct {
	principal access.Principal
	until     time.Time
	// writes is db.CommittedWrites when the principal was read.
	writes uint64
}

// Ticket is taken before a credential is read from the database, and is
// what Keep needs: it proves nothing was forgotten, and this process wrote
// nothing, between the read and the keeping.
type Ticket struct {
	generation uint64
	writes     uint64
}

// A principal is served only while the cache heard its own notification
// within heardWithin: a listener whose connection died without a word
// (a partition, a dropped flow) hears nothing, and the cache then turns
// itself off within that time instead of MaxAge. Only a cache in use
// probes, at most every probeEvery, so an idle API sends nothing.
const (
	probeEvery  = time.Second
	heardWithin = 3 * time.Second
	// probeWait is how long a probe may take before the cache says, once
	// per connection, that it stays off.
	probeWait = 5 * time.Second
)

// probePrefix starts every probe's payload; a change's payload is empty.
const probePrefix = "probe:"

// New starts a cache listening for principal changes on the database at
// dsn, which pool also reaches. It serves nothing until a notification it
// sends through pool comes back to its listener, and stops within
// heardWithin when they stop coming back: a transaction-pooling proxy
// between them that loses notifications leaves it off. Close ends it.
func New(dsn string, pool *sqlx.DB, logger *slog.Logger) *Cache {
	return newCache(dsn, announceThrough(pool), logger)
}

func announceThrough(pool *sqlx.DB) func(ctx context.Context, payload string) error {
	return func(ctx context.Context, payload string) error {
		// Read as a query, not run as a statement, so the pool does not
		// count the probe as a write of this process.
		var one int
		return pool.GetContext(ctx, &one, `SELECT 1 FROM pg_notify($1, $2)`, Channel, payload)
	}
}

func newCache(dsn string, announce func(ctx context.Context, payload string) error, logger *slog.Logger) *Cache {
	c := &Cache{logger: logger, now: time.Now, announce: announce, entries: map[string]entry{}}
	c.listener = pq.NewListener(dsn, notify.MinReconnect, notify.MaxReconnect, c.event)
	go c.listen()
	go c.forgetOnNotification(c.listener.NotificationChannel())
	return c
}

// listen subscribes to the channel; lib/pq listens again by itself after
// every reconnection.
func (c *Cache) listen() {
	if err := c.listener.Listen(Channel); err != nil {
		if !c.isClosed() {
			c.logger.Warn("principal cache is off: listening for changes failed", "error", err)
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listening = true
	c.forgetLocked()
}

// event follows the listener's connection. lib/pq reports a connection
// (and a reconnection) only once its channels are listened to again.
func (c *Cache) event(ev pq.ListenerEventType, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev {
	case pq.ListenerEventConnected, pq.ListenerEventReconnected:
		c.connected = true
		c.warned = false
	case pq.ListenerEventDisconnected:
		c.connected = false
		if !c.closed {
			c.logger.Warn("principal cache is off until its listener reconnects", "error", err)
		}
	default:
		return
	}
	// Whatever was heard before is no proof for the new connection.
	c.probe, c.heard = "", time.Time{}
	c.forgetLocked()
}

// probeIfDue sends the cache a notification of its own when the last one
// came back more than probeEvery ago and none sent since is younger than
// that (a probe that is lost is replaced; it is ignored if it comes back).
func (c *Cache) probeIfDue() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.connected || !c.listening || c.closed || now.Sub(c.heard) < probeEvery ||
		(c.probe != "" && now.Sub(c.probeSent) < probeEvery) {
		return
	}
	payload := probePrefix + id.New("p")
	c.probe, c.probeSent = payload, now
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), probeWait)
		defer cancel()
		err := c.announce(ctx, payload)
		if err == nil {
			t := time.NewTimer(probeWait)
			defer t.Stop()
			<-t.C
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.heard.Before(now) && c.connected && !c.warned && !c.closed {
			c.warned = true
			c.logger.Warn("principal cache is off: its own notification did not come back (is a transaction-pooling proxy in front of PostgreSQL?)",
				"error", err)
		}
	}()
}

func (c *Cache) forgetOnNotification(notifications <-chan *pq.Notification) {
	for n := range notifications {
		c.mu.Lock()
		switch {
		case n != nil && n.Extra == c.probe && c.probe != "":
			c.probe, c.heard = "", c.now()
		case n != nil && strings.HasPrefix(n.Extra, probePrefix):
			// Another API's probe, or an old one of ours: no change.
		default:
			// A change, or a nil notification after a reconnection.
			c.forgetLocked()
		}
		c.mu.Unlock()
	}
}

func (c *Cache) forgetLocked() {
	c.generation++
	clear(c.entries)
}

func (c *Cache) isClosed() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.closed
}

// Live reports whether the cache serves principals now: its listener is
// connected and listening, and its own notification came back within
// heardWithin. Asking sends the next probe when one is due.
func (c *Cache) Live() bool {
	if c == nil {
		return false
	}
	c.probeIfDue()
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.liveLocked()
}

// liveLocked reports whether notifications reach the cache now.
func (c *Cache) liveLocked() bool {
	return c.connected && c.listening && !c.closed && !c.heard.IsZero() && c.now().Sub(c.heard) < heardWithin
}

// Lookup returns the principal kept for key, if it may still be used.
func (c *Cache) Lookup(key string) (access.Principal, bool) {
	if c == nil {
		return access.Principal{}, false
	}
	p, ok, due := c.lookup(key)
	if due {
		c.probeIfDue()
	}
	return p, ok
}

func (c *Cache) lookup(key string) (p access.Principal, ok, probeDue bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	now := c.now()
	probeDue = now.Sub(c.heard) >= probeEvery
	e, found := c.entries[key]
	if !found || !c.liveLocked() || !now.Before(e.until) || e.writes != db.CommittedWrites() {
		return access.Principal{}, false, probeDue
	}
	return e.principal, true, probeDue
}

// Ticket is taken before the credential's read.
func (c *Cache) Ticket() Ticket {
	if c == nil {
		return Ticket{}
	}
	writes := db.CommittedWrites()
	c.mu.RLock()
	defer c.mu.RUnlock()
	return Ticket{generation: c.generation, writes: writes}
}

// Keep keeps the principal read after t was taken for key until expires
// (its credential's expiry; zero for none), or MaxAge from now if sooner.
// It keeps nothing when anything was forgotten or written since t. The
// principal is shared by every request that finds it: nothing may change
// it in place.
func (c *Cache) Keep(t Ticket, key string, p access.Principal, expires time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.liveLocked() || t.generation != c.generation || t.writes != db.CommittedWrites() {
		return
	}
	// The deadline is counted on this process's monotonic clock from
	// now, so a step of the wall clock neither extends nor shortens it.
	now := c.now()
	life := MaxAge
	if !expires.IsZero() {
		life = min(life, expires.Sub(now))
	}
	until := now.Add(life)
	if len(c.entries) >= maxEntries {
		clear(c.entries)
	}
	c.entries[key] = entry{principal: p, until: until, writes: t.writes}
}

// Close ends the listener; the cache then keeps nothing.
func (c *Cache) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	c.closed = true
	c.forgetLocked()
	c.mu.Unlock()
	return c.listener.Close()
}
