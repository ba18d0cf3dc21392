package proxy

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testOrigin    = "https://dash.example.test"
	testAPIToken  = "api-token-123"
	testCSRFToken = "csrf-abc"
	testRequestID = "req_abcdefghijklmnopqrstuvwxyz"
	bffCookie     = "cairn_dashboard"
	bffSession    = "sess"
)

// fakeSessions signs in whoever presents the dashboard cookie "sess".
type fakeSessions struct{}

func (fakeSessions) Credentials(r *http.Request) (string, string, bool) {
	c, err := r.Cookie(bffCookie)
	if err != nil || c.Value != bffSession {
		return "", "", false
	}
	return testAPIToken, testCSRFToken, true
}

// received is what the fake API saw of one request.
type received struct {
	method   string
	path     string
	rawQuery string
	header   http.Header
	bodyLen  int64
	bodySum  []byte
}

type fixture struct {
	proxy    *httptest.Server
	upstream *httptest.Server
	client   *http.Client

	mu    sync.Mutex
	calls []received
}

// setup starts a fake API that records every request and answers with
// respond (200 {"data":{}} when nil), and the proxy in front of it. The
// fake hashes the body as respond reads it and drains the rest afterwards.
func setup(t *testing.T, respond http.HandlerFunc) *fixture {
	t.Helper()
	return setupAt(t, "", respond)
}

