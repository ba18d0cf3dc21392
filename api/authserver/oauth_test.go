package authserver_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/oauth"
	"github.com/cairnhq/cairn/api/platform/secret"
)

// agentClient is an OAuth client as a test drives it over HTTP.
type agentClient struct {
	env         *apitest.Env
	id          string
	name        string
	redirectURI string
	http        *http.Client
}

func registerClient(t *testing.T, env *apitest.Env, metadata map[string]any) (*apitest.Response, string) {
	t.Helper()
	return registerFrom(t, env, "", metadata)
}

// registerFrom registers as the forwarded address from (behind a trusted
// proxy), so that registration throttling counts it on its own.
func registerFrom(t *testing.T, env *apitest.Env, from string, metadata map[string]any) (*apitest.Response, string) {
	t.Helper()
	var h map[string]string
	if from != "" {
		h = map[string]string{"X-Forwarded-For": from}
	}
	resp := env.Anonymous().Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/oauth2/register", Body: metadata, Header: h})
	var out struct {
		ClientID string `json:"client_id"`
	}
	_ = json.Unmarshal(resp.Body, &out)
	return resp, out.ClientID
}

func newAgentClient(t *testing.T, env *apitest.Env, grants ...string) *agentClient {
	t.Helper()
	if len(grants) == 0 {
		grants = []string{"authorization_code", "refresh_token"}
	}
	redirect := "http://127.0.0.1:9/callback"
	resp, id := registerClient(t, env, map[string]any{
		"client_name": "Test agent", "redirect_uris": []string{redirect},
		"token_endpoint_auth_method": "none", "grant_types": grants, "unknown_member": true,
	})
	resp.MustStatus(t, http.StatusCreated)
	return &agentClient{env: env, id: id, name: "Test agent", redirectURI: redirect, http: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func newVerifier(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// authorize sends an authorization request and returns where the server
// sends the browser.
func (a *agentClient) authorize(t *testing.T, params url.Values) *url.URL {
	t.Helper()
	q := url.Values{"client_id": {a.id}, "redirect_uri": {a.redirectURI}, "response_type": {"code"}, "state": {"st-1"},
		"resource": {a.env.Config.AgentResource()}, "scope": {"mcp:tools mcp:write"}}
	for k, v := range params {
		q[k] = v
	}
	for k, v := range q {
		if len(v) == 1 && v[0] == "" {
			delete(q, k)
		}
	}
	resp, err := a.http.Get(a.env.URL + "/api/auth/oauth2/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %d %s", resp.StatusCode, body)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// consent has the signed-in user allow the request in their active
// organization and returns the authorization code.
func (a *agentClient) consent(t *testing.T, u *apitest.User, consentURL *url.URL, scopes []string) string {
	t.Helper()
	if !strings.HasSuffix(consentURL.Path, "/oauth/consent") {
		t.Fatalf("authorization did not go to the consent screen: %s", consentURL)
	}
	var view struct {
		Client struct{ Name string } `json:"client"`
		Scopes []string              `json:"scopes"`
	}
	u.Get("/api/auth/oauth2/consent?"+consentURL.RawQuery).MustStatus(t, http.StatusOK).Data(t, &view)
	if view.Client.Name != a.name || len(view.Scopes) == 0 {
		t.Fatalf("consent view %+v", view)
	}
	var answer struct {
		RedirectURI string `json:"redirect_uri"`
	}
	u.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/oauth2/consent", Body: map[string]any{
		"query": consentURL.RawQuery, "organization_id": u.OrganizationID, "allow": true, "scopes": scopes,
	}}).MustStatus(t, http.StatusOK).Data(t, &answer)
	back, err := url.Parse(answer.RedirectURI)
	if err != nil || !strings.HasPrefix(answer.RedirectURI, a.redirectURI) || back.Query().Get("state") != "st-1" ||
		back.Query().Get("iss") != a.env.Config.Issuer() {
		t.Fatalf("consent redirect %q", answer.RedirectURI)
	}
	return back.Query().Get("code")
}

type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
	IDToken      string `json:"id_token"`
	Error        string `json:"error"`
	status       int
}

func (a *agentClient) token(t *testing.T, form url.Values) tokenAnswer {
	t.Helper()
	form.Set("client_id", a.id)
	resp, err := http.Post(a.env.URL+"/api/auth/oauth2/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out tokenAnswer
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	out.status = resp.StatusCode
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("token answer is cacheable")
	}
	return out
}

