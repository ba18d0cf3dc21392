package failure

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/cairnhq/cairn/api/platform/reqid"
)

// Classify is a failure's whole description: "error" when it is an error
// value, "non_error" for anything else a panic carried.
func Classify(v any) string {
	if _, ok := v.(error); ok {
		return "error"
	}
	return "non_error"
}

// Report logs v as the unhandled_failure event at error level: its
// classification and ids, which must be opaque identifiers (a request ID,
// a job's kind and IDs) and nothing a caller wrote.
func Report(ctx context.Context, logger *slog.Logger, v any, ids ...slog.Attr) {
	attrs := append([]slog.Attr{slog.String("event", "unhandled_failure"), slog.String("classification", Classify(v))}, ids...)
	logger.LogAttrs(ctx, slog.LevelError, "unhandled failure", attrs...)
}

// RequestID is the request_id attribute of a report; an ID that is not a
// well-formed request ID is left out.
func RequestID(id string) slog.Attr {
	if !reqid.Valid(id) {
		return slog.Attr{}
	}
	return slog.String("request_id", id)
}

// Recover is the outermost handler of Cairn's net/http servers (the
// dashboard, the agent endpoint, the worker's health endpoint). It gives
// every request a request ID in its context (a well-formed X-Request-Id the
// client sent, or a new one) and turns a panic into a bare 500 carrying
// that ID. The panic is reported with its classification and the request
// ID only, never the value or the stack net/http would otherwise log.
func Recover(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(reqid.Header)
		if !reqid.Valid(id) {
			id = reqid.New()
		}
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				// The deliberate abort of a response (a reverse proxy's
				// broken copy): net/http ends it without a log line.
				panic(p)
			}
			Report(r.Context(), logger, p, RequestID(id))
			// Whatever was written stays written; only a response not
			// yet started can still become the 500.
			w.Header().Set(reqid.Header, id)
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "internal error (request "+id+")", http.StatusInternalServerError)
		}()
		next.ServeHTTP(w, r.WithContext(reqid.With(r.Context(), id)))
	})
}