func setupAt(t *testing.T, basePath string, respond http.HandlerFunc) *fixture {
	t.Helper()
	f := &fixture{}
	if respond == nil {
		respond = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"data":{}}`)
		}
	}
	f.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := &hashingReader{r: r.Body, h: sha256.New()}
		r.Body = io.NopCloser(body)
		respond(w, r)
		_, _ = io.Copy(io.Discard, body)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls = append(f.calls, received{
			method: r.Method, path: r.URL.Path, rawQuery: r.URL.RawQuery,
			header: r.Header.Clone(), bodyLen: body.n, bodySum: body.h.Sum(nil),
		})
	}))
	t.Cleanup(f.upstream.Close)
	apiURL, err := url.Parse(f.upstream.URL + basePath)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(apiURL, f.upstream.Client().Transport, fakeSessions{}, testOrigin, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.proxy = httptest.NewServer(h)
	t.Cleanup(f.proxy.Close)
	f.client = &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return f
}

func (f *fixture) received() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// browserRequest is a request as the dashboard's own script sends it:
// signed in, and for unsafe methods same-origin with the CSRF header.
func (f *fixture) browserRequest(t *testing.T, method, path string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, f.proxy.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: bffCookie, Value: bffSession})
	if method != http.MethodGet && method != http.MethodHead {
		req.Header.Set("Origin", testOrigin)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("X-CSRF-Token", testCSRFToken)
	}
	return req
}

func (f *fixture) do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

type hashingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (c *hashingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// assertEnvelope checks a normalized error answer and returns its request ID.
func assertEnvelope(t *testing.T, resp *http.Response, body []byte, status int, code string) string {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d (body %s)", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if !hasNoStore(resp.Header.Get("Cache-Control")) {
		t.Errorf("Cache-Control = %q, want no-store", resp.Header.Get("Cache-Control"))
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	obj := got["error"]
	if len(got) != 1 || len(obj) != 3 {
		t.Fatalf("body %s is not exactly {error:{status,code,request_id}}", body)
	}
	if obj["status"] != float64(status) || obj["code"] != code {
		t.Fatalf("body %s, want status %d code %q", body, status, code)
	}
	id, _ := obj["request_id"].(string)
	if id != resp.Header.Get("X-Request-Id") {
		t.Errorf("request_id %q differs from X-Request-Id %q", id, resp.Header.Get("X-Request-Id"))
	}
	return id
}

func TestForwardsAllowlistedRequests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		basePath string
		method   string
		path     string
		prepare  func(*http.Request)
		respond  http.HandlerFunc
		// wantPath and wantQuery are what the API must see.
		wantPath  string
		wantQuery string
		wantBody  string
		// wantHeader lists exactly the headers the API must receive, apart
		// from the transport's own (Accept-Encoding, Content-Length,
		// User-Agent).
		wantHeader http.Header
		// wantCache is the Cache-Control the browser must get.
		wantCache string
	}{
		{
			name:   "GET with browser cookies, Authorization and stray headers",
			method: http.MethodGet,
			path:   "/api/control-plane/v1/runs/run_x.1-a?cursor=abc%3D&limit=5",
			prepare: func(r *http.Request) {
				r.AddCookie(&http.Cookie{Name: "other", Value: "1"})
				r.AddCookie(&http.Cookie{Name: sessionCookie, Value: "chosen-by-script"})
				r.Header.Set("Authorization", "Bearer chosen-by-script")
				r.Header.Set("Accept", "application/json")
				r.Header.Set("X-Request-Id", testRequestID)
				r.Header.Set("X-Forwarded-For", "203.0.113.9")
				r.Header.Set("Forwarded", "for=203.0.113.9")
				r.Header.Set("X-Custom", "1")
				r.Header.Set("Connection", "X-Hop")
				r.Header.Set("X-Hop", "1")
			},
			wantPath:  "/v1/runs/run_x.1-a",
			wantQuery: "cursor=abc%3D&limit=5",
			wantHeader: http.Header{
				"Cookie":       {sessionCookie + "=" + testAPIToken},
				"Accept":       {"application/json"},
				"X-Request-Id": {testRequestID},
			},
			wantCache: "no-store",
		},
		{
			name:   "malformed request ID is not forwarded",
			method: http.MethodGet,
			path:   "/api/control-plane/v1/launch-access",
			prepare: func(r *http.Request) {
				r.Header.Set("X-Request-Id", "made-up\u00e9")
			},
			wantPath:   "/v1/launch-access",
			wantHeader: http.Header{"Cookie": {sessionCookie + "=" + testAPIToken}},
			wantCache:  "no-store",
		},
		{
			name:     "API under a base path; upstream caching kept",
			basePath: "/base/",
			method:   http.MethodGet,
			path:     "/api/control-plane/v1/openapi.json",
			respond: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Cache-Control", "private, max-age=60")
				_, _ = io.WriteString(w, "{}")
			},
			wantPath:   "/base/v1/openapi.json",
			wantHeader: http.Header{"Cookie": {sessionCookie + "=" + testAPIToken}},
			wantCache:  "private, max-age=60",
		},
		{
			name:   "POST with header CSRF token",
			method: http.MethodPost,
			path:   "/api/control-plane/v1/runs/run_x/actions/approve",
			prepare: func(r *http.Request) {
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Idempotency-Key", "idem-1")
				r.Header.Set("If-Match", `"v3"`)
			},
			wantPath: "/v1/runs/run_x/actions/approve",
			wantBody: `{"comment":"ok"}`,
			wantHeader: http.Header{
				"Cookie":          {sessionCookie + "=" + testAPIToken},
				"Content-Type":    {"application/json"},
				"Idempotency-Key": {"idem-1"},
				"If-Match":        {`"v3"`},
			},
			wantCache: "no-store",
		},
		{
			name:   "PATCH without Origin but same-origin Fetch Metadata",
			method: http.MethodPatch,
			path:   "/api/control-plane/v1/workspaces/ws_1",
			prepare: func(r *http.Request) {
				r.Header.Del("Origin")
				r.Header.Set("Content-Type", "application/json")
			},
			wantPath: "/v1/workspaces/ws_1",
			wantBody: `{"name":"w"}`,
			wantHeader: http.Header{
				"Cookie":       {sessionCookie + "=" + testAPIToken},
				"Content-Type": {"application/json"},
			},
			wantCache: "no-store",
		},
		{
			name:   "small form with csrf_token field",
			method: http.MethodPost,
			path:   "/api/control-plane/v1/runs/run_x/actions/cancel",
			prepare: func(r *http.Request) {
				r.Header.Del("X-CSRF-Token")
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
			},
			wantPath: "/v1/runs/run_x/actions/cancel",
			wantBody: "reason=stop&csrf_token=" + testCSRFToken,
			wantHeader: http.Header{
				"Cookie":       {sessionCookie + "=" + testAPIToken},
				"Content-Type": {"application/x-www-form-urlencoded; charset=utf-8"},
			},
			wantCache: "no-store",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			respond := tt.respond
			if respond == nil {
				respond = func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.Header().Add("Set-Cookie", sessionCookie+"=rotated; Secure; HttpOnly")
					w.Header().Add("Set-Cookie", "other=1")
					w.Header().Set("Access-Control-Allow-Origin", "https://evil.example")
					w.Header().Set("Access-Control-Allow-Credentials", "true")
					w.Header().Set("Alt-Svc", `h3=":443"`)
					w.Header().Set("X-Request-Id", testRequestID)
					_, _ = io.WriteString(w, `{"data":{"id":"run_x"}}`)
				}
			}
			f := setupAt(t, tt.basePath, respond)
			var body io.Reader
			if tt.wantBody != "" {
				body = strings.NewReader(tt.wantBody)
			}
			req := f.browserRequest(t, tt.method, tt.path, body)
			if tt.prepare != nil {
				tt.prepare(req)
			}
			resp, respBody := f.do(t, req)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, body %s", resp.StatusCode, respBody)
			}
			if tt.respond == nil {
				if string(respBody) != `{"data":{"id":"run_x"}}` {
					t.Errorf("body = %s", respBody)
				}
				if got := resp.Header.Get("X-Request-Id"); got != testRequestID {
					t.Errorf("X-Request-Id = %q", got)
				}
			}
			for _, name := range []string{"Set-Cookie", "Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Alt-Svc"} {
				if v := resp.Header.Values(name); len(v) > 0 {
					t.Errorf("browser got %s: %q", name, v)
				}
			}
			if got := resp.Header.Get("Cache-Control"); got != tt.wantCache {
				t.Errorf("Cache-Control = %q, want %q", got, tt.wantCache)
			}

			calls := f.received()
			if len(calls) != 1 {
				t.Fatalf("API got %d requests, want 1", len(calls))
			}
			got := calls[0]
			if got.method != tt.method || got.path != tt.wantPath || got.rawQuery != tt.wantQuery {
				t.Errorf("API got %s %s?%s, want %s %s?%s", got.method, got.path, got.rawQuery, tt.method, tt.wantPath, tt.wantQuery)
			}
			sum := sha256.Sum256([]byte(tt.wantBody))
			if got.bodyLen != int64(len(tt.wantBody)) || !bytes.Equal(got.bodySum, sum[:]) {
				t.Errorf("API got a %d-byte body, want %q", got.bodyLen, tt.wantBody)
			}
			header := got.header.Clone()
			for _, transportOwn := range []string{"Accept-Encoding", "Content-Length", "User-Agent"} {
				header.Del(transportOwn)
			}
			if !equalHeaders(header, tt.wantHeader) {
				t.Errorf("API got headers %v, want exactly %v", header, tt.wantHeader)
			}
		})
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func TestRefusesWithoutCallingUpstream(t *testing.T) {
	t.Parallel()
	longParam := strings.Repeat("a", maxSegmentBytes+1)
	tests := []struct {
		name    string
		method  string
		rawPath string
		body    string
		prepare func(*http.Request)
		status  int
		code    string
	}{
		{name: "path not in the contract", method: "GET", rawPath: "/v1/nope", status: 404, code: codeNotFound},
		{name: "method not in the contract for the path", method: "DELETE", rawPath: "/v1/runs/run_x", status: 404, code: codeNotFound},
		{name: "user tokens excluded", method: "POST", rawPath: "/v1/user-tokens", status: 404, code: codeNotFound},
		{name: "user token revocation excluded", method: "DELETE", rawPath: "/v1/user-tokens/ut_1", status: 404, code: codeNotFound},
		{name: "service accounts excluded", method: "POST", rawPath: "/v1/service-accounts", status: 404, code: codeNotFound},
		{name: "service account tokens excluded", method: "POST", rawPath: "/v1/service-accounts/sa_1/tokens", status: 404, code: codeNotFound},
		{name: "trailing slash", method: "GET", rawPath: "/v1/runs/", status: 404, code: codeNotFound},
		{name: "parameter too long", method: "GET", rawPath: "/v1/runs/" + longParam, status: 404, code: codeNotFound},
		{name: "outside the API", method: "GET", rawPath: "/healthz", status: 404, code: codeNotFound},
		{name: "traversal", method: "GET", rawPath: "/v1/runs/../user-tokens", status: 400, code: codePathRefused},
		{name: "dot-dot inside a segment", method: "GET", rawPath: "/v1/runs/a..b", status: 400, code: codePathRefused},
		{name: "dot segment", method: "GET", rawPath: "/v1/runs/.", status: 400, code: codePathRefused},
		{name: "encoded slash", method: "GET", rawPath: "/v1/runs/a%2Fb", status: 400, code: codePathRefused},
		{name: "lower-case encoded slash", method: "GET", rawPath: "/v1/runs/a%2fb", status: 400, code: codePathRefused},
		{name: "encoded traversal", method: "GET", rawPath: "/v1/runs/%2e%2e/user-tokens", status: 400, code: codePathRefused},
		{name: "encoded plain letter", method: "GET", rawPath: "/v1/runs/%61", status: 400, code: codePathRefused},
		{name: "double slash", method: "GET", rawPath: "/v1//runs", status: 400, code: codePathRefused},
		{name: "character outside IDs", method: "GET", rawPath: "/v1/runs/run~x", status: 400, code: codePathRefused},
		{name: "path over 2048 bytes", method: "GET", rawPath: "/v1/runs/" + strings.Repeat("a", maxPathBytes), status: 400, code: codePathRefused},
		{name: "OPTIONS", method: "OPTIONS", rawPath: "/v1/runs", status: 405, code: codeMethodNotAllowed},
		{
			name: "no session", method: "GET", rawPath: "/v1/runs",
			prepare: func(r *http.Request) { r.Header.Del("Cookie") },
			status:  401, code: codeUnauthenticated,
		},
		{
			name: "unsafe without session", method: "POST", rawPath: "/v1/runs", body: "{}",
			prepare: func(r *http.Request) { r.Header.Del("Cookie") },
			status:  401, code: codeUnauthenticated,
		},
		{
			name: "POST with neither Origin nor Sec-Fetch-Site", method: "POST", rawPath: "/v1/runs", body: "{}",
			prepare: func(r *http.Request) { r.Header.Del("Origin"); r.Header.Del("Sec-Fetch-Site") },
			status:  403, code: codeCrossOrigin,
		},
		{
			name: "POST without Origin, Sec-Fetch-Site none", method: "POST", rawPath: "/v1/runs", body: "{}",
			prepare: func(r *http.Request) { r.Header.Del("Origin"); r.Header.Set("Sec-Fetch-Site", "none") },
			status:  403, code: codeCrossOrigin,
		},
		{
			name: "cross-site Origin", method: "POST", rawPath: "/v1/runs", body: "{}",
			prepare: func(r *http.Request) {
				r.Header.Set("Origin", "https://evil.example")
				r.Header.Del("Sec-Fetch-Site")
			},
			status: 403, code: codeCrossOrigin,
		},
		{
			name: "Origin on another port", method: "DELETE", rawPath: "/v1/workspace-variables/var_1",
			prepare: func(r *http.Request) { r.Header.Set("Origin", testOrigin+":8443") },
			status:  403, code: codeCrossOrigin,
		},
		{
			name: "opaque Origin", method: "POST", rawPath: "/v1/runs", body: "{}",
			prepare: func(r *http.Request) { r.Header.Set("Origin", "null") },
			status:  403, code: codeCrossOrigin,
		},
		{
			name: "matching Origin but Sec-Fetch-Site cross-site", method: "POST", rawPath: "/v1/runs", body: "{}",
			prepare: func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") },
			status:  403, code: codeCrossOrigin,
		},
		{
			name: "matching Origin but Sec-Fetch-Site same-site", method: "POST", rawPath: "/v1/runs", body: "{}",
			prepare: func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "same-site") },
			status:  403, code: codeCrossOrigin,
		},
		{
			name: "missing CSRF token", method: "POST", rawPath: "/v1/runs/run_x/actions/approve", body: "{}",
			prepare: func(r *http.Request) { r.Header.Del("X-CSRF-Token") },
			status:  403, code: codeCSRFInvalid,
		},
		{
			name: "wrong CSRF token", method: "POST", rawPath: "/v1/runs/run_x/actions/approve", body: "{}",
			prepare: func(r *http.Request) { r.Header.Set("X-CSRF-Token", testCSRFToken+"x") },
			status:  403, code: codeCSRFInvalid,
		},
		{
			name: "wrong header token is not rescued by the form field", method: "POST", rawPath: "/v1/runs",
			body: "csrf_token=" + testCSRFToken,
			prepare: func(r *http.Request) {
				r.Header.Set("X-CSRF-Token", "wrong")
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			},
			status: 403, code: codeCSRFInvalid,
		},
		{
			name: "form with wrong csrf_token", method: "POST", rawPath: "/v1/runs", body: "csrf_token=wrong",
			prepare: func(r *http.Request) {
				r.Header.Del("X-CSRF-Token")
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			},
			status: 403, code: codeCSRFInvalid,
		},
		{
			name: "form over 4 KiB", method: "POST", rawPath: "/v1/runs",
			body: "csrf_token=" + testCSRFToken + "&pad=" + strings.Repeat("a", maxFormBytes),
			prepare: func(r *http.Request) {
				r.Header.Del("X-CSRF-Token")
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			},
			status: 403, code: codeCSRFInvalid,
		},
		{
			name: "form over 4 KiB without a declared length", method: "POST", rawPath: "/v1/runs",
			body: "csrf_token=" + testCSRFToken + "&pad=" + strings.Repeat("a", maxFormBytes),
			prepare: func(r *http.Request) {
				r.Header.Del("X-CSRF-Token")
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				r.ContentLength = -1
				r.Body = io.NopCloser(strings.NewReader("csrf_token=" + testCSRFToken + "&pad=" + strings.Repeat("a", maxFormBytes)))
			},
			status: 403, code: codeCSRFInvalid,
		},
		{
			name: "token in a non-form body", method: "POST", rawPath: "/v1/runs",
			body: `{"csrf_token":"` + testCSRFToken + `"}`,
			prepare: func(r *http.Request) {
				r.Header.Del("X-CSRF-Token")
				r.Header.Set("Content-Type", "application/json")
			},
			status: 403, code: codeCSRFInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req := f.browserRequest(t, tt.method, Prefix+"/placeholder", body)
			// Set the path verbatim: url.Parse would keep it, but building
			// it here makes plain that nothing cleaned it on the way.
			req.URL.Opaque = "//" + req.URL.Host + Prefix + tt.rawPath
			if tt.prepare != nil {
				tt.prepare(req)
			}
			resp, respBody := f.do(t, req)
			if id := assertEnvelope(t, resp, respBody, tt.status, tt.code); id == "" {
				t.Error("a refusal carries no request ID")
			}
			if n := len(f.received()); n != 0 {
				t.Fatalf("API got %d requests, want none", n)
			}
		})
	}
}

func TestOptionsAdvertisesContractMethods(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	req := f.browserRequest(t, http.MethodOptions, Prefix+"/v1/workspaces/ws_1", nil)
	req.Header.Set("X-Request-Id", testRequestID)
	resp, body := f.do(t, req)
	if id := assertEnvelope(t, resp, body, http.StatusMethodNotAllowed, codeMethodNotAllowed); id != testRequestID {
		t.Errorf("request_id = %q, want the client's valid ID %q", id, testRequestID)
	}
	if got := resp.Header.Get("Allow"); got != "GET, PATCH" {
		t.Errorf("Allow = %q, want %q", got, "GET, PATCH")
	}
}

// TestStreamsBodies moves 20 MiB each way in lockstep chunks of about
// 1 MiB: the sender waits for the receiver to have each chunk before sending
// the next. A proxy that buffered a whole body would deadlock here, so
// passing shows no more than about one chunk is ever in flight inside the
// proxy. The odd chunk size leaves a short tail after each run of full copy
// buffers, which only reaches the browser if the proxy flushes.
func TestStreamsBodies(t *testing.T) {
	t.Parallel()
	const chunk, chunks = 1<<20 + 17, 20
	payload := make([]byte, chunk)
	if _, err := rand.Read(payload); err != nil {
		t.Fatal(err)
	}
	wantSum := func() []byte {
		h := sha256.New()
		for range chunks {
			h.Write(payload)
		}
		return h.Sum(nil)
	}()
	wait := func(ch <-chan struct{}) error {
		select {
		case <-ch:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("timed out waiting for the other side: the proxy is buffering")
		}
	}

	t.Run("upload", func(t *testing.T) {
		t.Parallel()
		acks := make(chan struct{})
		f := setup(t, func(w http.ResponseWriter, r *http.Request) {
			buf := make([]byte, chunk)
			for range chunks {
				if _, err := io.ReadFull(r.Body, buf); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				acks <- struct{}{}
			}
			w.WriteHeader(http.StatusCreated)
		})
		pr, pw := io.Pipe()
		go func() {
			for range chunks {
				if _, err := pw.Write(payload); err != nil {
					return
				}
				if err := wait(acks); err != nil {
					pw.CloseWithError(err)
					return
				}
			}
			pw.Close()
		}()
		req := f.browserRequest(t, http.MethodPost, Prefix+"/v1/policy-sets/ps_1/versions", pr)
		req.Header.Set("Content-Type", "application/gzip")
		resp, body := f.do(t, req)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("status = %d, body %s", resp.StatusCode, body)
		}
		calls := f.received()
		if len(calls) != 1 || calls[0].bodyLen != chunk*chunks || !bytes.Equal(calls[0].bodySum, wantSum) {
			t.Fatalf("API did not get the %d-byte upload intact: %+v", chunk*chunks, calls)
		}
	})

	t.Run("download", func(t *testing.T) {
		t.Parallel()
		acks := make(chan struct{})
		f := setup(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			// A declared length is the case where ReverseProxy would
			// otherwise buffer between flushes.
			w.Header().Set("Content-Length", strconv.Itoa(chunk*chunks))
			flusher := w.(http.Flusher)
			for range chunks {
				if _, err := w.Write(payload); err != nil {
					return
				}
				flusher.Flush()
				if err := wait(acks); err != nil {
					panic(http.ErrAbortHandler)
				}
			}
		})
		resp, err := f.client.Do(f.browserRequest(t, http.MethodGet, Prefix+"/v1/runs/run_x/plan-changes", nil))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		h := sha256.New()
		buf := make([]byte, chunk)
		for i := range chunks {
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				t.Fatalf("reading chunk %d: %v", i, err)
			}
			h.Write(buf)
			acks <- struct{}{}
		}
		if n, _ := io.Copy(io.Discard, resp.Body); n != 0 {
			t.Fatalf("%d bytes past the end", n)
		}
		if !bytes.Equal(h.Sum(nil), wantSum) {
			t.Fatal("download corrupted")
		}
	})
}

func TestNormalizesUpstreamErrors(t *testing.T) {
	t.Parallel()
	const otherID = "req_zzzzzzzzzzzzzzzzzzzzzzzzzz"
	tests := []struct {
		name          string
		status        int
		header        http.Header
		body          string
		wantCode      string
		wantRequestID string
		wantRetry     string
		wantCache     string
	}{
		{
			name:   "stale review keeps ID, Retry-After and no-store policy",
			status: http.StatusConflict,
			header: http.Header{
				"Content-Type":  {"application/json"},
				"X-Request-Id":  {testRequestID},
				"Retry-After":   {"5"},
				"Cache-Control": {"private, no-store"},
				"Set-Cookie":    {sessionCookie + "=x"},
				"X-Internal":    {"db-7"},
			},
			body:          `{"error":{"status":409,"code":"RUN_REVIEW_STALE","message":"plan <b>changed</b>","request_id":"` + testRequestID + `","details":[1]},"meta":{"request_id":"` + testRequestID + `"}}`,
			wantCode:      "RUN_REVIEW_STALE",
			wantRequestID: testRequestID,
			wantRetry:     "5",
			wantCache:     "private, no-store",
		},
		{
			name:          "closed launch gate",
			status:        http.StatusServiceUnavailable,
			header:        http.Header{"X-Request-Id": {testRequestID}, "Retry-After": {"60"}, "Cache-Control": {"private, no-store"}},
			body:          `{"error":{"status":503,"code":"service_unavailable","request_id":"` + testRequestID + `"}}`,
			wantCode:      "service_unavailable",
			wantRequestID: testRequestID,
			wantRetry:     "60",
			wantCache:     "private, no-store",
		},
		{
			name:          "request ID only in the body",
			status:        http.StatusNotFound,
			body:          `{"error":{"status":404,"code":"NOT_FOUND","request_id":"` + otherID + `"}}`,
			wantCode:      "NOT_FOUND",
			wantRequestID: otherID,
			wantCache:     "no-store",
		},
		{
			name:          "cacheable upstream error is made no-store",
			status:        http.StatusForbidden,
			header:        http.Header{"X-Request-Id": {testRequestID}, "Cache-Control": {"max-age=600"}},
			body:          `{"error":{"status":403,"code":"FORBIDDEN","request_id":"` + testRequestID + `"}}`,
			wantCode:      "FORBIDDEN",
			wantRequestID: testRequestID,
			wantCache:     "no-store",
		},
		{
			name:      "non-JSON error page",
			status:    http.StatusBadGateway,
			header:    http.Header{"Content-Type": {"text/html"}},
			body:      "<html>bad gateway from 10.0.0.7</html>",
			wantCache: "no-store",
		},
		{
			name:      "code that is not a code",
			status:    http.StatusBadRequest,
			body:      `{"error":{"status":400,"code":"<script>alert(1)</script>","request_id":"not-an-id"}}`,
			wantCache: "no-store",
		},
		{
			name:      "body over 64 KiB",
			status:    http.StatusInternalServerError,
			body:      `{"error":{"status":500,"code":"INTERNAL","message":"` + strings.Repeat("x", maxUpstreamErrorBytes) + `"}}`,
			wantCache: "no-store",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header()[k] = v
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			resp, body := f.do(t, f.browserRequest(t, http.MethodPost, Prefix+"/v1/runs/run_x/actions/approve", strings.NewReader("{}")))
			if id := assertEnvelope(t, resp, body, tt.status, tt.wantCode); id != tt.wantRequestID {
				t.Errorf("request_id = %q, want %q", id, tt.wantRequestID)
			}
			if got := resp.Header.Get("Retry-After"); got != tt.wantRetry {
				t.Errorf("Retry-After = %q, want %q", got, tt.wantRetry)
			}
			if got := resp.Header.Get("Cache-Control"); got != tt.wantCache {
				t.Errorf("Cache-Control = %q, want %q", got, tt.wantCache)
			}
			for _, name := range []string{"Set-Cookie", "X-Internal"} {
				if v := resp.Header.Values(name); len(v) > 0 {
					t.Errorf("browser got %s: %q", name, v)
				}
			}
		})
	}
}

func TestRedirectsStayOnTheDashboard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		location func(apiURL string) string
		status   int
		// wantLocation is the Location the browser gets; "" with wantCode
		// set means the redirect is refused.
		wantLocation string
		wantCode     string
	}{
		{
			name:         "absolute API URL is brought under the prefix",
			location:     func(api string) string { return api + "/v1/runs/run_y?tab=plan#top" },
			status:       http.StatusFound,
			wantLocation: Prefix + "/v1/runs/run_y?tab=plan#top",
		},
		{
			name:         "relative API path is brought under the prefix",
			location:     func(string) string { return "/v1/runs/run_y" },
			status:       http.StatusSeeOther,
			wantLocation: Prefix + "/v1/runs/run_y",
		},
		{
			name:         "dashboard origin passes unchanged",
			location:     func(string) string { return testOrigin + "/settings/github?installed=1" },
			status:       http.StatusFound,
			wantLocation: testOrigin + "/settings/github?installed=1",
		},
		{
			name:     "foreign origin is refused",
			location: func(string) string { return "https://evil.example/phish" },
			status:   http.StatusFound,
			wantCode: codeUpstreamRedirect,
		},
		{
			name:     "scheme-relative foreign origin is refused",
			location: func(string) string { return "//evil.example/phish" },
			status:   http.StatusFound,
			wantCode: codeUpstreamRedirect,
		},
		{
			name:     "API path outside /v1/ is refused",
			location: func(api string) string { return api + "/login" },
			status:   http.StatusFound,
			wantCode: codeUpstreamRedirect,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var apiURL string
			f := setup(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", tt.location(apiURL))
				w.Header().Set("Set-Cookie", "a=b")
				w.WriteHeader(tt.status)
			})
			apiURL = f.upstream.URL
			resp, body := f.do(t, f.browserRequest(t, http.MethodGet, Prefix+"/v1/runs/run_x", nil))
			if tt.wantCode != "" {
				assertEnvelope(t, resp, body, http.StatusBadGateway, tt.wantCode)
				if loc := resp.Header.Get("Location"); loc != "" {
					t.Errorf("refused redirect still carries Location %q", loc)
				}
			} else {
				if resp.StatusCode != tt.status {
					t.Fatalf("status = %d, want %d", resp.StatusCode, tt.status)
				}
				if got := resp.Header.Get("Location"); got != tt.wantLocation {
					t.Errorf("Location = %q, want %q", got, tt.wantLocation)
				}
				if v := resp.Header.Values("Set-Cookie"); len(v) > 0 {
					t.Errorf("browser got Set-Cookie %q", v)
				}
			}
			if n := len(f.received()); n != 1 {
				t.Fatalf("API got %d requests, want exactly 1 (redirects are never followed)", n)
			}
		})
	}
}

func TestUpstreamUnavailable(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.NotFoundHandler())
	apiURL, _ := url.Parse(down.URL)
	down.Close()
	h, err := New(apiURL, nil, fakeSessions{}, testOrigin, nil)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(h)
	t.Cleanup(proxy.Close)
	f := &fixture{proxy: proxy, client: &http.Client{Timeout: 30 * time.Second}}
	resp, body := f.do(t, f.browserRequest(t, http.MethodGet, Prefix+"/v1/runs", nil))
	if id := assertEnvelope(t, resp, body, http.StatusBadGateway, codeUpstreamUnavailable); id == "" {
		t.Error("no request ID to report")
	}
	if strings.Contains(string(body), apiURL.Host) || strings.Contains(string(body), "refused") {
		t.Errorf("body leaks the cause: %s", body)
	}
}

func TestNewValidatesConfiguration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		apiURL   string
		sessions Sessions
		origin   string
		wantErr  bool
	}{
		{name: "valid", apiURL: "https://api.example.test", sessions: fakeSessions{}, origin: testOrigin},
		{name: "origin with trailing slash and default port", apiURL: "http://api:8080/", sessions: fakeSessions{}, origin: "https://Dash.Example.Test:443/"},
		{name: "relative API URL", apiURL: "/api", sessions: fakeSessions{}, origin: testOrigin, wantErr: true},
		{name: "API URL with query", apiURL: "https://api.example.test/?x=1", sessions: fakeSessions{}, origin: testOrigin, wantErr: true},
		{name: "API URL with credentials", apiURL: "https://u:p@api.example.test", sessions: fakeSessions{}, origin: testOrigin, wantErr: true},
		{name: "no sessions", apiURL: "https://api.example.test", origin: testOrigin, wantErr: true},
		{name: "origin with a path", apiURL: "https://api.example.test", sessions: fakeSessions{}, origin: testOrigin + "/app", wantErr: true},
		{name: "origin without scheme", apiURL: "https://api.example.test", sessions: fakeSessions{}, origin: "dash.example.test", wantErr: true},
		{name: "empty origin", apiURL: "https://api.example.test", sessions: fakeSessions{}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(tt.apiURL)
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(u, nil, tt.sessions, tt.origin, nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
	if _, err := New(nil, nil, fakeSessions{}, testOrigin, nil); err == nil {
		t.Error("nil apiURL accepted")
	}
}

func TestOriginNormalization(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"https://Dash.Example.Test", "https://dash.example.test"},
		{"https://dash.example.test:443/", "https://dash.example.test"},
		{"http://localhost:80", "http://localhost"},
		{"http://localhost:8080", "http://localhost:8080"},
		{"https://[::1]:8443", "https://[::1]:8443"},
		{"https://[::1]:443", "https://[::1]"},
	}
	for _, tt := range tests {
		got, err := parseOrigin(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseOrigin(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestRouteMatching(t *testing.T) {
	t.Parallel()
	table := compileRoutes([]route{
		{method: "GET", pattern: "/v1/runs/{id}"},
		{method: "POST", pattern: "/v1/runs/{id}/actions/approve"},
	})
	tests := []struct {
		method, path string
		want         bool
	}{
		{"GET", "/v1/runs/run_1", true},
		{"GET", "/v1/runs/" + strings.Repeat("a", maxSegmentBytes), true},
		{"GET", "/v1/runs/" + strings.Repeat("a", maxSegmentBytes+1), false},
		{"POST", "/v1/runs/run_1", false},
		{"GET", "/v1/runs", false},
		{"GET", "/v1/runs/run_1/actions/approve", false},
		{"POST", "/v1/runs/run_1/actions/approve", true},
		{"POST", "/v1/runs/run_1/actions/reject", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.method, " ", tt.path[:min(len(tt.path), 40)]), func(t *testing.T) {
			t.Parallel()
			_, segs, found, ok := splitAPIPath(Prefix + tt.path)
			if !found || !ok {
				t.Fatalf("splitAPIPath refused %q", tt.path)
			}
			if got := table.allows(tt.method, segs); got != tt.want {
				t.Fatalf("allows = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestInstallationCallbackStreamsThrough: the code host sends the browser
// to the setup URL under the dashboard as a cross-site top-level GET; the
// proxy forwards it with its query and the rewritten API session, and the
// API's redirect back to the dashboard reaches the browser. The webhook
// receiver is not reachable through the dashboard at all.
func TestInstallationCallbackStreamsThrough(t *testing.T) {
	t.Parallel()
	f := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", testOrigin+"/settings/github?installation=connected")
		w.WriteHeader(http.StatusSeeOther)
	})
	req := f.browserRequest(t, http.MethodGet, Prefix+"/v1/github/installations/callback?state=ghs_x.sig&installation_id=42&setup_action=install", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, _ := f.do(t, req)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != testOrigin+"/settings/github?installation=connected" {
		t.Fatalf("callback: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	got := f.received()
	if len(got) != 1 || got[0].path != "/v1/github/installations/callback" ||
		got[0].rawQuery != "state=ghs_x.sig&installation_id=42&setup_action=install" ||
		!strings.Contains(got[0].header.Get("Cookie"), sessionCookie+"="+testAPIToken) {
		t.Fatalf("upstream saw %+v", got)
	}
	post := f.browserRequest(t, http.MethodPost, Prefix+"/v1/github/webhooks", strings.NewReader("{}"))
	if resp, _ := f.do(t, post); resp.StatusCode < 400 || len(f.received()) != 1 {
		t.Fatalf("webhook through the dashboard: %d", resp.StatusCode)
	}
}