// signIn runs the whole code flow for u and returns the tokens.
func (a *agentClient) signIn(t *testing.T, u *apitest.User, scopes ...string) tokenAnswer {
	t.Helper()
	verifier := newVerifier(t)
	loc := a.authorize(t, url.Values{"code_challenge": {oauth.S256Challenge(verifier)}, "code_challenge_method": {"S256"}})
	code := a.consent(t, u, loc, scopes)
	tok := a.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {a.redirectURI},
		"code_verifier": {verifier}, "resource": {a.env.Config.AgentResource()}})
	if tok.status != http.StatusOK || tok.AccessToken == "" {
		t.Fatalf("code exchange: %+v", tok)
	}
	return tok
}

func bearer(env *apitest.Env, token, method, path string, body any) *apitest.Response {
	h := map[string]string{"Authorization": "Bearer " + token}
	if method != http.MethodGet {
		h["Idempotency-Key"] = apitest.NewKey()
	}
	return env.Anonymous().Do(apitest.Request{Method: method, Path: path, Body: body, Header: h})
}

// TestOAuthDiscovery: the metadata names every endpoint under the issuer,
// S256 only, and the JWKS verifies what the token endpoint signs.
func TestOAuthDiscovery(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	for _, path := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		var meta map[string]any
		env.Anonymous().Get(path).MustStatus(t, http.StatusOK).JSON(t, &meta)
		if meta["issuer"] != env.Config.Issuer() || meta["token_endpoint"] != env.Config.Issuer()+"/api/auth/oauth2/token" ||
			meta["registration_endpoint"] != env.Config.Issuer()+"/api/auth/oauth2/register" ||
			meta["jwks_uri"] != env.Config.Issuer()+"/api/auth/jwks" {
			t.Fatalf("%s: %v", path, meta)
		}
		if methods, _ := meta["code_challenge_methods_supported"].([]any); len(methods) != 1 || methods[0] != "S256" {
			t.Fatalf("%s: challenge methods %v", path, meta["code_challenge_methods_supported"])
		}
	}
	var keys struct {
		Keys []map[string]any `json:"keys"`
	}
	env.Anonymous().Get("/api/auth/jwks").MustStatus(t, http.StatusOK).JSON(t, &keys)
	if len(keys.Keys) != 1 || keys.Keys[0]["alg"] != "EdDSA" || keys.Keys[0]["d"] != nil {
		t.Fatalf("jwks %v", keys)
	}
}

// TestClientRegistrationRedirectURIs: only https and loopback http
// redirect URIs register; everything else is invalid_redirect_uri.
func TestClientRegistrationRedirectURIs(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, func(s *apitest.Settings) { s.Config.TrustedProxies = []string{"127.0.0.1/32"} })
	n := 0
	registerClient := func(t *testing.T, env *apitest.Env, metadata map[string]any) (*apitest.Response, string) {
		n++
		return registerFrom(t, env, fmt.Sprintf("203.0.113.%d", n), metadata)
	}
	for _, ok := range []string{"https://agent.example/cb", "http://127.0.0.1:33418/cb", "http://localhost/cb", "http://[::1]:8080/cb"} {
		resp, _ := registerClient(t, env, map[string]any{"redirect_uris": []string{ok}, "token_endpoint_auth_method": "none"})
		resp.MustStatus(t, http.StatusCreated)
	}
	for _, bad := range []string{"http://agent.example/cb", "myapp://cb", "https://agent.example/cb#frag",
		"https://user:pw@agent.example/cb", "javascript:alert(1)", "/relative", ""} {
		resp, _ := registerClient(t, env, map[string]any{"redirect_uris": []string{bad}, "token_endpoint_auth_method": "none"})
		var e struct{ Error string }
		resp.MustStatus(t, http.StatusBadRequest).JSON(t, &e)
		if e.Error != "invalid_redirect_uri" {
			t.Fatalf("%q: %s", bad, resp.Body)
		}
	}
	resp, _ := registerClient(t, env, map[string]any{"redirect_uris": []string{"https://a.example/cb"}, "grant_types": []string{"client_credentials"}})
	resp.MustStatus(t, http.StatusBadRequest)
}

// TestClientRegistrationIsRateLimited: an address that registers client
// after client is slowed down.
func TestClientRegistrationIsRateLimited(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	limited := false
	for range 12 {
		resp, _ := registerClient(t, env, map[string]any{"redirect_uris": []string{"https://a.example/cb"}, "token_endpoint_auth_method": "none"})
		if resp.Status == http.StatusTooManyRequests {
			limited = resp.Header.Get("Retry-After") != ""
			break
		}
		resp.MustStatus(t, http.StatusCreated)
	}
	if !limited {
		t.Fatal("twelve registrations from one address were all accepted")
	}
}

