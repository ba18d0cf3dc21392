package site

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// liveEvent is one message of the live run channel: a log chunk in
// sequence order, or the run's new status (the page then re-reads the
// review).
type liveEvent struct {
	Type     string `json:"type"` // "log", "status" or "end"
	Sequence int64  `json:"sequence,omitempty"`
	Phase    string `json:"phase,omitempty"`
	Body     string `json:"body,omitempty"`
	Status   string `json:"status,omitempty"`
	// CreatedAt is when the chunk was committed, so a client can measure
	// the channel's latency.
	CreatedAt *time.Time `json:"created_at,omitempty"`
}

// liveRecheck is how long a socket relays on the authorization it was
// opened with before its session and launch access are checked again.
const liveRecheck = time.Minute

// live is wss://{dashboard}/live/runs/{id}: authenticated by the dashboard
// session cookie with a strict Origin check and the run's launch-access
// probe, per socket. It relays the run's new log chunks and status changes
// until the run is terminal; a terminal run gets no socket. Events come
// from the run's shared feed (one API stream for every viewer), so an idle
// run costs no requests. The HTTP log route stays authoritative: the
// socket starts from it, and the browser falls back to it on any gap or
// disconnect.
func (s *Site) live(w http.ResponseWriter, r *http.Request) {
	token, ok := s.sessions.APIToken(r.Context())
	if !ok {
		http.Error(w, "sign in first", http.StatusUnauthorized)
		return
	}
	if r.Header.Get("Origin") != s.opts.Origin {
		http.Error(w, "cross-origin live channel refused", http.StatusForbidden)
		return
	}
	id := r.PathValue("id")
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if err := s.probe(r.Context(), token, "/runs/"+url.PathEscape(id)); err != nil {
		writeRefusal(w, err) // the upstream status, request ID and Retry-After
		return
	}
	// The feed is the only source of the run's status: a read of our own
	// before it opened could miss a change committed in between, and the
	// page would wait on a socket that never reports it.
	feed, sub := s.feeds.join(id, token)
	defer s.feeds.leave(feed, sub)
	if !feed.awaitReady(r.Context(), 10*time.Second) {
		http.Error(w, "live feed unavailable", http.StatusServiceUnavailable)
		return
	}
	current := feed.currentStatus()
	if terminal(current) {
		http.Error(w, "run is finished", http.StatusGone)
		return
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: []string{hostOf(s.opts.Origin)}})
	if err != nil {
		return
	}
	defer conn.CloseNow()
	// The browser never sends anything; reading keeps pings and close
	// frames flowing and ends ctx when the page goes away.
	ctx := conn.CloseRead(r.Context())
	// Changes are relative to the status the page shows, which may be older
	// than the run's when the socket opens.
	status := r.URL.Query().Get("status")
	if status == "" {
		status = current
	}
	send := func(ev liveEvent) bool { return wsjson.Write(ctx, conn, ev) == nil }
	// The backlog since the page's last chunk comes from the log route;
	// the feed carries everything newer. Sequences drop what both deliver.
	for {
		chunks, err := s.chunksAfter(ctx, token, id, after)
		if err != nil {
			_ = conn.Close(websocket.StatusTryAgainLater, "log unavailable")
			return
		}
		for _, c := range chunks {
			if !send(liveEvent{Type: "log", Sequence: c.Sequence, Phase: c.Phase, Body: c.Body, CreatedAt: &c.CreatedAt}) {
				return
			}
			after = c.Sequence
		}
		if len(chunks) < 100 {
			break
		}
	}
	if current != status {
		status = current
		if !send(liveEvent{Type: "status", Status: status}) {
			return
		}
	}
	checked := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, open := <-sub.events:
			if !open {
				// Dropped for falling behind, or the feed ended without an
				// end event: the browser resumes from the HTTP route.
				_ = conn.Close(websocket.StatusTryAgainLater, "live feed interrupted")
				return
			}
			// The feed may stream with another viewer's session: this
			// socket's own is checked again before it is sent more, at
			// most once a minute and only when there is something to send.
			if time.Since(checked) > liveRecheck {
				if err := s.probe(ctx, token, "/runs/"+url.PathEscape(id)); err != nil {
					_ = conn.Close(websocket.StatusPolicyViolation, "run unavailable")
					return
				}
				checked = time.Now()
			}
			switch ev.Type {
			case "log":
				if ev.Sequence <= after {
					continue
				}
				after = ev.Sequence
			case "status":
				if ev.Status == status {
					continue
				}
				status = ev.Status
			}
			if !send(ev) {
				return
			}
			if ev.Type == "end" {
				_ = conn.Close(websocket.StatusNormalClosure, "run finished")
				return
			}
		}
	}
}

type logChunk struct {
	Sequence  int64     `json:"sequence"`
	Phase     string    `json:"phase"`
	Body      string    `json:"body"`
	CreatedAt time.Time `json:"created_at"`
}

func (s *Site) chunksAfter(ctx context.Context, token, runID string, after int64) ([]logChunk, error) {
	var chunks []logChunk
	err := s.api.Call(ctx, token, http.MethodGet,
		"/v1/runs/"+url.PathEscape(runID)+"/logs?limit=100&after="+strconv.FormatInt(after, 10), nil, &chunks)
	return chunks, err
}

func hostOf(origin string) string {
	u, err := url.Parse(origin)
	if err != nil {
		return origin
	}
	return u.Host
}
