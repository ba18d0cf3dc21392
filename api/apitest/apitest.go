package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/assembly"
	"github.com/cairnhq/cairn/api/authserver"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/telemetry"
	"github.com/cairnhq/cairn/api/server"
)

// Env is a real cairn-api server on a loopback port over a fresh database.
type Env struct {
	T      testing.TB
	DB     *sqlx.DB
	DBURL  string
	Server *server.Server
	URL    string
	Config config.Config
	Logs   *LogBuffer
}

// Option adjusts an Env before it starts.
type Option func(*Settings)

// Settings are what options adjust.
type Settings struct {
	Config config.Config
	// WrapListener, when set, wraps the server's listener (to count bytes).
	WrapListener func(net.Listener) net.Listener
	// NoLaunchControl starts without a launch control, where every
	// admission is refused. By default the first control version opens
	// the public gate, as a fresh `make run` installation does.
	NoLaunchControl bool
}

// WithoutLaunchControl starts a server whose database has no launch
// control: every protected mutation is refused until a test writes one.
func WithoutLaunchControl() Option { return func(s *Settings) { s.NoLaunchControl = true } }

// OperatorToken is the operator credential of test servers.
const OperatorToken = "test-operator-token-0123456789abcdef0123456789"

// TestConfig is a configuration for tests: a fixed strong AUTH_SECRET and
// cheap argon2id parameters so sign-in is fast.
func TestConfig() config.Config {
	cfg, err := config.LoadFrom(map[string]string{
		"AUTH_SECRET":              "test-auth-secret-0123456789abcdef0123456789abcdef",
		"CAIRN_MASTER_KEY":         "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"IDEMPOTENCY_HMAC_KEY":     "HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=",
		"CAIRN_ARGON2_MEMORY_KIB":  "64",
		"CAIRN_ARGON2_ITERATIONS":  "1",
		"CAIRN_ARGON2_PARALLELISM": "1",
		"CAIRN_LOG_FORMAT":         "json",
		"CAIRN_OPERATOR_TOKEN":     OperatorToken,
	})
	if err != nil {
		panic(err)
	}
	return cfg
}

// New starts a server over a fresh clone of the migrated template database.
func New(t testing.TB, opts ...Option) *Env {
	t.Helper()
	conn, url := dbtest.NewURL(t)
	return Start(t, conn, url, opts...)
}

// Start starts a server over the given database (nil: none configured).
func Start(t testing.TB, conn *sqlx.DB, dbURL string, opts ...Option) *Env {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	settings := Settings{Config: TestConfig()}
	settings.Config.DatabaseURL = config.Secret(dbURL)
	settings.Config.PublicURL = "http://" + ln.Addr().String()
	settings.Config.DataDir = t.TempDir()
	for _, o := range opts {
		o(&settings)
	}
	cfg := settings.Config
	logs := &LogBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if conn == nil || cfg.DatabaseURL == "" {
		conn = nil
	}
	deps, err := assembly.Assemble(cfg, conn, logger)
	if err != nil {
		t.Fatalf("assembling server: %v", err)
	}
	if admission := deps.Services.Launch; admission != nil && !settings.NoLaunchControl {
		open := launch.Default()
		open.PublicGate = true
		if _, _, err := admission.Apply(context.Background(), launch.Change{Actor: "apitest", RequestID: "req_apitest",
			IdempotencyKey: "apitest-open-gate", Reason: "test server: public gate open", Document: open}); err != nil {
			t.Fatalf("opening the launch gate: %v", err)
		}
	}
	if deps.Tracing, err = telemetry.StartTracing(context.Background(), cfg.OTLPEndpoint, "cairn_api"); err != nil {
		t.Fatalf("starting tracing: %v", err)
	}
	srv, err := server.New(deps)
	if err != nil {
		t.Fatalf("creating server: %v", err)
	}
	if settings.WrapListener != nil {
		ln = settings.WrapListener(ln)
	}
	go func() { _ = srv.App.Listener(ln) }()
	t.Cleanup(func() {
		_ = srv.App.ShutdownWithTimeout(5 * time.Second)
		_ = deps.Tracing.Shutdown(context.Background())
	})
	return &Env{T: t, DB: conn, DBURL: dbURL, Server: srv, URL: "http://" + ln.Addr().String(), Config: cfg, Logs: logs}
}

// LogBuffer collects a server's log output so tests can assert on it.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns everything logged so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Client calls the API as one signed-in (or anonymous) caller.
type Client struct {
	env   *Env
	http  *http.Client
	Token string
}

// Anonymous returns a client without a session.
func (e *Env) Anonymous() *Client {
	return &Client{env: e, http: &http.Client{Timeout: 30 * time.Second}}
}

// Response is a finished API response with its body read.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test when it is not JSON.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding response %d %s: %v", r.Status, r.Body, err)
	}
}

