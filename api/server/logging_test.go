package server_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/assembly"
	"github.com/cairnhq/cairn/api/platform/failure/failuretest"
	"github.com/cairnhq/cairn/api/platform/reqid"
	"github.com/cairnhq/cairn/api/server"
)

// assembled is cairn-api's application as cairn-api builds it (without a
// database), logging every level to log.
func assembled(t *testing.T, log *failuretest.Log) *server.Server {
	t.Helper()
	deps, err := assembly.Assemble(apitest.TestConfig(), nil, log.Logger())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(deps)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestAssembledServerPanicsLogOnlyTheirClassification: a handler of the
// assembled application that panics with a secret-looking value or with an
// error wrapping a caller's input answers a bare 500 with a request ID, and
// the log holds the classification and that ID — no value, no stack.
func TestAssembledServerPanicsLogOnlyTheirClassification(t *testing.T) {
	t.Parallel()
	var log failuretest.Log
	srv := assembled(t, &log)
	srv.App.Get("/panic/value", func(*fiber.Ctx) error { panic(failuretest.Secret) })
	srv.App.Get("/panic/error", func(*fiber.Ctx) error {
		panic(fmt.Errorf("reading %s: %w", failuretest.Input, errors.New(failuretest.Secret)))
	})
	for path, classification := range map[string]string{"/panic/value": "non_error", "/panic/error": "error"} {
		before := len(log.String())
		resp, err := srv.App.Test(httptest.NewRequest(http.MethodGet, path, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		id := resp.Header.Get(reqid.Header)
		if resp.StatusCode != http.StatusInternalServerError || !reqid.Valid(id) ||
			strings.Contains(string(body), failuretest.Secret) || strings.Contains(string(body), failuretest.Input) {
			t.Fatalf("%s: %d %q %s", path, resp.StatusCode, id, body)
		}
		failuretest.RequireReport(t, log.String()[before:], classification,
			[]string{failuretest.Secret, failuretest.Input}, `"request_id":"`+id+`"`)
	}
}

// TestProbesLogAtDebugUnlessTheyFail: health and readiness probes, which
// monitoring repeats every few seconds, log at debug level, so an idle
// installation's log stays empty; a failing probe still warns, and other
// requests log at info.
func TestProbesLogAtDebugUnlessTheyFail(t *testing.T) {
	t.Parallel()
	var log failuretest.Log
	srv := assembled(t, &log)
	for _, tc := range []struct {
		path   string
		status int
		level  slog.Level
	}{
		{"/health", http.StatusOK, slog.LevelDebug},
		// Without a database the API is not ready: that is news.
		{"/ready", http.StatusServiceUnavailable, slog.LevelWarn},
		{"/v1/openapi.json", http.StatusOK, slog.LevelInfo},
	} {
		before := len(log.String())
		resp, err := srv.App.Test(httptest.NewRequest(http.MethodGet, tc.path, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != tc.status {
			t.Fatalf("%s answered %d", tc.path, resp.StatusCode)
		}
		line := ""
		for _, l := range strings.Split(log.String()[before:], "\n") {
			if strings.Contains(l, `"msg":"request"`) {
				line = l
			}
		}
		if !strings.Contains(line, `"level":"`+tc.level.String()+`"`) {
			t.Errorf("%s logged %q, want level %s", tc.path, line, tc.level)
		}
	}
}
