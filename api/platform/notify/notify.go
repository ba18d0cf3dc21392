package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lib/pq"
)

// Reconnection backoff of a listener connection. Notifications missed
// while it reconnects are not lost work: listeners wake everyone (or poll)
// after a reconnection.
const (
	MinReconnect = 100 * time.Millisecond
	MaxReconnect = 10 * time.Second
)

// NewListener opens a lib/pq listener connection with Cairn's backoff; the
// worker's job wake-up and the hub share it. Connection problems are
// logged under name.
func NewListener(dsn, name string, logger *slog.Logger) *pq.Listener {
	return pq.NewListener(dsn, MinReconnect, MaxReconnect, func(ev pq.ListenerEventType, err error) {
		if err != nil && logger != nil {
			logger.Warn("notification listener", "listener", name, "event", int(ev), "error", err)
		}
	})
}

// Await runs fn aside and returns its error, or ctx's when ctx ends first:
// lib/pq's Listen, Unlisten and Ping block on the connection and take no
// context.
func Await(ctx context.Context, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Hub is one process's listener on one channel. It connects on the first
// subscription, so a process that never subscribes holds no connection.
type Hub struct {
	dsn     string
	channel string
	logger  *slog.Logger

	mu       sync.Mutex
	listener *pq.Listener
	subs     map[string]map[*Subscription]struct{}
	stop     chan struct{}
}

// Subscription is one subscriber's wake-up channel for one key. C holds at
// most one pending wake-up: several notifications before the subscriber
// reads coalesce into one re-read.
type Subscription struct {
	C   <-chan struct{}
	c   chan struct{}
	key string
	hub *Hub
}

// New returns a hub for channel on the database at dsn.
func New(dsn, channel string, logger *slog.Logger) *Hub {
	return &Hub{dsn: dsn, channel: channel, logger: logger, subs: map[string]map[*Subscription]struct{}{}}
}

// Subscribe wakes the subscription whenever key is notified. The listener
// is up (LISTEN acknowledged) when it returns, so a change committed after
// it is never missed; the caller reads the current state after subscribing.
func (h *Hub) Subscribe(ctx context.Context, key string) (*Subscription, error) {
	if err := h.connect(ctx); err != nil {
		return nil, err
	}
	c := make(chan struct{}, 1)
	s := &Subscription{C: c, c: c, key: key, hub: h}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[key] == nil {
		h.subs[key] = map[*Subscription]struct{}{}
	}
	h.subs[key][s] = struct{}{}
	return s, nil
}

// Close ends the subscription.
func (s *Subscription) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[s.key], s)
	if len(h.subs[s.key]) == 0 {
		delete(h.subs, s.key)
	}
}

func (h *Hub) connect(ctx context.Context) error {
	h.mu.Lock()
	l := h.listener
	if l == nil {
		l = NewListener(h.dsn, h.channel, h.logger)
		h.listener, h.stop = l, make(chan struct{})
		go h.dispatch(l, h.stop)
	}
	h.mu.Unlock()
	err := Await(ctx, func() error { return l.Listen(h.channel) })
	if err != nil && !errors.Is(err, pq.ErrChannelAlreadyOpen) {
		return fmt.Errorf("listening on %s: %w", h.channel, err)
	}
	return nil
}

// dispatch wakes the subscribers of each notified key; a nil notification
// (lib/pq reconnected) wakes everyone.
func (h *Hub) dispatch(l *pq.Listener, stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case n, ok := <-l.NotificationChannel():
			if !ok {
				return
			}
			h.mu.Lock()
			if n == nil {
				for _, subs := range h.subs {
					wake(subs)
				}
			} else {
				wake(h.subs[n.Extra])
			}
			h.mu.Unlock()
		}
	}
}

func wake(subs map[*Subscription]struct{}) {
	for s := range subs {
		select {
		case s.c <- struct{}{}:
		default:
		}
	}
}

// Close ends the listener connection.
func (h *Hub) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.listener == nil {
		return nil
	}
	close(h.stop)
	err := h.listener.Close()
	h.listener = nil
	return err
}
