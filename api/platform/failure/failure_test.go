package failure_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/cairnhq/cairn/api/platform/failure"
	"github.com/cairnhq/cairn/api/platform/reqid"
)

// secretValue looks like a credential; userInput like what a caller sent.
const (
	secretValue = "sst_panicsecretpanicsecretpanicsecret"
	userInput   = "alice@example.com/prod-db-password"
)

// capturedLog collects every log line a surface writes.
type capturedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *capturedLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *capturedLog) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func (c *capturedLog) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// checkFailureLog: the log names the failure's fixed classification and the
// request ID, and holds neither the secret, the user's input, nor a stack.
func checkFailureLog(t *testing.T, log, classification, requestID string) {
	t.Helper()
	for _, leak := range []string{secretValue, userInput, "goroutine ", ".go:"} {
		if strings.Contains(log, leak) {
			t.Fatalf("the log holds %q:\n%s", leak, log)
		}
	}
	for _, want := range []string{`"event":"unhandled_failure"`, `"classification":"` + classification + `"`, `"request_id":"` + requestID + `"`} {
		if !strings.Contains(log, want) {
			t.Fatalf("the log lacks %s:\n%s", want, log)
		}
	}
}

// TestNetHTTPPanicsLogOnlyTheirClassification: Recover turns a panic into a
// bare 500 with the request ID (the client's, when well formed) and logs
// only the classification and that ID; a deliberate abort stays an abort.
func TestNetHTTPPanicsLogOnlyTheirClassification(t *testing.T) {
	t.Parallel()
	var log capturedLog
	var seen string
	handler := failure.Recover(log.logger(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = reqid.From(r.Context())
		switch r.URL.Path {
		case "/value":
			panic(secretValue)
		case "/error":
			panic(fmt.Errorf("parsing %s: %w", userInput, errors.New(secretValue)))
		case "/abort":
			panic(http.ErrAbortHandler)
		}
	}))
	for _, tc := range []struct{ path, classification, sent string }{
		{"/value", "non_error", ""},
		{"/error", "error", reqid.New()},
	} {
		log.buf.Reset()
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.sent != "" {
			req.Header.Set(reqid.Header, tc.sent)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		id := rec.Header().Get(reqid.Header)
		if rec.Code != http.StatusInternalServerError || !reqid.Valid(id) || id != seen || (tc.sent != "" && id != tc.sent) ||
			strings.Contains(rec.Body.String(), secretValue) || strings.Contains(rec.Body.String(), userInput) {
			t.Fatalf("%s: %d %q (handler saw %q) %s", tc.path, rec.Code, id, seen, rec.Body)
		}
		checkFailureLog(t, log.String(), tc.classification, id)
	}
	defer func() {
		if p := recover(); p != http.ErrAbortHandler {
			t.Fatalf("an abort became %v", p)
		}
	}()
	handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/abort", nil))
}
