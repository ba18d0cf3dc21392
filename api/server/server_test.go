package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/reqid"
)

func TestHealthAnswersWithoutDatabaseAndProtectedSurfacesFailClosed(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, nil, "")
	c := env.Anonymous()

	health := c.Get("/health").MustStatus(t, http.StatusOK)
	var body struct {
		Status   string          `json:"status"`
		Bindings map[string]bool `json:"bindings"`
	}
	health.JSON(t, &body)
	if body.Status != "ok" || body.Bindings["database"] || !body.Bindings["auth_secret"] {
		t.Fatalf("health = %s", health.Body)
	}
	if strings.Contains(string(health.Body), env.Config.AuthSecret.Reveal()) {
		t.Fatal("health leaks AUTH_SECRET")
	}
	if !reqid.Valid(health.Header.Get("X-Request-Id")) {
		t.Fatalf("X-Request-Id %q", health.Header.Get("X-Request-Id"))
	}

	c.Get("/ready").MustStatus(t, http.StatusServiceUnavailable)
	for _, r := range []apitest.Request{
		{Method: http.MethodGet, Path: "/v1/audit-events"},
		{Method: http.MethodPost, Path: "/v1/projects", Body: map[string]string{"name": "x"}, Header: map[string]string{"Idempotency-Key": "k"}},
		{Method: http.MethodPost, Path: "/api/auth/sign-in/email", Body: map[string]string{"email": "a@b.c", "password": "x"}},
		{Method: http.MethodGet, Path: "/api/auth/get-session"},
	} {
		resp := c.Do(r)
		if resp.Status != http.StatusServiceUnavailable {
			t.Errorf("%s %s = %d %s, want 503", r.Method, r.Path, resp.Status, resp.Body)
		}
		assertErrorEnvelope(t, resp)
	}
	// The contract is public and needs nothing.
	c.Get("/v1/openapi.json").MustStatus(t, http.StatusOK)
}

func TestAuthFailsClosedWithoutAuthSecret(t *testing.T) {
	t.Parallel()
	conn, url := dbtest.NewURL(t)
	env := apitest.Start(t, conn, url, func(s *apitest.Settings) { s.Config.AuthSecret = "too-short" })
	c := env.Anonymous()
	c.Get("/ready").MustStatus(t, http.StatusOK)
	resp := c.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-up/email",
		Body: map[string]string{"email": "a@example.com", "password": "correct horse battery staple", "name": "A"}})
	resp.MustStatus(t, http.StatusServiceUnavailable)
	c.Get("/v1/audit-events").MustStatus(t, http.StatusServiceUnavailable)
}

func TestReadyReportsMigrationRequiredUntilMigrated(t *testing.T) {
	t.Parallel()
	conn, url := dbtest.Empty(t)
	env := apitest.Start(t, conn, url, apitest.WithoutLaunchControl())
	c := env.Anonymous()

	resp := c.Get("/ready").MustStatus(t, http.StatusServiceUnavailable)
	var body map[string]any
	resp.JSON(t, &body)
	if body["schema"] != "migration_required" {
		t.Fatalf("ready on empty database = %s", resp.Body)
	}
	if err := db.Migrate(context.Background(), conn.DB, nil); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	c.Get("/ready").MustStatus(t, http.StatusOK)
}

func TestErrorsCarryRequestIDInHeaderAndBody(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	resp := env.Anonymous().Get("/v1/no-such-route").MustStatus(t, http.StatusNotFound)
	assertErrorEnvelope(t, resp)
	// A client-supplied ID is never echoed on the native API.
	resp = env.Anonymous().Do(apitest.Request{Method: http.MethodGet, Path: "/v1/audit-events",
		Header: map[string]string{"X-Request-Id": "req_aaaaaaaaaaaaaaaaaaaaaaaaaa"}})
	if resp.Header.Get("X-Request-Id") == "req_aaaaaaaaaaaaaaaaaaaaaaaaaa" {
		t.Fatal("client-supplied request ID echoed")
	}
	assertErrorEnvelope(t, resp)
}

// assertErrorEnvelope checks the bounded error shape: error{status, code,
// request_id} and meta.request_id, equal to the header, and nothing else.
func assertErrorEnvelope(t *testing.T, resp *apitest.Response) {
	t.Helper()
	var body map[string]map[string]any
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		t.Fatalf("error body is not JSON: %s", resp.Body)
	}
	if len(body) != 2 || body["error"] == nil || body["meta"] == nil {
		t.Fatalf("error body has members other than error and meta: %s", resp.Body)
	}
	id := resp.Header.Get("X-Request-Id")
	if !reqid.Valid(id) || body["error"]["request_id"] != id || body["meta"]["request_id"] != id {
		t.Fatalf("request ID header %q does not match body %s", id, resp.Body)
	}
	if len(body["error"]) != 3 || body["error"]["code"] == "" || int(body["error"]["status"].(float64)) != resp.Status {
		t.Fatalf("error object is not {status, code, request_id}: %s", resp.Body)
	}
}

