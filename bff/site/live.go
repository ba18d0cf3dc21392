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

// live is wss://{dashboard}/live/runs/{id}: authenticated by the dashboard
// session cookie with a strict Origin check. It relays the run's new log
// chunks and status changes until the run is terminal; a terminal run gets
// no socket. The HTTP log route stays authoritative: the browser falls back
// to it on any gap or disconnect.
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
	var run runSummary
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, &run); err != nil {
		http.Error(w, "run unavailable", http.StatusNotFound)
		return
	}
	if run.Terminal() {
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
	// than the run's when the socket opens; the first check then tells it.
	status := r.URL.Query().Get("status")
	if status == "" {
		status = run.Status
	}
	lastStatusCheck := time.Time{}
	ticker := time.NewTicker(s.opts.LivePoll)
	defer ticker.Stop()
	for {
		chunks, err := s.chunksAfter(ctx, token, id, after)
		if err != nil {
			_ = conn.Close(websocket.StatusTryAgainLater, "log unavailable")
			return
		}
		for _, c := range chunks {
			if err := wsjson.Write(ctx, conn, liveEvent{Type: "log", Sequence: c.Sequence, Phase: c.Phase, Body: c.Body, CreatedAt: &c.CreatedAt}); err != nil {
				return
			}
			after = c.Sequence
		}
		if time.Since(lastStatusCheck) >= time.Second || len(chunks) == 0 {
			lastStatusCheck = time.Now()
			var now runSummary
			if err := s.api.Call(ctx, token, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, &now); err != nil {
				_ = conn.Close(websocket.StatusTryAgainLater, "run unavailable")
				return
			}
			if now.Status != status {
				status = now.Status
				if err := wsjson.Write(ctx, conn, liveEvent{Type: "status", Status: status}); err != nil {
					return
				}
			}
			if now.Terminal() && len(chunks) == 0 {
				_ = wsjson.Write(ctx, conn, liveEvent{Type: "end", Status: status})
				_ = conn.Close(websocket.StatusNormalClosure, "run finished")
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
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
