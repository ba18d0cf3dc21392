package site

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/failure/failuretest"
	"github.com/cairnhq/cairn/api/platform/reqid"
	"github.com/cairnhq/cairn/bff/session"
)

// TestDashboardPanicsLogOnlyTheirClassification: a panic anywhere under the
// dashboard's handler (here the control-plane proxy, once with a
// secret-looking value and once with an error wrapping a user's input) is a
// bare 500 with a request ID, and the log line holds the classification and
// that ID only: no value, no input, no stack.
func TestDashboardPanicsLogOnlyTheirClassification(t *testing.T) {
	t.Parallel()
	const secret, input = "sst_dashboardpanicsecretsecretsecret", "bob@example.com:hunter2"
	var log failuretest.Log
	logger := log.Logger()
	var failure any
	api, _ := url.Parse("http://127.0.0.1:9")
	s, err := New(Options{APIURL: api, Logger: logger, Sessions: session.New(nil, config.Config{}, false, logger),
		Proxy: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(failure) })})
	if err != nil {
		t.Fatal(err)
	}
	handler := s.Handler()
	for _, tc := range []struct {
		failure        any
		classification string
	}{
		{secret, "non_error"},
		{fmt.Errorf("forwarding %s: %w", input, errors.New(secret)), "error"},
	} {
		failure = tc.failure
		before := len(log.String())
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/control-plane/v1/runs", nil))
		id := rec.Header().Get(reqid.Header)
		line := log.String()[before:]
		if rec.Code != http.StatusInternalServerError || !reqid.Valid(id) || strings.Contains(rec.Body.String(), secret) {
			t.Fatalf("%d %q %s", rec.Code, id, rec.Body)
		}
		failuretest.RequireReport(t, line, tc.classification, []string{secret, input}, `"request_id":"`+id+`"`)
	}
}
