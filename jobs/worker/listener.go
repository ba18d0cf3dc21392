package worker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/lib/pq"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"github.com/cairnhq/cairn/api/platform/notify"
)

// listeningDriver is River's database/sql driver with a listener: the one
// River ships has none, so its clients only poll, and a job committed just
// after a poll waits for the next one. Every River client already sends a
// pg_notify on the job's queue in the inserting transaction (the driver
// supports NOTIFY); this listener receives it with lib/pq's Listener, so a
// worker fetches a committed job at once and polling is only the fallback.
type listeningDriver struct {
	*riverdatabasesql.Driver
	db    *sql.DB
	dsn   string
	wakes *queueWakes
}

// newListeningDriver listens on the database at dsn; wakes are the
// notifications the worker hands its own producers besides those the
// database delivers (see queueWakes).
func newListeningDriver(db *sql.DB, dsn string, wakes *queueWakes) *listeningDriver {
	return &listeningDriver{Driver: riverdatabasesql.New(db), db: db, dsn: dsn, wakes: wakes}
}

func (d *listeningDriver) SupportsListener() bool { return true }

func (d *listeningDriver) GetListener(params *riverdriver.GetListenenerParams) riverdriver.Listener {
	return &pqListener{db: d.db, dsn: d.dsn, schema: params.Schema, wakes: d.wakes}
}

// pqListener adapts lib/pq's Listener to River's listener interface. River
// names channels "<schema>.<topic>" (the schema is the connection's current
// one unless configured), as its NOTIFY statements do.
type pqListener struct {
	db     *sql.DB
	dsn    string
	schema string
	wakes  *queueWakes

	mu       sync.Mutex
	listener *pq.Listener
	prefix   string
}

func (l *pqListener) Connect(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.listener != nil {
		return errors.New("listener already connected")
	}
	// The pool answers for the database first: lib/pq's listener connects
	// in the background and would wait for an unreachable one forever.
	schema := l.schema
	if schema == "" {
		if err := l.db.QueryRowContext(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&schema); err != nil {
			return fmt.Errorf("reading the listener's schema: %w", err)
		}
	}
	l.prefix = ""
	if schema != "" {
		l.prefix = schema + "."
	}
	// Notifications missed while it reconnects are not lost work: every
	// queue is woken once it is back (WaitForNotification), and the poll
	// finds anything else.
	l.listener = notify.NewListener(l.dsn, "jobs", nil)
	return nil
}

func (l *pqListener) current() (*pq.Listener, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.listener == nil {
		return nil, "", errors.New("listener not connected")
	}
	return l.listener, l.prefix, nil
}

// Listen subscribes to a topic. lib/pq's Listen blocks until its
// connection is up and takes no context, so it runs aside and ctx bounds
// the wait (Close ends a call left behind).
func (l *pqListener) Listen(ctx context.Context, topic string) error {
	pl, prefix, err := l.current()
	if err != nil {
		return err
	}
	return notify.Await(ctx, func() error {
		if err := pl.Listen(prefix + topic); err != nil && !errors.Is(err, pq.ErrChannelAlreadyOpen) {
			return err
		}
		return nil
	})
}

func (l *pqListener) Unlisten(ctx context.Context, topic string) error {
	pl, prefix, err := l.current()
	if err != nil {
		return err
	}
	return notify.Await(ctx, func() error {
		if err := pl.Unlisten(prefix + topic); err != nil && !errors.Is(err, pq.ErrChannelNotOpen) {
			return err
		}
		return nil
	})
}

func (l *pqListener) Ping(ctx context.Context) error {
	pl, _, err := l.current()
	if err != nil {
		return err
	}
	return notify.Await(ctx, pl.Ping)
}

func (l *pqListener) Schema() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.prefix == "" {
		return l.schema
	}
	return l.prefix[:len(l.prefix)-1]
}

func (l *pqListener) SetAfterConnectExec(string) {}

func (l *pqListener) Close(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.listener == nil {
		return nil
	}
	err := l.listener.Close()
	l.listener = nil
	return err
}

// WaitForNotification returns the next notification. lib/pq sends nil
// after it reconnected (and listens again by itself): inserts committed
// meanwhile were not heard, so every queue gets an insert notification of
// its own and fetches at once, rather than at the next poll, which is only
// a safety net.
func (l *pqListener) WaitForNotification(ctx context.Context) (*riverdriver.Notification, error) {
	pl, prefix, err := l.current()
	if err != nil {
		return nil, err
	}
	for {
		if n := l.wakes.next(); n != nil {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.wakes.kick:
		case n, ok := <-pl.NotificationChannel():
			if !ok {
				return nil, errors.New("listener closed")
			}
			if n == nil {
				l.wakes.wakeAll()
				continue
			}
			return &riverdriver.Notification{Topic: strings.TrimPrefix(n.Channel, prefix), Payload: n.Extra}, nil
		}
	}
}
