package v1

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humafiber"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/run"
)

const (
	// liveKeepAlive is how often an idle stream writes a comment, which is
	// how a gone client is noticed.
	liveKeepAlive = 15 * time.Second
	// liveMaxDuration ends a stream the client then resumes with after:
	// no request holds a connection forever.
	liveMaxDuration = 10 * time.Minute
)

type runEventsInput struct {
	IDPath
	After string `query:"after" maxLength:"20" pattern:"^[0-9]*$" doc:"Send chunks after this sequence; omitted, only what comes next."`
	// Session is the cookie the request authenticated with: a stream
	// re-resolves it on every change it relays, so a signed-out session or
	// a lost membership ends the stream at once, as it would a request.
	Session string `cookie:"__Secure-identity.session_token" hidden:"true"`
}

// liveEvent is one server-sent event of a run stream.
type liveEvent struct {
	Sequence  int64      `json:"sequence,omitempty"`
	Phase     string     `json:"phase,omitempty"`
	Body      string     `json:"body,omitempty"`
	Status    string     `json:"status,omitempty"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
}

func (a *API) registerLive() {
	register(a, huma.Operation{
		OperationID: "stream-run-events", Method: http.MethodGet, Path: "/v1/runs/{id}/events",
		Summary: "Stream a run's new log chunks and status changes", Tags: []string{"Runs"},
		Description: "Server-sent events, pushed when the database commits a change (no polling): ready (the starting sequence " +
			"and status), log (one sanitized chunk, id = sequence), status (the run's new status) and end (the run is terminal; the " +
			"stream closes). A stream lasts at most 10 minutes; resume with after. GET /v1/runs/{id}/logs stays authoritative.",
		Responses: map[string]*huma.Response{"200": {Description: "An event stream.",
			Content: map[string]*huma.MediaType{"text/event-stream": {Schema: &huma.Schema{Type: "string"}}}}},
	}, operationOptions{}, func(ctx context.Context, in *runEventsInput) (*huma.StreamResponse, error) {
		p, err := access.PrincipalFrom(ctx)
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		hub := a.deps.Services.RunEvents
		if hub == nil {
			return nil, a.fail(ctx, fault.ErrUnavailable)
		}
		runs := a.deps.Services.Runs
		r, err := runs.GetRun(ctx, p, in.ID)
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		// Subscribed before the first read: a change committed from here on
		// wakes the stream.
		sub, err := hub.Subscribe(ctx, r.ID)
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		after, err := strconv.ParseInt(in.After, 10, 64)
		if in.After == "" {
			after, err = runs.LastLogSequence(ctx, p, r.ID)
		} else if err != nil {
			// Digits past int64 pass the schema; they are still bad input.
			sub.Close()
			return nil, httpx.NewErrorBody(httpx.Problem{Status: http.StatusBadRequest, Code: httpx.CodeValidationFailed})
		}
		if err != nil {
			sub.Close()
			return nil, a.fail(ctx, err)
		}
		stream := liveStream{runs: runs, p: p, runID: r.ID, after: after, status: string(r.Status),
			reauthenticate: func(ctx context.Context) (access.Principal, error) {
				if in.Session == "" {
					return access.Principal{}, fault.ErrUnauthenticated
				}
				return a.deps.Sessions.AuthenticateSession(ctx, in.Session)
			}}
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			fc := humafiber.UnwrapV2(hctx)
			fc.Set("Content-Type", "text/event-stream")
			fc.Set("Cache-Control", "private, no-store")
			fc.Set("X-Accel-Buffering", "no")
			fc.Status(http.StatusOK)
			// The stream outlives the handler: fasthttp runs it once the
			// headers are written, on a context of its own.
			streamCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), liveMaxDuration)
			fc.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
				defer cancel()
				defer sub.Close()
				stream.run(streamCtx, w, sub.C)
			})
		}}, nil
	})
}

// liveStream relays one run to one client.
type liveStream struct {
	runs           *run.Service
	p              access.Principal
	reauthenticate func(context.Context) (access.Principal, error)
	runID          string
	after          int64
	status         string
}

func (s *liveStream) run(ctx context.Context, w *bufio.Writer, wake <-chan struct{}) {
	if writeEvent(w, "ready", "", liveEvent{Sequence: s.after, Status: s.status}) != nil {
		return
	}
	keepAlive := time.NewTicker(liveKeepAlive)
	defer keepAlive.Stop()
	for {
		done, err := s.catchUp(ctx, w)
		if done || err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-keepAlive.C:
			if _, err := w.WriteString(": keep-alive\n\n"); err != nil || w.Flush() != nil {
				return
			}
		}
	}
}

// catchUp sends every chunk after the last one sent and a status change;
// done once the run is terminal and its log is drained. The session is
// re-resolved after each read and before what was read is sent: what
// reaches the client was then committed while the session still held, so
// a chunk written after a sign-out never goes out.
func (s *liveStream) catchUp(ctx context.Context, w *bufio.Writer) (bool, error) {
	// The status is read before the log: every chunk a run wrote before it
	// ended is then visible to the reads below, so end never skips one.
	r, err := s.runs.GetRun(ctx, s.p, s.runID)
	if err != nil {
		return false, err
	}
	for {
		chunks, err := s.runs.Logs(ctx, s.p, s.runID, run.LogQuery{After: s.after})
		if err != nil {
			return false, err
		}
		if err := s.recheck(ctx); err != nil {
			return false, err
		}
		for _, c := range chunks {
			if err := writeEvent(w, "log", strconv.FormatInt(c.Sequence, 10),
				liveEvent{Sequence: c.Sequence, Phase: c.Phase, Body: c.Body, CreatedAt: &c.CreatedAt}); err != nil {
				return false, err
			}
			s.after = c.Sequence
		}
		if len(chunks) < run.MaxLogPage {
			break
		}
	}
	if string(r.Status) != s.status {
		s.status = string(r.Status)
		if err := writeEvent(w, "status", "", liveEvent{Status: s.status}); err != nil {
			return false, err
		}
	}
	if r.Status.Terminal() {
		return true, writeEvent(w, "end", "", liveEvent{Status: s.status})
	}
	return false, nil
}

// recheck re-resolves the stream's session: signed out, banned or moved to
// another organization, the stream ends.
func (s *liveStream) recheck(ctx context.Context) error {
	p, err := s.reauthenticate(ctx)
	if err != nil {
		return err
	}
	if p.OrganizationID != s.p.OrganizationID {
		// The session switched organizations: this run is not its own now.
		return fault.ErrNotFound
	}
	s.p = p
	return nil
}

func writeEvent(w *bufio.Writer, name, id string, ev liveEvent) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if id != "" {
		fmt.Fprintf(w, "id: %s\n", id)
	}
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
	return w.Flush()
}
