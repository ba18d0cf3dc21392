package httpx

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/platform/reqid"
)

const localsRequestID = "cairn.request_id"

// RequestOptions tunes the request middleware per surface.
type RequestOptions struct {
	// KeepClientID, when it returns true for a request, keeps a well-formed
	// client-supplied X-Request-Id instead of issuing a new one.
	KeepClientID func(c *fiber.Ctx) bool
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
				logger.ErrorContext(c.UserContext(), "panic in handler",
					"request_id", id, "panic", p, "stack", string(debug.Stack()))
				err = WriteError(c, Problem{Status: http.StatusInternalServerError, Code: CodeInternal})
			}
			// API answers are never cached unless a handler said otherwise.
			if len(c.Response().Header.Peek(fiber.HeaderCacheControl)) == 0 {
				c.Set(fiber.HeaderCacheControl, "no-store")
			}
			status := c.Response().StatusCode()
			settleBody(c, status)
			logger.LogAttrs(c.UserContext(), levelFor(status), "request",
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

// settleBody makes sure no request bytes are left on the connection: with
// streamed bodies, anything a handler did not read would otherwise be
// parsed as the next request. A refused or chunked body is never read (the
// connection closes); a small leftover of a successful request is drained.
func settleBody(c *fiber.Ctx, status int) {
	// fasthttp reports -1 for a chunked body and -2 for none (GET, HEAD).
	if cl := c.Request().Header.ContentLength(); cl == 0 || cl == -2 {
		return
	}
	stream := c.Request().BodyStream()
	// A chunked stream read to its end cannot say so: reading it again
	// waits for another chunk, which never comes, and the answer is never
	// sent. Hanging up is the only safe way to leave one behind.
	if status >= 400 || stream == nil || c.Request().Header.ContentLength() == -1 {
		c.Context().SetConnectionClose()
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
// framework-level failures) as bounded error documents.
func ErrorHandler(logger *slog.Logger) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		status := http.StatusInternalServerError
		var fe *fiber.Error
		if errors.As(err, &fe) {
			status = fe.Code
		}
		if status >= 500 {
			logger.ErrorContext(c.UserContext(), "request failed",
				"request_id", RequestID(c), "status", strconv.Itoa(status), "error", err)
		}
		return WriteError(c, ProblemForStatus(status))
	}
}
