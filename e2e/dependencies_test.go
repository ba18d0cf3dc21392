package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// apiOnly starts cairn-api alone with the given DATABASE_URL and extra
// environment.
func apiOnly(t *testing.T, databaseURL string, env ...string) *Stack {
	t.Helper()
	port, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := &Stack{APIURL: fmt.Sprintf("http://127.0.0.1:%d", port), Client: http.DefaultClient, logs: &syncBuffer{}, bin: binDir(t)}
	s.Env = []string{
		"DATABASE_URL=" + databaseURL,
		"AUTH_SECRET=e2e-auth-secret-0123456789abcdef0123456789abcdef",
		"CAIRN_MASTER_KEY=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"IDEMPOTENCY_HMAC_KEY=HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=",
		fmt.Sprintf("CAIRN_API_ADDR=127.0.0.1:%d", port),
		"CAIRN_PUBLIC_URL=" + s.APIURL,
		"CAIRN_DATA_DIR=" + t.TempDir(),
		"CAIRN_LOG_FORMAT=json",
	}
	s.Env = append(s.Env, env...)
	s.startProcess(t, "api", "cairn-api")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("process logs:\n%s", s.logs.String())
		}
	})
	waitFor(t, s.Client, s.APIURL+"/health")
	return s
}

// databaseDown gives a fresh test database's URL, parsed, and the same URL
// moved to a closed loopback port, where a process finds no database until
// databaseBack serves the real one there.
func databaseDown(t *testing.T) (string, *url.URL, *url.URL) {
	t.Helper()
	_, realURL := dbtest.NewURL(t)
	real, err := url.Parse(realURL)
	if err != nil {
		t.Fatal(err)
	}
	closed, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	down := *real
	down.Host = fmt.Sprintf("127.0.0.1:%d", closed)
	return realURL, real, &down
}

// databaseBack brings the database up on down's address.
func databaseBack(t *testing.T, real, down *url.URL) {
	t.Helper()
	ln, err := net.Listen("tcp", down.Host)
	if err != nil {
		t.Fatal(err)
	}
	forward(t, ln, real.Host)
}

