package authcache

import (
	"context"
	"log/slog"
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
	// probe is the payload of the notification the cache sent itself
	// since the listener last came up; heard is set when it came back.
	probe  string
	heard  bool
	closed bool
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

// probeWait is how long the cache waits for its own notification before
// it says, once per connection, that it stays off.
const probeWait = 5 * time.Second

// New starts a cache listening for principal changes on the database at
// dsn, which pool also reaches. It keeps nothing until a notification it
// sends through pool comes back to its listener: a transaction-pooling
// proxy between them that loses notifications leaves it off. Close ends
// it.
func New(dsn string, pool *sqlx.DB, logger *slog.Logger) *Cache {
	return newCache(dsn, func(ctx context.Context, payload string) error {
		_, err := pool.ExecContext(ctx, `SELECT pg_notify($1, $2)`, Channel, payload)
		return err
	}, logger)
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
	c.probeLocked()
}

// event follows the listener's connection. lib/pq reports a connection
// (and a reconnection) only once its channels are listened to again.
func (c *Cache) event(ev pq.ListenerEventType, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev {
	case pq.ListenerEventConnected, pq.ListenerEventReconnected:
		c.connected = true
		c.probeLocked()
	case pq.ListenerEventDisconnected:
		c.connected = false
		c.probe, c.heard = "", false
		if !c.closed {
			c.logger.Warn("principal cache is off until its listener reconnects", "error", err)
		}
	default:
		return
	}
	c.forgetLocked()
}

// probeLocked sends the cache a notification of its own once the listener
// is connected and listening, and waits for it to come back.
func (c *Cache) probeLocked() {
	if !c.connected || !c.listening || c.closed {
		return
	}
	payload := "probe:" + id.New("p")
	c.probe, c.heard = payload, false
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), probeWait)
		defer cancel()
		err := c.announce(ctx, payload)
		if err == nil {
			t := time.NewTimer(probeWait)
			defer t.Stop()
			<-t.C
		}
		c.mu.RLock()
		unheard := c.probe == payload && !c.heard && !c.closed
		c.mu.RUnlock()
		if unheard {
			c.logger.Warn("principal cache is off: its own notification did not come back (is a transaction-pooling proxy in front of PostgreSQL?)",
				"error", err)
		}
	}()
}

func (c *Cache) forgetOnNotification(notifications <-chan *pq.Notification) {
	// Every notification forgets, a nil one (after a reconnection) too.
	for n := range notifications {
		c.mu.Lock()
		if n != nil && c.probe != "" && n.Extra == c.probe {
			c.heard = true
		}
		c.forgetLocked()
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

// Live reports whether the cache keeps principals now: its listener is
// connected and listening, and its own notification came back.
func (c *Cache) Live() bool {
	if c == nil {
		return false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.liveLocked()
}

// liveLocked reports whether notifications reach the cache now.
func (c *Cache) liveLocked() bool { return c.connected && c.listening && c.heard && !c.closed }

// Lookup returns the principal kept for key, if it may still be used.
func (c *Cache) Lookup(key string) (access.Principal, bool) {
	if c == nil {
		return access.Principal{}, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[key]
	if !ok || !c.liveLocked() || !c.now().Before(e.until) || e.writes != db.CommittedWrites() {
		return access.Principal{}, false
	}
	return e.principal, true
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
	now := c.now()
	until := now.Add(MaxAge)
	if !expires.IsZero() && expires.Before(until) {
		until = expires
	}
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