// TestAuthorizationCodeFlow: the whole flow, with PKCE, the audience, the
// organization claim, /v1 with the token, refresh rotation and reuse
// detection, and revocation.
func TestAuthorizationCodeFlow(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Ada")
	a := newAgentClient(t, env)
	tok := a.signIn(t, u)
	if tok.Scope != "mcp:tools mcp:write" || tok.RefreshToken == "" {
		t.Fatalf("tokens %+v", tok)
	}
	parsed, err := jwt.ParseSigned(tok.AccessToken, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var claims oauth.Claims
	if err := parsed.UnsafeClaimsWithoutVerification(&claims); err != nil {
		t.Fatal(err)
	}
	if len(claims.Audience) != 1 || claims.Audience[0] != env.Config.AgentResource() || claims.OrganizationID != u.OrganizationID ||
		claims.Subject != u.ID || claims.Issuer != env.Config.Issuer() {
		t.Fatalf("claims %+v", claims)
	}
	// Only keyed hashes are stored.
	var stored int
	if err := env.DB.Get(&stored, `SELECT count(*) FROM oauth_access_tokens WHERE token_hash = $1 OR position($2 in encode(token_hash, 'escape')) > 0`,
		[]byte(tok.AccessToken), tok.AccessToken); err != nil || stored != 0 {
		t.Fatalf("access token stored in clear (%d, %v)", stored, err)
	}

	bearer(env, tok.AccessToken, http.MethodGet, "/v1/projects", nil).MustStatus(t, http.StatusOK)
	// Not an agent operation: refused though the token is good.
	bearer(env, tok.AccessToken, http.MethodGet, "/v1/audit-events", nil).MustStatus(t, http.StatusForbidden)
	// A cookie never stands in for, or beside, a bearer.
	resp := u.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/projects", Header: map[string]string{"Authorization": "Bearer nope"}})
	resp.MustStatus(t, http.StatusUnauthorized)
	// Service-account and run tokens stay 401 on /v1.
	bearer(env, "sst_abcdefghijklmnopqrstuvwxyz234567", http.MethodGet, "/v1/projects", nil).MustStatus(t, http.StatusUnauthorized)

	// Refresh rotates; the old refresh token replayed ends the grant.
	next := a.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}})
	if next.status != http.StatusOK || next.RefreshToken == tok.RefreshToken {
		t.Fatalf("refresh %+v", next)
	}
	bearer(env, next.AccessToken, http.MethodGet, "/v1/projects", nil).MustStatus(t, http.StatusOK)
	replay := a.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}})
	if replay.status != http.StatusBadRequest || replay.Error != "invalid_grant" {
		t.Fatalf("replayed refresh %+v", replay)
	}
	bearer(env, next.AccessToken, http.MethodGet, "/v1/projects", nil).MustStatus(t, http.StatusUnauthorized)
	if again := a.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {next.RefreshToken}}); again.status != http.StatusBadRequest {
		t.Fatalf("refresh after reuse %+v", again)
	}

	// Revocation (RFC 7009) of an access token applies at once.
	fresh := a.signIn(t, u)
	revoke := func(token string) {
		resp, err := http.Post(env.URL+"/api/auth/oauth2/revoke", "application/x-www-form-urlencoded",
			strings.NewReader(url.Values{"token": {token}, "client_id": {a.id}}.Encode()))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("revoke: %v %v\n%s", resp, err, env.Logs.String())
		}
		resp.Body.Close()
	}
	revoke(fresh.AccessToken)
	bearer(env, fresh.AccessToken, http.MethodGet, "/v1/projects", nil).MustStatus(t, http.StatusUnauthorized)
	// Revoking a refresh token ends its grant.
	more := a.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {fresh.RefreshToken}})
	revoke(more.RefreshToken)
	bearer(env, more.AccessToken, http.MethodGet, "/v1/projects", nil).MustStatus(t, http.StatusUnauthorized)
	revoke("not-a-token-at-all") // unknown tokens are answered alike
}

