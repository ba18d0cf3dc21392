package httpx_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/platform/failure/failuretest"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/platform/reqid"
)

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
		{"panic with a value", "non_error", func(*fiber.Ctx) error { panic(failuretest.Secret) }},
		{"panic with an error", "error", func(*fiber.Ctx) error {
			panic(fmt.Errorf("reading %q: %w", failuretest.Input, errors.New(failuretest.Secret)))
		}},
		{"returned error", "error", func(*fiber.Ctx) error { return fmt.Errorf("decoding %s: %s", failuretest.Input, failuretest.Secret) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var log failuretest.Log
			app := fiber.New(fiber.Config{ErrorHandler: httpx.ErrorHandler(log.Logger())})
			app.Use(httpx.RequestContext(log.Logger(), httpx.RequestOptions{}))
			app.Get("/fail", tc.handler)
			resp, err := app.Test(httptest.NewRequest(http.MethodGet, "/fail", nil), -1)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			id := resp.Header.Get(reqid.Header)
			if resp.StatusCode != http.StatusInternalServerError || !reqid.Valid(id) ||
				bytes.Contains(body, []byte(failuretest.Secret)) || bytes.Contains(body, []byte(failuretest.Input)) {
				t.Fatalf("%d %s %s", resp.StatusCode, id, body)
			}
			failuretest.RequireReport(t, log.String(), tc.classification, []string{failuretest.Secret, failuretest.Input}, `"request_id":"`+id+`"`)
		})
	}
}