// forward accepts on ln and pipes every connection to target, like a
// database host coming back on the address the API was given. Cleanup
// cuts every piped connection.
func forward(t *testing.T, ln net.Listener, target string) {
	t.Helper()
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
			go func() { defer wg.Done(); _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

// TestAPIServesWithTheDatabaseDownAndRecovers starts the real cairn-api
// with DATABASE_URL pointing at a closed port: it starts, /health answers
// without the database, /ready and protected routes of every surface
// answer 503 with the normal error body and request ID (never 500); when
// the database appears on that address, the same process recovers.
func TestAPIServesWithTheDatabaseDownAndRecovers(t *testing.T) {
	t.Parallel()
	_, real, down := databaseDown(t)
	s := apiOnly(t, down.String())

	if status, body := get(t, s.APIURL+"/health"); status != http.StatusOK || !strings.Contains(string(body), `"database":true`) {
		t.Fatalf("health without the database: %d %s", status, body)
	}
	if status, body := get(t, s.APIURL+"/ready"); status != http.StatusServiceUnavailable || !strings.Contains(string(body), "unreachable") {
		t.Fatalf("ready without the database: %d %s", status, body)
	}
	protected := []struct {
		method, path, body string
		header             []string
		code               string
	}{
		{http.MethodGet, "/v1/projects", "", []string{"Cookie", "__Secure-identity.session_token=sess_x"}, `"code":"UNAVAILABLE"`},
		{http.MethodPost, "/v1/projects", `{"name":"p"}`, []string{"Cookie", "__Secure-identity.session_token=sess_x", "Idempotency-Key", "k1"}, `"code":"UNAVAILABLE"`},
		{http.MethodGet, "/api/v2/workspaces/ws_aaaaaaaaaaaaaaaaaaaaaaaaaa", "", []string{"Authorization", "Bearer cut_aaaaaaaaaaaaaaaaaaaaaaaa"}, `"status":"503"`},
		{http.MethodPost, "/api/auth/sign-in/email", `{"email":"a@example.com","password":"correct horse battery staple"}`, nil, `"code":"UNAVAILABLE"`},
	}
	check := func(want int) {
		t.Helper()
		for _, p := range protected {
			var body []byte
			if p.body != "" {
				body = []byte(p.body)
			}
			req, _ := http.NewRequest(p.method, s.APIURL+p.path, strings.NewReader(string(body)))
			req.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(p.header); i += 2 {
				req.Header.Set(p.header[i], p.header[i+1])
			}
			resp, err := s.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			id := resp.Header.Get("X-Request-Id")
			if resp.StatusCode != want {
				t.Fatalf("%s %s: %d, want %d: %s", p.method, p.path, resp.StatusCode, want, answer)
			}
			if want == http.StatusServiceUnavailable && (id == "" || !strings.Contains(string(answer), id) || !strings.Contains(string(answer), p.code)) {
				t.Fatalf("%s %s: not the normal error body with its request ID: %v %s", p.method, p.path, resp.Header, answer)
			}
		}
	}
	check(http.StatusServiceUnavailable)

	// The database comes back on the configured address.
	databaseBack(t, real, down)
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _ := get(t, s.APIURL+"/ready")
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API did not recover: /ready %d", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Now the same requests reach the database: unknown credentials.
	for _, path := range []string{"/v1/projects"} {
		if status, body := get(t, s.APIURL+path, "Cookie", "__Secure-identity.session_token=sess_x"); status != http.StatusUnauthorized {
			t.Fatalf("%s after recovery: %d %s", path, status, body)
		}
	}
	if strings.Contains(s.Logs(), real.User.String()+"@") {
		t.Fatal("the logs carry the database credentials")
	}
}

// TestMalformedDatabaseURLIsNeverLogged gives every process a
// DATABASE_URL that does not parse and whose password is a marker: the
// API still serves /health (and 503), and no process prints the password.
func TestMalformedDatabaseURLIsNeverLogged(t *testing.T) {
	t.Parallel()
	const password = "Pw-e2e-7c41d9-never-logged"
	for name, malformed := range map[string]string{
		"bad port":   "postgres://cairn:" + password + "@localhost:notaport/cairn",
		"bad escape": "postgres://cairn:" + password + "%zz@localhost:5432/cairn",
		"keywords":   "host=localhost password=" + password + " port=notaport",
	} {
		s := apiOnly(t, malformed)
		if status, _ := get(t, s.APIURL+"/ready"); status != http.StatusServiceUnavailable {
			t.Fatalf("%s: ready = %d", name, status)
		}
		if status, body := get(t, s.APIURL+"/v1/projects", "Cookie", "__Secure-identity.session_token=x"); status != http.StatusServiceUnavailable ||
			!strings.Contains(string(body), "request_id") {
			t.Fatalf("%s: protected route = %d %s", name, status, body)
		}
		var out strings.Builder
		out.WriteString(s.Logs())
		// The worker, the dashboard, the migrate command and `cairn-dev
		// run` each stop with an error, which must not quote the URL.
		env := append(os.Environ(), "DATABASE_URL="+malformed, "CAIRN_DATA_DIR="+t.TempDir(),
			"AUTH_SECRET=e2e-auth-secret-0123456789abcdef0123456789abcdef", "CAIRN_BIN_DIR="+binDir(t),
			"CAIRN_BFF_ADDR=127.0.0.1:0", "CAIRN_API_ADDR=127.0.0.1:0")
		for _, args := range [][]string{{"cairn-worker"}, {"cairn-bff"}, {"cairn-api", "migrate"}, {"cairn-api", "launch", "show"}, {"cairn-dev", "run"}} {
			bin := filepath.Join(binDir(t), args[0])
			if _, err := os.Stat(bin); err != nil {
				t.Fatalf("%s is not built: %v", args[0], err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			cmd := exec.CommandContext(ctx, bin, args[1:]...)
			cmd.Env = env
			got, err := cmd.CombinedOutput()
			cancel()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("%s %v with a malformed URL: %v\n%s", name, args, err, got)
			}
			fmt.Fprintf(&out, "%v:\n%s\n", args, got)
		}
		if strings.Contains(out.String(), password) {
			t.Fatalf("%s: the password was printed:\n%s", name, out.String())
		}
		if !strings.Contains(out.String(), "not a valid PostgreSQL connection string") {
			t.Fatalf("%s: no process said what is wrong:\n%s", name, out.String())
		}
	}
}

// TestDashboardServesWithTheDatabaseDownAndRecovers starts the real
// cairn-bff with DATABASE_URL pointing at a closed port (the API it talks
// to is up): it starts, /health answers, every page that needs its session
// store answers 503 (never 500) without saying why, and when the database
// appears on that address the same process serves pages again.
func TestDashboardServesWithTheDatabaseDownAndRecovers(t *testing.T) {
	t.Parallel()
	realURL, real, down := databaseDown(t)
	s := apiOnly(t, realURL)
	bffPort, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dashboard := fmt.Sprintf("http://127.0.0.1:%d", bffPort)
	s.startProcess(t, "bff", "cairn-bff", "DATABASE_URL="+down.String(),
		fmt.Sprintf("CAIRN_BFF_ADDR=127.0.0.1:%d", bffPort), "CAIRN_DASHBOARD_URL="+dashboard)
	waitFor(t, s.Client, dashboard+"/health")

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	page := func(method, path string, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, dashboard+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	session := []string{"Cookie", "cairn_dashboard=a-session-cookie-the-store-cannot-look-up"}
	for _, p := range []struct {
		method, path string
		header       []string
	}{
		{http.MethodGet, "/sign-in", nil},
		{http.MethodGet, "/runs", session},
		{http.MethodGet, "/organizations", session},
		{http.MethodGet, "/api/control-plane/v1/projects", session},
	} {
		status, body := page(p.method, p.path, p.header...)
		if status != http.StatusServiceUnavailable {
			t.Fatalf("%s %s with the database down: %d, want 503: %s", p.method, p.path, status, body)
		}
		if strings.Contains(body, "dial") || strings.Contains(body, down.Host) || strings.Contains(body, "database") {
			t.Fatalf("%s %s says why: %s", p.method, p.path, body)
		}
	}

	databaseBack(t, real, down)
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _ := page(http.MethodGet, "/sign-in")
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dashboard did not recover: /sign-in %d", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status, _ := page(http.MethodGet, "/runs", session...); status != http.StatusSeeOther {
		t.Fatalf("an unknown session after recovery: %d, want a redirect to sign in", status)
	}
	if pw, ok := real.User.Password(); ok && strings.Contains(s.Logs(), pw) {
		t.Fatal("the logs carry the database password")
	}
}
