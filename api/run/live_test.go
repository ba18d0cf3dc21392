package run_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/authserver"
	"github.com/cairnhq/cairn/api/run"
)

type streamEvent struct {
	Name     string
	Sequence int64  `json:"sequence"`
	Body     string `json:"body"`
	Status   string `json:"status"`
}

// openEvents opens the run's event stream and returns its events as they
// arrive.
func (h *harness) openEvents(ctx context.Context, runID, query string) <-chan streamEvent {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.env.URL+"/v1/runs/"+runID+"/events"+query, nil)
	req.Header.Set("Cookie", authserver.SessionCookie+"="+h.owner.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		h.t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan streamEvent, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var name string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev := streamEvent{Name: name}
				_ = json.Unmarshal([]byte(v), &ev)
				out <- ev
			}
		}
	}()
	return out
}

func next(t *testing.T, events <-chan streamEvent) streamEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("stream ended early")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return streamEvent{}
}

// TestRunEventsArePushed: the stream starts at the newest chunk, receives a
// chunk the moment its insert commits (the database notifies; nothing
// polls), resumes from a sequence with after, reports status changes and
// ends when the run does. Another organization sees no stream.
func TestRunEventsArePushed(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("pushed")
	r := h.createRun(ws)
	st := h.start(r, run.PhasePlan)
	sink, err := h.runs.NewLogSink(h.ctx, r.ID, run.PhasePlan, nil)
	if err != nil {
		t.Fatal(err)
	}
	write := func(line string) {
		t.Helper()
		if _, err := sink.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		if err := sink.Flush(h.ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	write("before the stream")

	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	events := h.openEvents(ctx, r.ID, "")
	if ev := next(t, events); ev.Name != "ready" || ev.Sequence != 1 || ev.Status != "planning" {
		t.Fatalf("first event %+v", ev)
	}
	start := time.Now()
	write("pushed line")
	if ev := next(t, events); ev.Name != "log" || ev.Sequence != 2 || ev.Body != "pushed line\n" {
		t.Fatalf("pushed chunk %+v", ev)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("chunk took %v", waited)
	}

	// A second stream resumes after a sequence: both chunks, in order.
	resumed := h.openEvents(ctx, r.ID, "?after=0")
	if ev := next(t, resumed); ev.Name != "ready" || ev.Sequence != 0 {
		t.Fatalf("resumed ready %+v", ev)
	}
	for want := int64(1); want <= 2; want++ {
		if ev := next(t, resumed); ev.Name != "log" || ev.Sequence != want {
			t.Fatalf("resumed chunk %d: %+v", want, ev)
		}
	}

	// Cancelling ends the run: a status change, then end.
	if err := h.inTx(func(tx *sqlx.Tx) error {
		_, err := h.runs.Cancel(h.ctx, tx, h.ownerPrincipal(), r.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The canceled plan's sandbox stops; the run ends.
	if _, err := h.runs.FailUnstartedAttempt(h.ctx, st.Attempt.ID, "sandbox_failed", nil, run.Timings{}); err != nil {
		t.Fatal(err)
	}
	var final streamEvent
	for ev := range events {
		final = ev
		if ev.Name == "end" {
			break
		}
	}
	if final.Name != "end" || !run.Status(final.Status).Terminal() {
		t.Fatalf("last event %+v, want end with a terminal status", final)
	}

	stranger := h.env.WithOrganization("stranger")
	req, _ := http.NewRequest(http.MethodGet, h.env.URL+"/v1/runs/"+r.ID+"/events", nil)
	req.Header.Set("Cookie", authserver.SessionCookie+"="+stranger.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another organization's stream = %d", resp.StatusCode)
	}
}

// TestRunEventsEndWithTheSession: a stream re-resolves its session on each
// change, so signing out ends it before it relays anything more.
func TestRunEventsEndWithTheSession(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.createRun(h.workspace("signed-out"))
	h.start(r, run.PhasePlan)
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	events := h.openEvents(ctx, r.ID, "")
	if ev := next(t, events); ev.Name != "ready" {
		t.Fatalf("first event %+v", ev)
	}
	h.owner.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-out"}).MustStatus(t, http.StatusOK)
	sink, err := h.runs.NewLogSink(h.ctx, r.ID, run.PhasePlan, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = sink.Write([]byte("after sign-out\n"))
	if err := sink.Flush(h.ctx, false); err != nil {
		t.Fatal(err)
	}
	select {
	case ev, open := <-events:
		if open {
			t.Fatalf("a signed-out stream relayed %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream outlived its session")
	}
}

// TestRunEventsRefuseAnOverflowingAfter: after is bounded input; a value
// past int64 is a validation error, not a server error.
func TestRunEventsRefuseAnOverflowingAfter(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.createRun(h.workspace("overflow"))
	req, _ := http.NewRequest(http.MethodGet, h.env.URL+"/v1/runs/"+r.ID+"/events?after=99999999999999999999", nil)
	req.Header.Set("Cookie", authserver.SessionCookie+"="+h.owner.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity && resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("after past int64 = %d, want a validation error", resp.StatusCode)
	}
}
