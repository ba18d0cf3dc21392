package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// agentConfiguration is what the agent proposes: one resource to add.
const agentConfiguration = `resource "terraform_data" "proposed" {
  input = "from an agent"
}
`

// consentThroughDashboard plays the browser of a person signed in to the
// dashboard: it opens the agent's authorization URL, lands on the consent
// screen, allows it there and returns where the dashboard sends it back
// to the agent.
func consentThroughDashboard(t *testing.T, s *Stack, d dashboardSession, authorizeURL string) (*url.URL, error) {
	noFollow := *s.Client
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.Get(authorizeURL)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	consent := resp.Header.Get("Location")
	if !strings.HasPrefix(consent, s.DashboardURL+"/oauth/consent?") {
		t.Errorf("authorization went to %q, not the dashboard's consent screen", consent)
		return nil, io.EOF
	}
	page := d.page(t, strings.TrimPrefix(consent, s.DashboardURL))
	field := func(name string) string {
		m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(page)
		if m == nil {
			t.Errorf("consent page has no %s:\n%s", name, page)
			return ""
		}
		return html.UnescapeString(m[1])
	}
	org := regexp.MustCompile(`<option value="([^"]+)" selected>`).FindStringSubmatch(page)
	if org == nil || !strings.Contains(page, "mcp:write") {
		t.Errorf("consent page does not name the organization and scopes:\n%s", page)
		return nil, io.EOF
	}
	form := url.Values{"csrf_token": {field("csrf_token")}, "query": {field("query")}, "organization_id": {org[1]},
		"write": {"on"}, "decision": {"allow"}}
	req, _ := http.NewRequest(http.MethodPost, s.DashboardURL+"/oauth/consent", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.DashboardURL)
	answer, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	answer.Body.Close()
	if answer.StatusCode != http.StatusSeeOther {
		t.Errorf("consent answer %d", answer.StatusCode)
		return nil, io.EOF
	}
	return url.Parse(answer.Header.Get("Location"))
}

// signInFromConsent is a person who is not signed in to the dashboard
// when the agent sends them to authorize it: the consent screen sends them
// to sign in, and signing in returns them to the same signed request.
func signInFromConsent(t *testing.T, s *Stack, email, authorizeURL string) dashboardSession {
	t.Helper()
	noFollow := *s.Client
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.Get(authorizeURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	consent := strings.TrimPrefix(resp.Header.Get("Location"), s.DashboardURL)
	jar, _ := cookiejar.New(nil)
	d := dashboardSession{base: s.DashboardURL, client: &http.Client{Jar: jar, CheckRedirect: noFollow.CheckRedirect}}
	first, err := d.client.Get(s.DashboardURL + consent)
	if err != nil {
		t.Fatal(err)
	}
	first.Body.Close()
	signIn := first.Header.Get("Location")
	if first.StatusCode != http.StatusSeeOther || !strings.HasPrefix(signIn, "/sign-in?next=") {
		t.Fatalf("consent without a session: %d %q", first.StatusCode, signIn)
	}
	page := d.page(t, signIn)
	csrf := regexp.MustCompile(`name="csrf_token" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	next := regexp.MustCompile(`name="next" value="([^"]+)"`).FindStringSubmatch(page)
	if csrf == nil || next == nil || html.UnescapeString(next[1]) != consent {
		t.Fatalf("sign-in page does not carry the consent request:\n%s", page)
	}
	form := url.Values{"csrf_token": {csrf[1]}, "email": {email}, "password": {"correct horse battery staple"}, "next": {html.UnescapeString(next[1])}}
	req, _ := http.NewRequest(http.MethodPost, s.DashboardURL+"/sign-in", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.DashboardURL)
	back, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	back.Body.Close()
	if back.StatusCode != http.StatusSeeOther || back.Header.Get("Location") != consent {
		t.Fatalf("sign-in went on to %q, not the consent screen", back.Header.Get("Location"))
	}
	return d
}

// goAgent is the official Go MCP client connected to cairn-mcp as an
// agent a member authorized on the dashboard's consent screen (with
// mcp:write), and that member's dashboard session.
type goAgent struct {
	ctx       context.Context
	session   *sdk.ClientSession
	dashboard dashboardSession
}

// connectGoAgent connects an agent knowing only the endpoint URL: it is
// challenged, discovers the authorization server, registers, and is
// authorized by m through the dashboard; then it lists the tools.
func connectGoAgent(t *testing.T, s *Stack, m member) *goAgent {
	t.Helper()
	a := &goAgent{}
	redirect := "http://127.0.0.1:9/callback"
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "Go SDK agent", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		}},
		RedirectURL: redirect,
		Client:      s.Client,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			a.dashboard = signInFromConsent(t, s, m.email, args.URL)
			back, err := consentThroughDashboard(t, s, a.dashboard, args.URL)
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
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(cancel)
	a.ctx = ctx
	client := sdk.NewClient(&sdk.Implementation{Name: "cairn-e2e", Version: "1"}, nil)
	a.session, err = client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.MCPURL + "/mcp", HTTPClient: s.Client,
		OAuthHandler: handler, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { a.session.Close() })
	tools, err := a.session.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	return a
}

