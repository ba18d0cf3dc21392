package site

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/cairnhq/cairn/bff/apiclient"
)

// liveFeeds shares one upstream event stream per run among every socket
// watching it: N viewers of a run cost one API stream, and an idle run
// costs nothing (the API pushes when the database commits a change).
type liveFeeds struct {
	api    *url.URL
	client *http.Client
	logger *slog.Logger

	mu    sync.Mutex
	feeds map[string]*liveFeed
}

// liveFeed is one run's upstream stream and its subscribers.
type liveFeed struct {
	feeds  *liveFeeds
	runID  string
	cancel context.CancelFunc
	// ready closes once the upstream stream is open: a subscriber then
	// reads its backlog from the HTTP log route, and everything newer
	// arrives through the feed.
	ready chan struct{}
	// closed closes when the feed ends, opened or not.
	closed chan struct{}

	mu   sync.Mutex
	subs map[*liveSub]struct{}
	// status is the run's status as the upstream stream last said (its
	// ready event, then each change), set before ready closes. A socket
	// starts from it, not from a read of its own: a change committed
	// between that read and the stream's opening would reach neither.
	status string
	// after is the sequence of the last chunk relayed, where a resumed
	// stream starts.
	after string
}

// liveSub is one socket's queue. A socket too slow to keep up is dropped
// (its channel closes) and its browser falls back to the HTTP log route.
type liveSub struct {
	events chan liveEvent
	// token is the subscriber's API session; the feed streams with one of
	// its subscribers' sessions and drops a subscriber the API refuses.
	token string
}

// subscriberQueue bounds what a slow socket may fall behind by.
const subscriberQueue = 1024

func newLiveFeeds(api *url.URL, client *http.Client, logger *slog.Logger) *liveFeeds {
	// A stream lasts as long as the API keeps it (at most ten minutes), not
	// a page call's timeout; the context ends it when nobody watches.
	streaming := &http.Client{}
	if client != nil {
		*streaming = *client
	}
	streaming.Timeout = 0
	if logger == nil {
		logger = slog.Default()
	}
	return &liveFeeds{api: api, client: streaming, logger: logger, feeds: map[string]*liveFeed{}}
}

// join subscribes to a run's feed, opening the upstream stream when none
// is open. The caller has already been authorized for the run; leave ends
// the subscription.
func (f *liveFeeds) join(runID, token string) (*liveFeed, *liveSub) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sub := &liveSub{events: make(chan liveEvent, subscriberQueue), token: token}
	feed := f.feeds[runID]
	if feed == nil {
		ctx, cancel := context.WithCancel(context.Background())
		feed = &liveFeed{feeds: f, runID: runID, cancel: cancel, ready: make(chan struct{}), closed: make(chan struct{}), subs: map[*liveSub]struct{}{sub: {}}}
		f.feeds[runID] = feed
		go feed.relay(ctx)
		return feed, sub
	}
	feed.mu.Lock()
	feed.subs[sub] = struct{}{}
	feed.mu.Unlock()
	return feed, sub
}

// currentStatus is the run's status as of the last event relayed; every
// later change reaches the subscribers through their queues.
func (feed *liveFeed) currentStatus() string {
	feed.mu.Lock()
	defer feed.mu.Unlock()
	return feed.status
}

// anySub is a current subscriber, nil when none is left.
func (feed *liveFeed) anySub() *liveSub {
	feed.mu.Lock()
	defer feed.mu.Unlock()
	for sub := range feed.subs {
		return sub
	}
	return nil
}

// drop ends one subscription: its socket closes and its browser asks again.
func (feed *liveFeed) drop(sub *liveSub) {
	feed.mu.Lock()
	defer feed.mu.Unlock()
	if _, ok := feed.subs[sub]; ok {
		close(sub.events)
		delete(feed.subs, sub)
	}
}

// leave ends a subscription; the last one out stops the upstream stream.
func (f *liveFeeds) leave(feed *liveFeed, sub *liveSub) {
	f.mu.Lock()
	defer f.mu.Unlock()
	feed.mu.Lock()
	_, present := feed.subs[sub]
	delete(feed.subs, sub)
	if present {
		close(sub.events)
	}
	empty := len(feed.subs) == 0
	feed.mu.Unlock()
	if empty && f.feeds[feed.runID] == feed {
		delete(f.feeds, feed.runID)
		feed.cancel()
	}
}