// countingListener counts the bytes the server reads from its connections.
type countingListener struct {
	net.Listener
	read *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, read: l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func TestDeclaredOversizeBodyIsRejectedWithoutBeingRead(t *testing.T) {
	t.Parallel()
	var read atomic.Int64
	env := apitest.New(t, func(s *apitest.Settings) {
		s.WrapListener = func(l net.Listener) net.Listener { return countingListener{Listener: l, read: &read} }
	})
	u := env.WithOrganization("Bodies")
	const declared = 10_000_000

	for _, path := range []string{"/v1/projects", "/api/auth/organization/create"} {
		read.Store(0)
		conn, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		// Offer the whole body as fast as the server takes it; it must
		// answer 413 after reading (almost) nothing of it.
		go func() {
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nCookie: __Secure-identity.session_token=%s\r\nIdempotency-Key: big-1\r\nContent-Length: %d\r\n\r\n",
				path, u.Token, declared)
			chunk := []byte(strings.Repeat(" ", 64<<10))
			for sent := 0; sent < declared; sent += len(chunk) {
				if _, err := conn.Write(chunk); err != nil {
					return
				}
			}
		}()
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: reading response: %v", path, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), `"PAYLOAD_TOO_LARGE"`) {
			t.Fatalf("%s: %d %s, want 413 PAYLOAD_TOO_LARGE\n%s", path, resp.StatusCode, raw, env.Logs.String())
		}
		if n := read.Load(); n > 64<<10 {
			t.Fatalf("%s: server read %d bytes of a declared %d-byte body before refusing it", path, n, declared)
		}
		t.Logf("%s: server read %d bytes of a declared %d-byte body", path, read.Load(), declared)
	}
}

func TestUnknownLengthBodyIsCutAtTheLimit(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Chunks")
	conn, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A syntactically endless JSON string, streamed without a length. The
	// writer stops when the server hangs up.
	go func() {
		fmt.Fprintf(conn, "POST /v1/projects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nCookie: __Secure-identity.session_token=%s\r\nIdempotency-Key: chunked-1\r\nTransfer-Encoding: chunked\r\n\r\n", u.Token)
		first := `{"name":"`
		fmt.Fprintf(conn, "%x\r\n%s\r\n", len(first), first)
		chunk := strings.Repeat("a", 8<<10)
		for i := 0; i < 1000; i++ {
			if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
				return
			}
		}
		fmt.Fprint(conn, "0\r\n\r\n")
	}()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), `"PAYLOAD_TOO_LARGE"`) {
		t.Fatalf("chunked oversize body = %d %s", resp.StatusCode, raw)
	}
	var count int
	if err := env.DB.Get(&count, `SELECT count(*) FROM projects WHERE name <> 'Default Project'`); err != nil {
		t.Fatal(err)
	}
	if count != 0 {
		t.Fatalf("%d projects persisted from a refused body", count)
	}
}

// A chunked body that the operation read to its end must still be
// answered: draining its stream again waited for a chunk that never came.
func TestChunkedBodyIsAnswered(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Chunked")
	conn, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"name":"chunked"}`
	fmt.Fprintf(conn, "POST /v1/projects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nCookie: __Secure-identity.session_token=%s\r\nIdempotency-Key: chunked-ok\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n",
		u.Token, len(body), body)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("chunked request got no answer: %v", err)
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || !resp.Close {
		t.Fatalf("chunked request = %d (close %v) %s", resp.StatusCode, resp.Close, raw)
	}
}

// Text PostgreSQL cannot store (NUL, invalid UTF-8) is bad input at the
// edge, not an internal error from the first query that carries it.
func TestUnstorableTextIsRefusedAsBadInput(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Text")
	for _, r := range []*apitest.Response{
		u.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "a\x00b"}),
		u.Get("/v1/runs?workspace_id=ws_%00"),
		u.Get("/v1/runs?workspace_id=ws_%FF"),
		u.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/create",
			Body: map[string]string{"name": "a\x00b", "slug": "nul"}}),
	} {
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `"VALIDATION_FAILED"`) {
			t.Errorf("%d %s, want 400 VALIDATION_FAILED", r.Status, r.Body)
		}
	}
	v2 := env.Anonymous().Do(apitest.Request{Method: http.MethodGet, Path: "/api/v2/state-versions?filter[organization][name]=%00",
		Header: map[string]string{"Authorization": "Bearer " + apitest.OperatorToken}})
	if v2.Status != http.StatusBadRequest {
		t.Errorf("/api/v2 filter with NUL = %d %s, want 400", v2.Status, v2.Body)
	}
	if strings.Contains(env.Logs.String(), "invalid byte sequence") {
		t.Fatalf("text reached PostgreSQL:\n%s", env.Logs.String())
	}
}

func TestKeepAliveConnectionsServeSeveralRequests(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, nil, "")
	conn, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	for i := range 2 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("request %d on one connection: %v %v", i+1, resp, err)
		}
		io.Copy(io.Discard, resp.Body)
	}
}