// TestPKCEIsRequired: plain and missing challenges are refused at the
// authorization endpoint; a missing or wrong verifier at the token one;
// a code works once, and its replay ends the grant.
func TestPKCEIsRequired(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Ada")
	a := newAgentClient(t, env)
	verifier := newVerifier(t)
	for _, params := range []url.Values{
		{"code_challenge": {verifier}, "code_challenge_method": {"plain"}},
		{"code_challenge": {""}, "code_challenge_method": {""}},
		{"code_challenge": {oauth.S256Challenge(verifier)}, "code_challenge_method": {""}},
	} {
		loc := a.authorize(t, params)
		if !strings.HasPrefix(loc.String(), a.redirectURI) || loc.Query().Get("error") != "invalid_request" {
			t.Fatalf("%v: sent to %s", params, loc)
		}
	}
	// Another resource than the agent endpoint is not a token's audience.
	loc := a.authorize(t, url.Values{"code_challenge": {oauth.S256Challenge(verifier)}, "code_challenge_method": {"S256"},
		"resource": {"https://elsewhere.example/mcp"}})
	if loc.Query().Get("error") != "invalid_target" {
		t.Fatalf("foreign resource: sent to %s", loc)
	}

	loc = a.authorize(t, url.Values{"code_challenge": {oauth.S256Challenge(verifier)}, "code_challenge_method": {"S256"}})
	code := a.consent(t, u, loc, nil)
	exchange := func(v string) tokenAnswer {
		return a.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {a.redirectURI}, "code_verifier": {v}})
	}
	if missing := exchange(""); missing.status != http.StatusBadRequest || missing.Error != "invalid_request" {
		t.Fatalf("missing verifier %+v", missing)
	}
	if wrong := exchange(newVerifier(t)); wrong.status != http.StatusBadRequest || wrong.Error != "invalid_grant" {
		t.Fatalf("wrong verifier %+v", wrong)
	}
	good := exchange(verifier)
	if good.status != http.StatusOK {
		t.Fatalf("exchange %+v", good)
	}
	if replay := exchange(verifier); replay.status != http.StatusBadRequest {
		t.Fatalf("code replay %+v", replay)
	}
	bearer(env, good.AccessToken, http.MethodGet, "/v1/projects", nil).MustStatus(t, http.StatusUnauthorized)
}

// TestAgentTokenRefusals: a token for another audience, an expired one,
// one without mcp:write on a mutation, one whose person left, and an
// approval attempted with an agent token are refused.
func TestAgentTokenRefusals(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := env.WithOrganization("Owner")
	a := newAgentClient(t, env)

	// Tokens signed with the server's own key but wrong claims.
	signer, err := oauth.NewSigner(secret.Derive(env.Config.AuthSecret, "oauth-access-token-signing"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	forged := func(aud string, exp time.Time) string {
		tok, err := signer.Sign(oauth.Claims{Issuer: env.Config.Issuer(), Subject: owner.ID, Audience: jwt.Audience{aud},
			Expiry: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(now.Add(-2 * time.Hour)), ID: "oat_x",
			ClientID: a.id, Scope: "mcp:tools mcp:write", OrganizationID: owner.OrganizationID})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for name, tok := range map[string]string{
		"another audience": forged("https://elsewhere.example/mcp", now.Add(time.Hour)),
		"expired":          forged(env.Config.AgentResource(), now.Add(-time.Hour)),
		"unknown":          forged(env.Config.AgentResource(), now.Add(time.Hour)),
	} {
		resp := bearer(env, tok, http.MethodGet, "/v1/projects", nil)
		if resp.Status != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "invalid_token") {
			t.Fatalf("%s: %d %s", name, resp.Status, resp.Header)
		}
	}

	// A real token with its signature altered, or its claims replaced and
	// signed again with the server's key, is no token Cairn issued.
	genuine := a.signIn(t, owner).AccessToken
	bearer(env, genuine, http.MethodGet, "/v1/projects", nil).MustStatus(t, http.StatusOK)
	dot := strings.LastIndexByte(genuine, '.')
	sig := []byte(genuine[dot+1:])
	sig[len(sig)/2] ^= 1
	var resigned string
	{
		claims, err := oauth.ReadIssuedAccessToken(genuine, signer.KeySet(), env.Config.Issuer(), env.Config.AgentResource(), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		claims.IssuedAt = jwt.NewNumericDate(now.Add(-time.Minute))
		if resigned, err = signer.Sign(claims); err != nil {
			t.Fatal(err)
		}
	}
	for name, tok := range map[string]string{"altered signature": genuine[:dot+1] + string(sig), "re-signed claims": resigned} {
		if resp := bearer(env, tok, http.MethodGet, "/v1/projects", nil); resp.Status != http.StatusUnauthorized {
			t.Fatalf("%s: %d %s", name, resp.Status, resp.Body)
		}
	}

	// A read-only grant cannot mutate.
	readOnly := a.signIn(t, owner, "mcp:tools")
	if readOnly.Scope != "mcp:tools" {
		t.Fatalf("narrowed scope %q", readOnly.Scope)
	}
	resp := bearer(env, readOnly.AccessToken, http.MethodPost, "/v1/runs", map[string]any{"workspace_id": "wks_x"})
	if resp.Status != http.StatusForbidden || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "insufficient_scope") {
		t.Fatalf("read-only mutation: %d %s", resp.Status, resp.Body)
	}

	// Approval is a person's: not an agent operation at all.
	full := a.signIn(t, owner)
	bearer(env, full.AccessToken, http.MethodPost, "/v1/runs/run_x/actions/approve", map[string]any{}).MustStatus(t, http.StatusForbidden)
	bearer(env, full.AccessToken, http.MethodPost, "/v1/runs/run_x/policy-overrides", map[string]any{}).MustStatus(t, http.StatusForbidden)

	// A member who leaves takes their agents' access with them.
	member := env.SignUp("Member")
	env.Join(owner, member, "writer")
	memberTok := a.signIn(t, member)
	bearer(env, memberTok.AccessToken, http.MethodGet, "/v1/projects", nil).MustStatus(t, http.StatusOK)
	if _, err := env.DB.Exec(`DELETE FROM memberships WHERE user_id = $1 AND organization_id = $2`, member.ID, owner.OrganizationID); err != nil {
		t.Fatal(err)
	}
	bearer(env, memberTok.AccessToken, http.MethodGet, "/v1/projects", nil).MustStatus(t, http.StatusForbidden)
	if r := a.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {memberTok.RefreshToken}}); r.status != http.StatusBadRequest {
		t.Fatalf("refresh after leaving %+v", r)
	}
}

