package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/mcp"
	"github.com/cairnhq/cairn/api/oauth"
	"github.com/cairnhq/cairn/api/platform/failure/failuretest"
	"github.com/cairnhq/cairn/api/platform/secret"
)

// stack is a real cairn-api and a real cairn-mcp in front of it.
type stack struct {
	env *apitest.Env
	mcp *httptest.Server
}

func newStack(t *testing.T, options ...func(*mcp.Options)) *stack {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mcpURL := "http://" + ln.Addr().String()
	env := apitest.New(t, func(s *apitest.Settings) { s.Config.MCPURL = mcpURL })
	opts := mcp.Options{APIURL: env.URL, Issuer: env.Config.Issuer(), MCPURL: mcpURL}
	for _, o := range options {
		o(&opts)
	}
	endpoint := mcp.New(opts)
	srv := httptest.NewUnstartedServer(endpoint.Handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return &stack{env: env, mcp: srv}
}

// connect runs the Go SDK client's own OAuth flow against the stack: the
// 401 challenge, protected resource metadata, authorization server
// metadata, dynamic registration, PKCE authorization with u consenting,
// and the token exchange with the resource.
func (s *stack) connect(t *testing.T, u *apitest.User, scopes []string) *sdk.ClientSession {
	t.Helper()
	redirect := "http://127.0.0.1:9/callback"
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "Go SDK agent", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		}},
		RedirectURL: redirect,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			back, err := u.Consent(args.URL, scopes)
			if err != nil {
				return nil, err
			}
			q := back.Query()
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "cairn-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: s.mcp.URL + "/mcp", OAuthHandler: handler, DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { _ = session.Close() })
	return session
}

func callTool(t *testing.T, session *sdk.ClientSession, name string, args map[string]any) (map[string]any, *sdk.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		return nil, res
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, raw, err)
	}
	return out, res
}

func resultText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func data(out map[string]any) map[string]any {
	d, _ := out["data"].(map[string]any)
	return d
}

// TestGoSDKClientEndToEnd: the official Go SDK client authorizes itself
// from nothing but the endpoint URL, lists the tools, uploads a
// configuration and starts a plan_only run, reading it back.
func TestGoSDKClientEndToEnd(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	owner := s.env.WithOrganization("Owner")
	var project struct{ ID string }
	owner.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "infra"}).MustStatus(t, http.StatusCreated).Data(t, &project)
	var ws struct{ ID string }
	owner.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": project.ID, "name": "prod",
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).
		MustStatus(t, http.StatusCreated).Data(t, &ws)

	session := s.connect(t, owner, nil)
	tools, err := session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.InputSchema == nil || tool.Annotations == nil {
			t.Fatalf("tool %s has no schema or annotations", tool.Name)
		}
		mutating := slices.Contains([]string{"upload_configuration", "start_run", "cancel_run", "reject_run"}, tool.Name)
		if tool.Annotations.ReadOnlyHint == mutating {
			t.Fatalf("tool %s: readOnlyHint %v", tool.Name, tool.Annotations.ReadOnlyHint)
		}
		if strings.Contains(tool.Name, "approve") || strings.Contains(tool.Name, "override") || strings.Contains(tool.Name, "recover") {
			t.Fatalf("tool %s is a human decision", tool.Name)
		}
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(mcp.ToolNames))
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	out, res := callTool(t, session, "list_workspaces", map[string]any{"project_id": project.ID})
	if res.IsError {
		t.Fatalf("list_workspaces: %s", resultText(res))
	}
	if items, _ := out["data"].([]any); len(items) != 1 {
		t.Fatalf("list_workspaces %v", out)
	}
	out, res = callTool(t, session, "upload_configuration", map[string]any{"workspace_id": ws.ID,
		"files": map[string]string{"main.tf": `output "greeting" { value = "hello" }` + "\n"}})
	if res.IsError {
		t.Fatalf("upload_configuration: %s", resultText(res))
	}
	cv, _ := data(out)["id"].(string)
	out, res = callTool(t, session, "start_run", map[string]any{"workspace_id": ws.ID, "configuration_version_id": cv,
		"kind": "plan_only", "message": "proposed by an agent"})
	if res.IsError {
		t.Fatalf("start_run: %s", resultText(res))
	}
	runID, _ := data(out)["id"].(string)
	out, res = callTool(t, session, "get_run", map[string]any{"run_id": runID})
	if res.IsError || data(out)["kind"] != "plan_only" {
		t.Fatalf("get_run: %v %s", out, resultText(res))
	}
	// The run's log, or one phase of it: the policy stage's, here.
	for seq, phase := range []string{"plan", "policy"} {
		if _, err := s.env.DB.Exec(`INSERT INTO run_log_chunks (run_id, sequence, phase, body) VALUES ($1, $2, $3, $4)`,
			runID, seq+1, phase, phase+" line\n"); err != nil {
			t.Fatal(err)
		}
	}
	out, res = callTool(t, session, "get_run_logs", map[string]any{"run_id": runID, "phase": "policy"})
	if chunks, _ := out["data"].([]any); res.IsError || len(chunks) != 1 || chunks[0].(map[string]any)["body"] != "policy line\n" {
		t.Fatalf("get_run_logs of the policy phase: %v %s", out, resultText(res))
	}
	if _, res = callTool(t, session, "get_run_logs", map[string]any{"run_id": runID, "phase": "audit"}); !res.IsError {
		t.Fatal("get_run_logs of an unknown phase answered")
	}
	// The run is the person's, done through the agent: audited as such.
	var agentEvents int
	if err := s.env.DB.Get(&agentEvents, `SELECT count(*) FROM audit_events WHERE actor_id = $1 AND evidence ? 'agent_client_id'`, owner.ID); err != nil {
		t.Fatal(err)
	}
	if agentEvents == 0 {
		t.Fatal("the agent's mutations are not audited as the agent's")
	}
	// Arguments that would leave /v1's path are refused before any call.
	if _, res = callTool(t, session, "get_run", map[string]any{"run_id": "../audit-events"}); !res.IsError {
		t.Fatal("a path-escaping ID was forwarded")
	}
	// Approving is not offered, and /v1 refuses it to an agent token anyway.
	if _, err := session.CallTool(context.Background(), &sdk.CallToolParams{Name: "approve_run", Arguments: map[string]any{"run_id": runID}}); err == nil {
		t.Fatal("approve_run exists")
	}
}

