package site

import (
	"context"
	"testing"
	"time"
)

// TestTheFeedKnowsTheStatusEverySocketStartsFrom: a socket starts from the
// feed's status and gets each later change in its queue, including one
// that fell between two upstream streams, so a change committed while a
// socket was opening always reaches its page.
func TestTheFeedKnowsTheStatusEverySocketStartsFrom(t *testing.T) {
	t.Parallel()
	feed := &liveFeed{ready: make(chan struct{}), closed: make(chan struct{}), subs: map[*liveSub]struct{}{}}
	early := &liveSub{events: make(chan liveEvent, subscriberQueue)}
	feed.subs[early] = struct{}{}
	if feed.awaitReady(context.Background(), 10*time.Millisecond) {
		t.Fatal("ready before the upstream stream opened")
	}

	// The run changed before the stream opened: the stream's ready event
	// says so, and there is nothing to broadcast yet.
	if feed.relayEvent(liveEvent{Type: "ready", Sequence: 7, Status: "recovery_required"}) {
		t.Fatal("ready ended the feed")
	}
	if !feed.awaitReady(context.Background(), time.Second) || feed.currentStatus() != "recovery_required" || feed.after != "7" {
		t.Fatalf("after ready: status %q, after %q", feed.currentStatus(), feed.after)
	}
	if n := len(early.events); n != 0 {
		t.Fatalf("ready broadcast %d events", n)
	}

	late := &liveSub{events: make(chan liveEvent, subscriberQueue)}
	feed.subs[late] = struct{}{}
	feed.relayEvent(liveEvent{Type: "log", Sequence: 8, Phase: "apply", Body: "x"})
	feed.relayEvent(liveEvent{Type: "status", Status: "applying"})
	if feed.currentStatus() != "applying" || feed.after != "8" {
		t.Fatalf("after a change: status %q, after %q", feed.currentStatus(), feed.after)
	}

	// A resumed stream with the status unchanged adds nothing; one that
	// opens on another status relays the change it missed.
	feed.relayEvent(liveEvent{Type: "ready", Sequence: 8, Status: "applying"})
	feed.relayEvent(liveEvent{Type: "ready", Sequence: 9, Status: "recovery_required"})
	if !feed.relayEvent(liveEvent{Type: "end", Status: "applied"}) {
		t.Fatal("end did not end the feed")
	}
	want := []liveEvent{
		{Type: "log", Sequence: 8, Phase: "apply", Body: "x"},
		{Type: "status", Status: "applying"},
		{Type: "status", Status: "recovery_required"},
		{Type: "end", Status: "applied"},
	}
	for _, sub := range []*liveSub{early, late} {
		if len(sub.events) != len(want) {
			t.Fatalf("%d events queued, want %d", len(sub.events), len(want))
		}
		for i, w := range want {
			if got := <-sub.events; got != w {
				t.Errorf("event %d: %+v, want %+v", i, got, w)
			}
		}
	}
	if feed.currentStatus() != "applied" || !terminal(feed.currentStatus()) {
		t.Errorf("after end: %q", feed.currentStatus())
	}
}

// TestAFeedThatNeverOpenedIsNotReady: a feed that ended before its stream
// opened (every session refused) lets a waiting socket go at once.
func TestAFeedThatNeverOpenedIsNotReady(t *testing.T) {
	t.Parallel()
	feed := &liveFeed{ready: make(chan struct{}), closed: make(chan struct{}), subs: map[*liveSub]struct{}{}}
	close(feed.closed)
	start := time.Now()
	if feed.awaitReady(context.Background(), time.Minute) || time.Since(start) > 10*time.Second {
		t.Fatalf("a closed feed was ready, or kept its socket waiting %s", time.Since(start))
	}
}
