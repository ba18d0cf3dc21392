package httpx_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/platform/httpx"
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

// TestFiberFailuresLogOnlyTheirClassification: a handler that panics with a
// secret-looking value, one that panics with an error wrapping user input,
// and one that returns such an error get a bare 500 with a request ID; the
// log says error or non_error and the request ID, nothing else.
func TestFiberFailuresLogOnlyTheirClassification(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, classification string
		handler              fiber.Handler
	}{
		{"panic with a value", "non_error", func(*fiber.Ctx) error { panic(secretValue) }},
		{"panic with an error", "error", func(*fiber.Ctx) error { panic(fmt.Errorf("reading %q: %w", userInput, errors.New(secretValue))) }},
		{"returned error", "error", func(*fiber.Ctx) error { return fmt.Errorf("decoding %s: %s", userInput, secretValue) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var log capturedLog
			app := fiber.New(fiber.Config{ErrorHandler: httpx.ErrorHandler(log.logger())})
			app.Use(httpx.RequestContext(log.logger(), httpx.RequestOptions{}))
			app.Get("/fail", tc.handler)
			resp, err := app.Test(httptest.NewRequest(http.MethodGet, "/fail", nil), -1)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			id := resp.Header.Get(reqid.Header)
			if resp.StatusCode != http.StatusInternalServerError || !reqid.Valid(id) ||
				bytes.Contains(body, []byte(secretValue)) || bytes.Contains(body, []byte(userInput)) {
				t.Fatalf("%d %s %s", resp.StatusCode, id, body)
			}
			checkFailureLog(t, log.String(), tc.classification, id)
		})
	}
}
