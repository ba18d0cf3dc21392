package v1_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/assembly"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/platform/httpx/httpxtest"
	"github.com/cairnhq/cairn/api/platform/jsondoc"
	"github.com/cairnhq/cairn/api/platform/jsondoc/jsondoctest"
	"github.com/cairnhq/cairn/api/server"
	v1 "github.com/cairnhq/cairn/api/v1"
)

// echoLimit is small so that fuzzed bodies cross it.
const echoLimit = 256

// FuzzBodyLimit drives the body path every /v1 operation shares, on the
// whole cairn-api application without a database: a test-only echo
// operation with a 256-byte limit, and POST /v1/projects with the
// ordinary 64 KiB limit (padding carries a body past it). Properties: a
// body over the limit is 413 PAYLOAD_TOO_LARGE whether its length was
// declared or it was chunked (unless refused before it is read: an
// unstorable query, or no database), one within it never is; an accepted body is
// one JSON document decoded as encoding/json reads it, with its query, and
// holds nothing PostgreSQL cannot store; nothing is a 5xx except the
// fail-closed 503 of a protected operation; every error is the bounded
// error object naming the request ID the header carries.
func FuzzBodyLimit(f *testing.F) {
	deps, err := assembly.Assemble(apitest.TestConfig(), nil, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	srv, err := server.New(deps)
	if err != nil {
		f.Fatal(err)
	}
	v1.RegisterEcho(srv.V1, echoLimit)

	for _, s := range []string{
		`{"name":"prod","count":3,"tags":["a"],"labels":{"team":"infra"}}`,
		`{"name":"x"}}`, `{"name":"a\u0000b"}`, `{"name":""}`, `{"name":"x","extra":true}`, `{"name":"x"} `,
		`{"name":"` + strings.Repeat("n", 300) + `"}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s), "main", false, uint16(0), uint8(0), uint32(0))
		f.Add([]byte(s), "a\x00b", true, uint16(3), uint8(0), uint32(0))
		f.Add([]byte(s), "", false, uint16(0), uint8(1), uint32(v1.JSONBodyLimit-len(s)))
		f.Add([]byte(s), "\xff", true, uint16(7), uint8(1), uint32(v1.JSONBodyLimit-len(s)+1))
	}
	f.Fuzz(func(t *testing.T, body []byte, query string, chunked bool, split uint16, route uint8, pad uint32) {
		req := httpxtest.Request{
			Method: http.MethodPost, Target: v1.EchoPath + "?q=" + url.QueryEscape(query),
			Header:  [][2]string{{"Content-Type", "application/json"}, {"Idempotency-Key", "fuzz-1"}},
			Body:    body,
			Chunked: chunked, Split: int(split),
		}
		limit := int64(echoLimit)
		if route%2 == 1 {
			req.Target, limit = "/v1/projects", v1.JSONBodyLimit
			req.Body = append(bytes.Clone(body), bytes.Repeat([]byte(" "), int(pad%(2*v1.JSONBodyLimit)))...)
		}
		resp, err := httpxtest.Do(srv.App, req)
		if err != nil {
			t.Fatal(err)
		}
		over := int64(len(req.Body)) > limit
		storableQuery := jsondoc.StorableText(query)
		switch {
		// A chunked body is measured as it is read, so a request refused
		// before its body is read keeps that refusal.
		case over && chunked && route%2 == 1:
			requireProblem(t, resp, http.StatusServiceUnavailable, httpx.CodeUnavailable)
		case over && chunked && !storableQuery:
			requireProblem(t, resp, http.StatusBadRequest, httpx.CodeValidationFailed)
		case over:
			requireProblem(t, resp, http.StatusRequestEntityTooLarge, httpx.CodePayloadTooLarge)
		case resp.Status == http.StatusRequestEntityTooLarge:
			t.Fatalf("%d-byte body within the %d-byte limit refused as too large", len(req.Body), limit)
		case route%2 == 1:
			requireProblem(t, resp, http.StatusServiceUnavailable, httpx.CodeUnavailable)
		case resp.Status == http.StatusOK:
			requireEchoed(t, req.Body, query, resp.Body)
		default:
			requireProblem(t, resp, http.StatusBadRequest, httpx.CodeValidationFailed)
		}
	})
}

// requireProblem checks an error answer: the status and code wanted, and
// the bounded error object with nothing else in it.
func requireProblem(t *testing.T, resp httpxtest.Response, status int, code string) {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("answered %d %s, want %d %s", resp.Status, resp.Body, status, code)
	}
	var got struct {
		Error struct {
			Status    int    `json:"status"`
			Code      string `json:"code"`
			RequestID string `json:"request_id"`
		} `json:"error"`
		Meta struct {
			RequestID string `json:"request_id"`
		} `json:"meta"`
	}
	dec := json.NewDecoder(bytes.NewReader(resp.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("error body %s: %v", resp.Body, err)
	}
	id := resp.Header.Get("X-Request-Id")
	if got.Error.Status != status || got.Error.Code != code || id == "" || got.Error.RequestID != id || got.Meta.RequestID != id {
		t.Fatalf("error body %s with X-Request-Id %q, want status %d and code %s", resp.Body, id, status, code)
	}
}

// requireEchoed checks an accepted body against encoding/json alone.
func requireEchoed(t *testing.T, body []byte, query string, answer []byte) {
	t.Helper()
	if !json.Valid(body) {
		t.Fatalf("accepted %q, which is not one JSON document", body)
	}
	var want v1.EchoBody
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatalf("accepted %q, which encoding/json refuses: %v", body, err)
	}
	var got struct {
		Data v1.EchoView `json:"data"`
		Meta httpx.Meta  `json:"meta"`
	}
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil && err != io.EOF {
		t.Fatalf("echo answer %s: %v", answer, err)
	}
	if !reflect.DeepEqual(got.Data.Body, want) || got.Data.Query != query {
		t.Fatalf("%q?q=%q decoded as %+v, encoding/json reads %+v", body, query, got.Data, want)
	}
	if err := jsondoctest.Storable(got.Data); err != nil {
		t.Fatal(err)
	}
}
