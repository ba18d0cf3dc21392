// Package failuretest helps tests show that an unhandled failure is
// reported the one allowed way: its classification and opaque IDs, without
// the panic value, the error's text or a stack.
package failuretest

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Secret looks like a credential and Input like what a caller wrote: a
// test makes a failure carry them and checks that no log line does.
const (
	Secret = "sst_panicsecretpanicsecretpanicsecret"
	Input  = "alice@example.com/prod-db-password"
)

// Log captures what a logger writes, from any goroutine.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is everything logged so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Logger writes JSON lines of every level to l.
func (l *Log) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// RequireReport fails t unless text (JSON log lines) holds an
// unhandled_failure report of the classification with each of the want
// fragments (`"request_id":"req_…"`), and holds none of leaks nor a stack.
func RequireReport(t testing.TB, text, classification string, leaks []string, want ...string) {
	t.Helper()
	for _, leak := range append(leaks, "goroutine ", ".go:") {
		if strings.Contains(text, leak) {
			t.Fatalf("the log holds %q:\n%s", leak, text)
		}
	}
	for _, w := range append(want, `"event":"unhandled_failure"`, `"classification":"`+classification+`"`) {
		if !strings.Contains(text, w) {
			t.Fatalf("the log lacks %s:\n%s", w, text)
		}
	}
}