// TestReadOnlyGrantCannotMutate: a grant without mcp:write reads, and its
// mutating tools are refused by /v1 with insufficient_scope.
func TestReadOnlyGrantCannotMutate(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	owner := s.env.WithOrganization("Owner")
	session := s.connect(t, owner, []string{"mcp:tools"})
	if _, res := callTool(t, session, "list_projects", nil); res.IsError {
		t.Fatalf("list_projects: %s", resultText(res))
	}
	_, res := callTool(t, session, "start_run", map[string]any{"workspace_id": "wks_x", "configuration_version_id": "cv_x", "kind": "plan_only"})
	if !res.IsError || !strings.Contains(resultText(res), "insufficient_scope") {
		t.Fatalf("start_run with a read-only grant: %s", resultText(res))
	}
}

// TestEndpointRefusals: without a token the endpoint answers 401 with a
// challenge naming its metadata; the metadata names the API; tokens for
// another audience or expired are 401.
func TestEndpointRefusals(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	owner := s.env.WithOrganization("Owner")
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	post := func(token string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, s.mcp.URL+"/mcp", strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := post("")
	challenge := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(challenge, `resource_metadata="`+s.mcp.URL+`/.well-known/oauth-protected-resource"`) {
		t.Fatalf("no token: %d %q", resp.StatusCode, challenge)
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		r, err := http.Get(s.mcp.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var meta oauthex.ProtectedResourceMetadata
		_ = json.NewDecoder(r.Body).Decode(&meta)
		r.Body.Close()
		if meta.Resource != s.mcp.URL+"/mcp" || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != s.env.Config.Issuer() {
			t.Fatalf("%s: %+v", path, meta)
		}
	}

	signer, err := oauth.NewSigner(secret.Derive(s.env.Config.AuthSecret, "oauth-access-token-signing"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	scope := "mcp:tools mcp:write"
	forge := func(aud string, exp time.Time) string {
		tok, err := signer.Sign(oauth.Claims{Issuer: s.env.Config.Issuer(), Subject: owner.ID, Audience: jwt.Audience{aud},
			Expiry: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(now.Add(-3 * time.Hour)), ID: "oat_x",
			ClientID: "ocl_x", Scope: scope, OrganizationID: owner.OrganizationID})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for name, tok := range map[string]string{
		"another audience": forge("https://elsewhere.example/mcp", now.Add(time.Hour)),
		"expired":          forge(s.mcp.URL+"/mcp", now.Add(-time.Hour)),
		"garbage":          "not.a.token",
	} {
		if r := post(tok); r.StatusCode != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("%s: %d", name, r.StatusCode)
		}
	}
	// A well-formed token the API never issued passes cairn-mcp's own
	// checks (it is forged with the real key); /v1 then refuses it, since
	// it resolves every token against its record (the "unknown" case of
	// api/authserver's TestAgentTokenRefusals).
	r := post(forge(s.mcp.URL+"/mcp", now.Add(time.Hour)))
	if r.StatusCode != http.StatusOK {
		t.Fatalf("initialize with a signed token: %d", r.StatusCode)
	}
	scope = "profile"
	if r := post(forge(s.mcp.URL+"/mcp", now.Add(time.Hour))); r.StatusCode != http.StatusForbidden ||
		!strings.Contains(r.Header.Get("WWW-Authenticate"), "insufficient_scope") {
		t.Fatalf("token without mcp:tools: %d", r.StatusCode)
	}
}

// TestWithoutTheAPIEverythingIsRefused: with the API (and so its keys)
// unreachable, a token signed with the right key is still 401: the
// endpoint never opens for lack of keys.
func TestWithoutTheAPIEverythingIsRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAPI := "http://" + ln.Addr().String()
	ln.Close()
	endpoint := mcp.New(mcp.Options{APIURL: deadAPI, Issuer: deadAPI, MCPURL: "http://127.0.0.1:1"})
	srv := httptest.NewServer(endpoint.Handler())
	defer srv.Close()
	signer, err := oauth.NewSigner(secret.Derive(apitest.TestConfig().AuthSecret, "oauth-access-token-signing"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, _ := signer.Sign(oauth.Claims{Issuer: deadAPI, Subject: "usr_x", Audience: jwt.Audience{"http://127.0.0.1:1/mcp"},
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now), ID: "oat_x", ClientID: "ocl_x",
		Scope: "mcp:tools mcp:write", OrganizationID: "org_x"})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d without the API", resp.StatusCode)
	}
	if health, err := http.Get(srv.URL + "/health"); err != nil || health.StatusCode != http.StatusOK {
		t.Fatalf("health: %v %v", err, health)
	}
}

// panickingTransport panics, with a secret-looking value or an error
// wrapping an agent's input, on requests to the path set in panicOn.
type panickingTransport struct {
	mu      sync.Mutex
	panicOn string
	failure any
}

func (p *panickingTransport) set(path string, failure any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.panicOn, p.failure = path, failure
}

func (p *panickingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	p.mu.Lock()
	path, failure := p.panicOn, p.failure
	p.mu.Unlock()
	if path != "" && strings.HasPrefix(req.URL.Path, path) {
		panic(failure)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestToolAndEndpointPanicsLogOnlyTheirClassification: a panic while a
// request is authenticated answers a bare 500 with a request ID, and a tool
// whose API call panics fails that call alone; either way the log holds
// the classification (and the request ID or the tool's name), never the
// panic value, the agent's input or a stack.
func TestToolAndEndpointPanicsLogOnlyTheirClassification(t *testing.T) {
	t.Parallel()
	const secretValue, agentInput = "oat_panicsecretpanicsecretpanicsecret", "cursor-from-the-agent-7c1f"
	transport := &panickingTransport{}
	var log failuretest.Log
	s := newStack(t, func(o *mcp.Options) {
		o.Client = &http.Client{Transport: transport}
		o.Logger = log.Logger()
	})
	owner := s.env.WithOrganization("Owner")
	signer, err := oauth.NewSigner(secret.Derive(s.env.Config.AuthSecret, "oauth-access-token-signing"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	token, err := signer.Sign(oauth.Claims{Issuer: s.env.Config.Issuer(), Subject: owner.ID, Audience: jwt.Audience{s.mcp.URL + "/mcp"},
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now), ID: "oat_x",
		ClientID: "ocl_x", Scope: "mcp:tools mcp:write", OrganizationID: owner.OrganizationID})
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.mcp.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("posting %s: %v", body, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp, string(out)
	}
	// The API's keys are first read while the request is authenticated,
	// outside any tool.
	transport.set("/api/auth/jwks", secretValue)
	resp, body := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	id := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != http.StatusInternalServerError || id == "" || strings.Contains(body, secretValue) {
		t.Fatalf("a panic while authenticating: %d %q %s", resp.StatusCode, id, body)
	}
	failuretest.RequireReport(t, log.String(), "non_error", []string{secretValue, agentInput}, `"request_id":"`+id+`"`)

	// A failed key fetch is retried after a second.
	transport.set("/v1/", fmt.Errorf("listing with %s: %w", agentInput, errors.New(secretValue)))
	time.Sleep(1100 * time.Millisecond)
	before := len(log.String())
	resp, body = post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_projects","arguments":{"cursor":"` + agentInput + `"}}}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"isError":true`) || strings.Contains(body, secretValue) {
		t.Fatalf("a panicking tool: %d %s", resp.StatusCode, body)
	}
	failuretest.RequireReport(t, log.String()[before:], "error", []string{secretValue, agentInput}, `"tool":"list_projects"`)
}