// TestAgentsReachWhatTheirPersonsTeamsGrant: an agent acting for a member
// (who reaches only what teams grant) lists exactly the workspaces a team
// of theirs grants, read with the token itself, and loses one as soon as
// they leave the team.
func TestAgentsReachWhatTheirPersonsTeamsGrant(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := env.WithOrganization("Owner")
	member := env.SignUp("Member")
	env.Join(owner, member, "member")
	var project struct{ ID string }
	owner.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "granted"}).MustStatus(t, http.StatusCreated).Data(t, &project)
	workspace := func(name string) string {
		var ws struct{ ID string }
		owner.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": project.ID, "name": name,
			"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).
			MustStatus(t, http.StatusCreated).Data(t, &ws)
		return ws.ID
	}
	granted, other := workspace("granted"), workspace("other")
	var team struct{ ID string }
	owner.Mutate(http.MethodPost, "/v1/teams", map[string]any{"name": "agents-team"}).MustStatus(t, http.StatusCreated).Data(t, &team)
	owner.Mutate(http.MethodPost, "/v1/teams/"+team.ID+"/members", map[string]any{"user_ids": []string{member.ID}}).MustStatus(t, http.StatusOK)
	owner.Mutate(http.MethodPost, "/v1/workspaces/"+granted+"/team-access", map[string]any{"team_id": team.ID, "access": "read"}).
		MustStatus(t, http.StatusCreated)

	tok := newAgentClient(t, env).signIn(t, member)
	listed := func() []string {
		var list struct {
			Data []struct{ ID string } `json:"data"`
		}
		bearer(env, tok.AccessToken, http.MethodGet, "/v1/workspaces", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
		var ids []string
		for _, w := range list.Data {
			ids = append(ids, w.ID)
		}
		return ids
	}
	if got := listed(); len(got) != 1 || got[0] != granted {
		t.Fatalf("the agent lists %v; its person's team grants only %s", got, granted)
	}
	bearer(env, tok.AccessToken, http.MethodGet, "/v1/workspaces/"+other, nil).MustStatus(t, http.StatusNotFound)
	if _, err := env.DB.Exec(`DELETE FROM team_members WHERE user_id = $1`, member.ID); err != nil {
		t.Fatal(err)
	}
	// Without a team the member reads no workspace at all, as in a session.
	bearer(env, tok.AccessToken, http.MethodGet, "/v1/workspaces", nil).MustStatus(t, http.StatusForbidden)
	member.Get("/v1/workspaces").MustStatus(t, http.StatusForbidden)
	bearer(env, tok.AccessToken, http.MethodGet, "/v1/workspaces/"+granted, nil).MustStatus(t, http.StatusNotFound)
}
