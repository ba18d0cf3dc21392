package httpx

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/platform/failure"
	"github.com/cairnhq/cairn/api/platform/reqid"
)

const localsRequestID = "cairn.request_id"

// RequestOptions tunes the request middleware per surface.
type RequestOptions struct {
	// KeepClientID, when it returns true for a request, keeps a well-formed
	// client-supplied X-Request-Id instead of issuing a new one.
	KeepClientID func(c *fiber.Ctx) bool
	// Probe, when it returns true for a request, logs its answer at debug
	// level unless it failed: load balancers and orchestrators call health
	// and metrics endpoints every few seconds, which would otherwise fill
	// an idle installation's log.
	Probe func(c *fiber.Ctx) bool
}

// RequestContext is the outermost middleware of the API: it assigns the
// request ID (header, locals and context), turns panics into a bounded 500,
// writes one access-log line per request and marks API answers uncacheable.
func RequestContext(logger *slog.Logger, opts RequestOptions) fiber.Handler {
	return func(c *fiber.Ctx) (err error) {
		started := time.Now()
		id := ""
		if opts.KeepClientID != nil && opts.KeepClientID(c) {
			if supplied := c.Get(reqid.Header); reqid.Valid(supplied) {
				id = supplied
			}
		}
		if id == "" {
			id = reqid.New()
		}
		c.Locals(localsRequestID, id)
		c.SetUserContext(reqid.With(c.UserContext(), id))
		c.Set(reqid.Header, id)
		c.Set(fiber.HeaderXContentTypeOptions, "nosniff")

		defer func() {
			if p := recover(); p != nil {
				// Only the fixed classification and the request ID: the
				// panic value and the stack can hold the request's data.
				failure.Report(c.UserContext(), logger, p, failure.RequestID(id))
				err = WriteError(c, Problem{Status: http.StatusInternalServerError, Code: CodeInternal})
			}
			// API answers are never cached unless a handler said otherwise.
			if len(c.Response().Header.Peek(fiber.HeaderCacheControl)) == 0 {
				c.Set(fiber.HeaderCacheControl, "no-store")
			}
			status := c.Response().StatusCode()
			settleBody(c, status)
			level := levelFor(status)
			if level == slog.LevelInfo && status < 400 && opts.Probe != nil && opts.Probe(c) {
				level = slog.LevelDebug
			}
			logger.LogAttrs(c.UserContext(), level, "request",
				slog.String("request_id", id),
				slog.String("method", c.Method()),
				slog.String("route", c.Route().Path),
				slog.Int("status", status),
				slog.Int64("duration_us", time.Since(started).Microseconds()))
		}()
		if err := c.Next(); err != nil {
			// Render the error here rather than after this middleware
			// returns, so the access log sees the final status.
			return c.App().Config().ErrorHandler(c, err)
		}
		return nil
	}
}

// unreadBodyAllowance is how much of an unread request body is drained to
// keep a keep-alive connection usable.
const unreadBodyAllowance = 64 << 10

// refusedBodyAllowance is how much of a refused request's unread body is
// read and dropped before the refusal is sent, and refusedBodyDrainTime
// how long that may take. Common HTTP clients (Go's, curl without
// Expect: 100-continue, browsers' fetch) write the whole body before they
// read an answer; if the server closes with unread bytes in its receive
// buffer, the kernel resets the connection and the client reports a
// transport error instead of the 413 with its request ID, which it may
// well retry. Draining a bounded amount lets such a client finish writing
// and read the refusal. Nothing drained is kept; a larger declared body
// and a chunked one (cut at its limit) are not read further: that
// connection is closed at once. The allowance sits well above the common
// 1 MiB document limits so that a body just over one of them is still
// answered rather than reset.
const (
	refusedBodyAllowance = 4 << 20
	refusedBodyDrainTime = 5 * time.Second
)

// settleBody makes sure no request bytes are left on the connection: with
// streamed bodies, anything a handler did not read would otherwise be
// parsed as the next request. A refused body is drained within bounds and
// the connection closed; a chunked body is never read again (the
// connection closes); a small leftover of a successful request is drained.
func settleBody(c *fiber.Ctx, status int) {
	// fasthttp reports -1 for a chunked body and -2 for none (GET, HEAD).
	cl := c.Request().Header.ContentLength()
	if cl == 0 || cl == -2 {
		return
	}
	stream := c.Request().BodyStream()
	// A chunked stream read to its end cannot say so: reading it again
	// waits for another chunk, which never comes, and the answer is never
	// sent. Hanging up is the only safe way to leave one behind.
	if stream == nil || cl == -1 {
		c.Context().SetConnectionClose()
		return
	}
	if status >= 400 {
		c.Context().SetConnectionClose()
		if cl > 0 && cl <= refusedBodyAllowance {
			_ = c.Context().Conn().SetReadDeadline(time.Now().Add(refusedBodyDrainTime))
			_, _ = io.CopyN(io.Discard, stream, refusedBodyAllowance)
		}
		return
	}
	if n, _ := io.CopyN(io.Discard, stream, unreadBodyAllowance+1); n > unreadBodyAllowance {
		c.Context().SetConnectionClose()
	}
}

func levelFor(status int) slog.Level {
	if status >= 500 {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// RequestID returns the request ID assigned by RequestContext.
func RequestID(c *fiber.Ctx) string {
	id, _ := c.Locals(localsRequestID).(string)
	return id
}

// WriteError writes a /v1-shaped error document for a problem.
func WriteError(c *fiber.Ctx, p Problem) error {
	body := NewErrorBody(p)
	for k, values := range body.GetHeaders() {
		for _, v := range values {
			c.Set(k, v)
		}
	}
	return c.Status(p.Status).JSON(Stamp(body, RequestID(c)))
}

// ErrorHandler renders errors that escape Fiber handlers (unknown routes,
// framework-level failures) as bounded error documents. A request the
// server refused before any middleware ran (a malformed multipart body,
// say) gets its request ID here, so every answer carries one.
func ErrorHandler(logger *slog.Logger) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		if RequestID(c) == "" {
			id := reqid.New()
			c.Locals(localsRequestID, id)
			c.Set(reqid.Header, id)
		}
		status := http.StatusInternalServerError
		var fe *fiber.Error
		if errors.As(err, &fe) {
			status = fe.Code
		}
		if status >= 500 {
			failure.Report(c.UserContext(), logger, err, failure.RequestID(RequestID(c)))
		}
		return WriteError(c, ProblemForStatus(status))
	}
}