// call calls a tool and returns its answer's data; a tool error fails the
// test.
func (a *goAgent) call(t *testing.T, name string, args map[string]any) map[string]any {
	t.Helper()
	res, err := a.session.CallTool(a.ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		t.Fatalf("%s: %s", name, text.String())
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out struct {
		Data map[string]any `json:"data"`
	}
	_ = json.Unmarshal(raw, &out)
	return out.Data
}

// TestGoSDKAgentProposesAPlan: the official Go MCP client, knowing only the
// endpoint URL, is challenged, discovers the authorization server,
// registers, is authorized by a person on the dashboard's consent screen,
// lists the tools, uploads a configuration, starts a plan_only run and
// reads its plan changes once the worker planned it.
func TestGoSDKAgentProposesAPlan(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "agentowner")
	workspaceID := s.createWorkspace(t, m, "agent-ws", "us")
	agent := connectGoAgent(t, s, m)
	call := func(name string, args map[string]any) map[string]any { t.Helper(); return agent.call(t, name, args) }
	session, ctx, d := agent.session, agent.ctx, agent.dashboard
	cv := call("upload_configuration", map[string]any{"workspace_id": workspaceID, "files": map[string]string{"main.tf": agentConfiguration}})
	run := call("start_run", map[string]any{"workspace_id": workspaceID, "configuration_version_id": cv["id"], "kind": "plan_only",
		"message": "an agent's proposal"})
	runID, _ := run["id"].(string)
	for deadline := time.Now().Add(3 * time.Minute); ; {
		r := call("get_run", map[string]any{"run_id": runID})
		if r["status"] == "planned_and_finished" {
			break
		}
		if r["status"] == "errored" || time.Now().After(deadline) {
			t.Fatalf("run %s: %v", runID, r)
		}
		time.Sleep(250 * time.Millisecond)
	}
	changes, _ := json.Marshal(call("get_plan_changes", map[string]any{"run_id": runID}))
	if !strings.Contains(string(changes), "terraform_data.proposed") {
		t.Fatalf("plan changes do not name the proposed resource: %s", changes)
	}
	// The grant is listed for the person, who revokes it; the agent is
	// refused at once.
	agents := d.page(t, "/agents")
	grant := regexp.MustCompile(`action="/agents/([^/]+)/revoke"`).FindStringSubmatch(agents)
	if grant == nil || !strings.Contains(agents, "Go SDK agent") {
		t.Fatalf("agents page:\n%s", agents)
	}
	csrf := regexp.MustCompile(`name="csrf_token" value="([0-9a-f]+)"`).FindStringSubmatch(agents)
	req, _ := http.NewRequest(http.MethodPost, s.DashboardURL+"/agents/"+grant[1]+"/revoke",
		strings.NewReader(url.Values{"csrf_token": {csrf[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.DashboardURL)
	resp, err := d.client.Do(req)
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %v %v", err, resp)
	}
	resp.Body.Close()
	res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: "list_runs", Arguments: map[string]any{}})
	if err != nil || !res.IsError {
		t.Fatalf("a revoked agent still reads: %v %+v", err, res)
	}
}

var npmOnce struct {
	sync.Once
	err error
}

// typescriptAgent installs the TypeScript agent's pinned dependencies once
// (npm ci from its lock file) and returns its directory.
func typescriptAgent(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "e2e", "testdata", "mcp-ts")
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err == nil {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			npmOnce.err = fmt.Errorf("npm ci (Node.js and npm are required): %v\n%s", err, out)
		}
	})
	if npmOnce.err != nil {
		t.Fatal(npmOnce.err)
	}
	return dir
}

// TestTypeScriptSDKAgentProposesAPlan: the official TypeScript MCP client
// does what the Go one does, from its own discovery and registration to a
// plan_only run's changes.
func TestTypeScriptSDKAgentProposesAPlan(t *testing.T) {
	t.Parallel()
	dir := typescriptAgent(t)
	s := runsStack(t)
	m := s.newMember(t, "tsowner")
	workspaceID := s.createWorkspace(t, m, "ts-ws", "us")
	d := signInToDashboard(t, s, m.email)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "agent.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+s.MCPURL+"/mcp", "WORKSPACE_ID="+workspaceID)
	if s.TLS != nil {
		cmd.Env = append(cmd.Env, "NODE_EXTRA_CA_CERTS="+s.TLS.CA)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		tools     []string
		runStatus string
		changes   string
	)
	scanner := bufio.NewScanner(stdout)
	scanner.Buffer(make([]byte, 1<<20), 8<<20)
	for scanner.Scan() {
		var line struct {
			Authorize string          `json:"authorize"`
			Tools     []string        `json:"tools"`
			Run       map[string]any  `json:"run"`
			Changes   json.RawMessage `json:"changes"`
		}
		if err := json.Unmarshal(scanner.Bytes(), &line); err != nil {
			t.Fatalf("agent printed %q", scanner.Text())
		}
		switch {
		case line.Authorize != "":
			back, err := consentThroughDashboard(t, s, d, line.Authorize)
			if err != nil {
				t.Fatalf("consent: %v", err)
			}
			fmt.Fprintln(stdin, back.String())
		case line.Tools != nil:
			tools = line.Tools
		case line.Run != nil:
			runStatus, _ = line.Run["status"].(string)
		case line.Changes != nil:
			changes = string(line.Changes)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("TypeScript agent: %v\n%s", err, stderr.String())
	}
	if len(tools) != 15 || runStatus != "planned_and_finished" || !strings.Contains(changes, "terraform_data.typescript") {
		t.Fatalf("tools %v, run %q, changes %s", tools, runStatus, changes)
	}
}
