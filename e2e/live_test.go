package e2e

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	_ "github.com/lib/pq"
)

type liveMessage struct {
	Type      string     `json:"type"`
	Sequence  int64      `json:"sequence"`
	Body      string     `json:"body"`
	Status    string     `json:"status"`
	CreatedAt *time.Time `json:"created_at"`
}

// TestLiveChannelIsPushed drives the real API and dashboard: with no worker
// the run waits in the queue, chunks written as a runner writes them reach
// two sockets at once (one API stream serves both), a foreign Origin is
// refused, cancelling ends the sockets with an end event and a normal
// close, and a finished run gets no socket.
func TestLiveChannelIsPushed(t *testing.T) {
	t.Parallel()
	s := StartStack(t)
	s.KillWorker(t)
	m := s.newMember(t, "live")
	ws := s.createWorkspace(t, m, "live", "us")
	cfg := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": `resource "terraform_data" "x" {}`})
	st, r := s.createRun(t, m, ws, cfg, "plan_only")
	if st != http.StatusCreated {
		t.Fatalf("run: %d", st)
	}
	d := signInToDashboard(t, s, m.email)
	liveURL := strings.Replace(s.DashboardURL, "http", "ws", 1) + "/live/runs/" + r.ID

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, resp, err := websocket.Dial(ctx, liveURL, &websocket.DialOptions{HTTPClient: d.client,
		HTTPHeader: http.Header{"Origin": {"https://evil.example"}}}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign Origin: %v %v", err, resp)
	}
	dial := func() *websocket.Conn {
		t.Helper()
		conn, _, err := websocket.Dial(ctx, liveURL, &websocket.DialOptions{HTTPClient: d.client, HTTPHeader: http.Header{"Origin": {s.DashboardURL}}})
		if err != nil {
			t.Fatalf("opening the live channel: %v", err)
		}
		return conn
	}
	first, second := dial(), dial()
	defer first.CloseNow()
	defer second.CloseNow()

	db, err := sql.Open("postgres", s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for seq := 1; seq <= 3; seq++ {
		if _, err := db.Exec(`INSERT INTO run_log_chunks (run_id, sequence, phase, body) VALUES ($1, $2, 'plan', $3)`,
			r.ID, seq, "line "+strings.Repeat("x", seq)+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	for _, conn := range []*websocket.Conn{first, second} {
		for want := int64(1); want <= 3; want++ {
			var ev liveMessage
			if err := wsjson.Read(ctx, conn, &ev); err != nil {
				t.Fatalf("reading chunk %d: %v", want, err)
			}
			if ev.Type != "log" || ev.Sequence != want || ev.CreatedAt == nil {
				t.Fatalf("event %+v, want chunk %d", ev, want)
			}
		}
	}

	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/cancel", nil, nil, m.mutate(uniqueKey("cancel"))...); st != http.StatusOK {
		t.Fatalf("cancel: %d", st)
	}
	for _, conn := range []*websocket.Conn{first, second} {
		var last liveMessage
		for {
			var ev liveMessage
			err := wsjson.Read(ctx, conn, &ev)
			if err != nil {
				if websocket.CloseStatus(err) != websocket.StatusNormalClosure || last.Type != "end" || last.Status != "canceled" {
					t.Fatalf("socket ended with %v after %+v", err, last)
				}
				break
			}
			last = ev
		}
	}
	_, resp, err := websocket.Dial(ctx, liveURL, &websocket.DialOptions{HTTPClient: d.client, HTTPHeader: http.Header{"Origin": {s.DashboardURL}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusGone {
		t.Fatalf("socket for a finished run: %v %v", errors.Unwrap(err), resp)
	}
}
