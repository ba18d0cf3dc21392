package problem_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/reqid"
	"github.com/cairnhq/cairn/api/problem"
)

// TestUnmappedErrorsLogOnlyTheirClassification: an error nothing maps is
// answered as a bare 500 and logged as an unhandled failure with the
// request ID; a mapped 5xx logs its fixed code. Neither log line holds the
// error's text, which here carries a caller's input and a secret.
func TestUnmappedErrorsLogOnlyTheirClassification(t *testing.T) {
	t.Parallel()
	const input, secret = "DROP TABLE users; -- alice@example.com", "cut_secretsecretsecretsecret"
	id := reqid.New()
	ctx := reqid.With(context.Background(), id)
	for _, tc := range []struct {
		err    error
		status int
		want   []string
	}{
		{fmt.Errorf("decoding %q with %s: %w", input, secret, errors.New("unexpected EOF")), http.StatusInternalServerError,
			[]string{`"event":"unhandled_failure"`, `"classification":"error"`, `"request_id":"` + id + `"`}},
		{fmt.Errorf("reading %q with %s: %w", input, secret, fault.ErrUnavailable), http.StatusServiceUnavailable,
			[]string{`"code":"UNAVAILABLE"`, `"request_id":"` + id + `"`}},
	} {
		var log bytes.Buffer
		p := problem.Of(ctx, slog.New(slog.NewJSONHandler(&log, nil)), tc.err)
		if p.Status != tc.status {
			t.Fatalf("%v: status %d, want %d", tc.err, p.Status, tc.status)
		}
		for _, leak := range []string{input, secret, "unexpected EOF"} {
			if strings.Contains(log.String(), leak) {
				t.Fatalf("the log holds %q: %s", leak, log.String())
			}
		}
		for _, want := range tc.want {
			if !strings.Contains(log.String(), want) {
				t.Fatalf("the log lacks %s: %s", want, log.String())
			}
		}
	}
}
