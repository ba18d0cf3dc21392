package failure_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/platform/failure"
	"github.com/cairnhq/cairn/api/platform/failure/failuretest"
	"github.com/cairnhq/cairn/api/platform/reqid"
)

// TestNetHTTPPanicsLogOnlyTheirClassification: Recover turns a panic into a
// bare 500 with the request ID (the client's, when well formed) and logs
// only the classification and that ID; a deliberate abort stays an abort.
func TestNetHTTPPanicsLogOnlyTheirClassification(t *testing.T) {
	t.Parallel()
	var log failuretest.Log
	var seen string
	handler := failure.Recover(log.Logger(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = reqid.From(r.Context())
		switch r.URL.Path {
		case "/value":
			panic(failuretest.Secret)
		case "/error":
			panic(fmt.Errorf("parsing %s: %w", failuretest.Input, errors.New(failuretest.Secret)))
		case "/abort":
			panic(http.ErrAbortHandler)
		}
	}))
	for _, tc := range []struct{ path, classification, sent string }{
		{"/value", "non_error", ""},
		{"/error", "error", reqid.New()},
	} {
		before := len(log.String())
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.sent != "" {
			req.Header.Set(reqid.Header, tc.sent)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		id := rec.Header().Get(reqid.Header)
		if rec.Code != http.StatusInternalServerError || !reqid.Valid(id) || id != seen || (tc.sent != "" && id != tc.sent) ||
			strings.Contains(rec.Body.String(), failuretest.Secret) || strings.Contains(rec.Body.String(), failuretest.Input) {
			t.Fatalf("%s: %d %q (handler saw %q) %s", tc.path, rec.Code, id, seen, rec.Body)
		}
		failuretest.RequireReport(t, log.String()[before:], tc.classification, []string{failuretest.Secret, failuretest.Input}, `"request_id":"`+id+`"`)
	}
	defer func() {
		if p := recover(); p != http.ErrAbortHandler {
			t.Fatalf("an abort became %v", p)
		}
	}()
	handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/abort", nil))
}
