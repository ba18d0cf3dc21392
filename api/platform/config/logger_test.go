package config

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestLibraryLoggerDemotesInfoOnly: a library's info lines are gone at the
// default level and come out as debug at debug level; its warnings and
// errors, and the attributes and groups it adds, pass unchanged.
func TestLibraryLoggerDemotesInfoOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		level slog.Level
		want  []string
		not   []string
	}{
		{slog.LevelInfo, []string{`level=WARN msg=slow`, `level=ERROR msg=failed`}, []string{"Producer job counts", "DEBUG"}},
		{slog.LevelDebug, []string{`level=DEBUG msg="Producer job counts" lib=river queue=default`, `level=WARN msg=slow`}, []string{"level=INFO"}},
	} {
		var buf bytes.Buffer
		logger := LibraryLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level})))
		logger.With("lib", "river").Info("Producer job counts", "queue", "default")
		logger.Warn("slow")
		logger.WithGroup("g").Error("failed", "n", 1)
		out := buf.String()
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("at %s the log lacks %q:\n%s", tc.level, w, out)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(out, n) {
				t.Errorf("at %s the log holds %q:\n%s", tc.level, n, out)
			}
		}
	}
}