// Data decodes the "data" member of an enveloped body into v.
func (r *Response) Data(t testing.TB, v any) {
	t.Helper()
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	r.JSON(t, &env)
	if err := json.Unmarshal(env.Data, v); err != nil {
		t.Fatalf("decoding data of %d %s: %v", r.Status, r.Body, err)
	}
}

// Code returns error.code of an error body, or "".
func (r *Response) Code() string {
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &env)
	return env.Error.Code
}

// Request is one call to make.
type Request struct {
	Method  string
	Path    string
	Body    any // marshalled as JSON unless []byte or io.Reader
	Header  map[string]string
	Context context.Context
}

// Do performs a request and reads the whole response.
func (c *Client) Do(req Request) *Response {
	t := c.env.T
	t.Helper()
	var body io.Reader
	switch b := req.Body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	case io.Reader:
		body = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("encoding request: %v", err)
		}
		body = bytes.NewReader(raw)
	}
	ctx := req.Context
	if ctx == nil {
		ctx = context.Background()
	}
	httpReq, err := http.NewRequestWithContext(ctx, req.Method, c.env.URL+req.Path, body)
	if err != nil {
		t.Fatalf("building request: %v", err)
	}
	if body != nil {
		httpReq.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		httpReq.Header.Set("Cookie", authserver.SessionCookie+"="+c.Token)
	}
	for k, v := range req.Header {
		httpReq.Header.Set(k, v)
	}
	resp, err := c.http.Do(httpReq)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

// Get is Do for a GET.
func (c *Client) Get(path string) *Response {
	c.env.T.Helper()
	return c.Do(Request{Method: http.MethodGet, Path: path})
}

var keyCounter struct {
	sync.Mutex
	n int
}

// NewKey returns a fresh idempotency key.
func NewKey() string {
	keyCounter.Lock()
	defer keyCounter.Unlock()
	keyCounter.n++
	return fmt.Sprintf("test-key-%d-%d", time.Now().UnixNano(), keyCounter.n)
}

// Mutate performs a state-changing /v1 call with a fresh idempotency key.
func (c *Client) Mutate(method, path string, body any) *Response {
	c.env.T.Helper()
	return c.Do(Request{Method: method, Path: path, Body: body, Header: map[string]string{"Idempotency-Key": NewKey()}})
}

// MustStatus fails the test unless the response has the given status.
func (r *Response) MustStatus(t testing.TB, status int) *Response {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	return r
}

// User is a signed-up account with its client.
type User struct {
	*Client
	ID             string
	Email          string
	Password       string
	OrganizationID string
}

var userCounter struct {
	sync.Mutex
	n int
}

// SignUp creates an account with a unique e-mail and signs it in.
func (e *Env) SignUp(name string) *User {
	e.T.Helper()
	userCounter.Lock()
	userCounter.n++
	email := fmt.Sprintf("%s-%d-%d@example.com", strings.ToLower(name), time.Now().UnixNano(), userCounter.n)
	userCounter.Unlock()
	c := e.Anonymous()
	password := "correct horse battery staple"
	resp := c.Do(Request{Method: http.MethodPost, Path: "/api/auth/sign-up/email",
		Body: map[string]string{"email": email, "password": password, "name": name}}).MustStatus(e.T, http.StatusOK)
	var out struct {
		User  struct{ ID string } `json:"user"`
		Token string              `json:"token"`
	}
	resp.Data(e.T, &out)
	c.Token = out.Token
	return &User{Client: c, ID: out.User.ID, Email: email, Password: password}
}

// WithOrganization signs up a user who owns a fresh, active organization.
func (e *Env) WithOrganization(name string) *User {
	e.T.Helper()
	u := e.SignUp(name)
	slug := fmt.Sprintf("org-%d", time.Now().UnixNano())
	resp := u.Do(Request{Method: http.MethodPost, Path: "/api/auth/organization/create",
		Body: map[string]string{"name": name + "'s organization", "slug": slug}}).MustStatus(e.T, http.StatusOK)
	var org struct{ ID string }
	resp.Data(e.T, &org)
	u.OrganizationID = org.ID
	return u
}

// Join invites u into owner's active organization with a role; u accepts,
// which also makes it u's active organization.
func (e *Env) Join(owner, u *User, role string) {
	e.T.Helper()
	var inv struct {
		Invitation struct{ ID string } `json:"invitation"`
		Token      string              `json:"token"`
	}
	owner.Do(Request{Method: http.MethodPost, Path: "/api/auth/organization/invite-member",
		Body: map[string]string{"email": u.Email, "role": role}}).MustStatus(e.T, http.StatusOK).Data(e.T, &inv)
	u.Do(Request{Method: http.MethodPost, Path: "/api/auth/organization/accept-invitation",
		Body: map[string]string{"invitation_id": inv.Invitation.ID, "token": inv.Token}}).MustStatus(e.T, http.StatusOK)
	u.OrganizationID = owner.OrganizationID
}