// close ends the feed for everyone: its subscribers' channels close.
func (feed *liveFeed) close() {
	f := feed.feeds
	f.mu.Lock()
	if f.feeds[feed.runID] == feed {
		delete(f.feeds, feed.runID)
	}
	f.mu.Unlock()
	feed.cancel()
	feed.mu.Lock()
	for sub := range feed.subs {
		close(sub.events)
		delete(feed.subs, sub)
	}
	feed.mu.Unlock()
	close(feed.closed)
}

// awaitReady reports whether the upstream stream opened within wait; a
// feed that ended first (the API refused every subscriber's session, or
// kept failing) never does.
func (feed *liveFeed) awaitReady(ctx context.Context, wait time.Duration) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-feed.ready:
		return true
	case <-feed.closed:
		// A stream may open and end at once (a run that just finished).
		select {
		case <-feed.ready:
			return true
		default:
			return false
		}
	case <-ctx.Done():
	case <-timer.C:
	}
	return false
}

// broadcast queues ev for every subscriber; the caller holds feed.mu.
func (feed *liveFeed) broadcast(ev liveEvent) {
	for sub := range feed.subs {
		select {
		case sub.events <- ev:
		default:
			close(sub.events)
			delete(feed.subs, sub)
		}
	}
}

// relay reads the API's event stream and broadcasts it, resuming after
// the last sequence when the API ends a stream (they are bounded) until the
// run ends or nobody watches. It streams with a subscriber's session; one
// the API refuses (signed out, no longer a member) is dropped and another
// subscriber's is tried.
func (feed *liveFeed) relay(ctx context.Context) {
	defer feed.close()
	for attempt := 0; ; attempt++ {
		sub := feed.anySub()
		if sub == nil {
			return
		}
		ended, err := feed.stream(ctx, sub.token)
		if ended || ctx.Err() != nil {
			return
		}
		var apiErr *apiclient.Error
		switch {
		case errors.As(err, &apiErr) && apiErr.Status < 500:
			feed.drop(sub)
			attempt = -1
			continue
		case err == nil:
			// The API ended a bounded stream (or the session it used):
			// resume shortly.
			attempt = -1
		case attempt >= 5:
			feed.feeds.logger.Warn("live feed gave up", "run_id", feed.runID, "error", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(attempt+2) * 100 * time.Millisecond):
		}
	}
}

// stream holds one upstream request, resuming after the last chunk
// relayed.
func (feed *liveFeed) stream(ctx context.Context, token string) (bool, error) {
	path := "/v1/runs/" + url.PathEscape(feed.runID) + "/events"
	feed.mu.Lock()
	if feed.after != "" {
		path += "?after=" + feed.after
	}
	feed.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, feed.feeds.api.String()+path, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.AddCookie(&http.Cookie{Name: apiclient.SessionCookie, Value: token})
	resp, err := feed.feeds.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, &apiclient.Error{Status: resp.StatusCode}
	}
	sc := bufio.NewScanner(resp.Body)
	// A chunk is at most 32 KiB of text, escaped in JSON.
	sc.Buffer(make([]byte, 0, 64<<10), 512<<10)
	var name string
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			name = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			var ev liveEvent
			if err := json.Unmarshal(line[len("data: "):], &ev); err != nil {
				return false, err
			}
			ev.Type = name
			if feed.relayEvent(ev) {
				return true, nil
			}
		}
	}
	return false, sc.Err()
}

// relayEvent takes one upstream event; true once the run ended. The
// feed's status changes and the change goes out under one lock, so a
// socket that reads currentStatus gets every later change in its queue.
func (feed *liveFeed) relayEvent(ev liveEvent) bool {
	feed.mu.Lock()
	defer feed.mu.Unlock()
	switch ev.Type {
	case "ready":
		// Each stream, the first or a resumed one, opens with the run's
		// status then; a change between two streams is relayed as one.
		if feed.status != "" && ev.Status != feed.status {
			feed.broadcast(liveEvent{Type: "status", Status: ev.Status})
		}
		feed.status = ev.Status
		feed.after = strconv.FormatInt(ev.Sequence, 10)
		select {
		case <-feed.ready:
		default:
			close(feed.ready)
		}
	case "log":
		feed.after = strconv.FormatInt(ev.Sequence, 10)
		feed.broadcast(ev)
	case "status", "end":
		feed.status = cmp.Or(ev.Status, feed.status)
		feed.broadcast(ev)
		return ev.Type == "end"
	}
	return false
}
