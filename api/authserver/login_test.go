package authserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/oauth"
)

// cliClient is the CLI's built-in client as `tofu login` drives it from a
// loopback port of its range.
func cliClient(env *apitest.Env, port int) *agentClient {
	return &agentClient{env: env, id: oauth.CLIClientID, name: "OpenTofu/Terraform CLI",
		redirectURI: fmt.Sprintf("http://localhost:%d/login", port), http: &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
}

// cliParams is what the CLI sends besides client_id and redirect_uri: no
// resource, the login.v1 scope, and its PKCE challenge.
func cliParams(verifier string) url.Values {
	return url.Values{"resource": {""}, "scope": {oauth.ScopeCLI}, "code_challenge": {oauth.S256Challenge(verifier)},
		"code_challenge_method": {"S256"}}
}

// TestTofuLoginClient: login.v1 names the built-in client; its redirect
// URI is http://localhost:<port of the range>/login and nothing else; PKCE
// is required; the code, used once with its verifier and redirect URI,
// becomes a new user API token that works on /api/v2.
func TestTofuLoginClient(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Ada")

	var disco map[string]json.RawMessage
	env.Anonymous().Get("/.well-known/terraform.json").MustStatus(t, http.StatusOK).JSON(t, &disco)
	var login struct {
		Client     string   `json:"client"`
		GrantTypes []string `json:"grant_types"`
		Authz      string   `json:"authz"`
		Token      string   `json:"token"`
		Ports      []int    `json:"ports"`
		Scopes     []string `json:"scopes"`
	}
	if err := json.Unmarshal(disco["login.v1"], &login); err != nil {
		t.Fatalf("login.v1: %s", disco["login.v1"])
	}
	if login.Client != oauth.CLIClientID || !slices.Equal(login.GrantTypes, []string{"authz_code"}) ||
		login.Authz != "/api/auth/oauth2/authorize" || login.Token != "/api/auth/oauth2/token" ||
		!slices.Equal(login.Ports, []int{10000, 10010}) || !slices.Equal(login.Scopes, []string{oauth.ScopeCLI}) {
		t.Fatalf("login.v1 %+v", login)
	}

	verifier := newVerifier(t)
	// Redirect URIs the CLI never sends are refused here, never redirected to.
	for _, bad := range []string{"http://localhost:9999/login", "http://localhost:10011/login", "http://localhost/login",
		"http://127.0.0.1:10005/login", "http://localhost:10005/callback", "http://localhost:10005/login/",
		"http://localhost:10005/login?x=1", "https://localhost:10005/login", "http://LOCALHOST:10005/login",
		"http://evil.example:10005/login"} {
		q := cliParams(verifier)
		q.Del("resource")
		q.Set("client_id", oauth.CLIClientID)
		q.Set("redirect_uri", bad)
		q.Set("response_type", "code")
		resp := env.Anonymous().Get("/api/auth/oauth2/authorize?" + q.Encode())
		var e struct{ Error string }
		resp.MustStatus(t, http.StatusBadRequest).JSON(t, &e)
		if e.Error != "invalid_request" || resp.Header.Get("Location") != "" {
			t.Fatalf("%s: %d %s", bad, resp.Status, resp.Body)
		}
	}

	a := cliClient(env, 10000)
	// No PKCE, or an agent's scope: refused at the CLI's redirect URI.
	for name, params := range map[string]url.Values{
		"no challenge":  {"resource": {""}, "scope": {oauth.ScopeCLI}},
		"plain":         {"resource": {""}, "scope": {oauth.ScopeCLI}, "code_challenge": {verifier}, "code_challenge_method": {"plain"}},
		"agent scope":   {"resource": {""}, "scope": {"mcp:tools"}, "code_challenge": {oauth.S256Challenge(verifier)}, "code_challenge_method": {"S256"}},
		"openid":        {"resource": {""}, "scope": {"tfe:api openid"}, "code_challenge": {oauth.S256Challenge(verifier)}, "code_challenge_method": {"S256"}},
		"mcp audience":  {"scope": {oauth.ScopeCLI}, "code_challenge": {oauth.S256Challenge(verifier)}, "code_challenge_method": {"S256"}},
		"unknown scope": {"resource": {""}, "scope": {"admin"}, "code_challenge": {oauth.S256Challenge(verifier)}, "code_challenge_method": {"S256"}},
	} {
		loc := a.authorize(t, params)
		if !strings.HasPrefix(loc.String(), a.redirectURI+"?") || loc.Query().Get("error") == "" || loc.Query().Get("code") != "" {
			t.Fatalf("%s: sent to %s", name, loc)
		}
	}
	// A registered client cannot claim the CLI's scope.
	resp, _ := registerClient(t, env, map[string]any{"redirect_uris": []string{"http://localhost:10001/login"},
		"token_endpoint_auth_method": "none", "scope": oauth.ScopeCLI})
	resp.MustStatus(t, http.StatusBadRequest)

	a = cliClient(env, 10010)
	code := a.consent(t, u, a.authorize(t, cliParams(verifier)), nil)
	exchange := func(redirectURI, v string) (tokenAnswer, map[string]any) {
		t.Helper()
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {v}}
		form.Set("client_id", a.id)
		resp, err := http.Post(env.URL+"/api/auth/oauth2/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(raw)
		var out tokenAnswer
		_ = json.Unmarshal(b, &out)
		out.status = resp.StatusCode
		return out, raw
	}
	if wrong, _ := exchange(a.redirectURI, newVerifier(t)); wrong.status != http.StatusBadRequest || wrong.Error != "invalid_grant" {
		t.Fatalf("wrong verifier %+v", wrong)
	}
	if other, _ := exchange("http://localhost:10009/login", verifier); other.status != http.StatusBadRequest || other.Error != "invalid_grant" {
		t.Fatalf("another redirect URI %+v", other)
	}
	tok, raw := exchange(a.redirectURI, verifier)
	if tok.status != http.StatusOK || !strings.HasPrefix(tok.AccessToken, "cut_") || raw["token_type"] != "bearer" ||
		tok.RefreshToken != "" || raw["expires_in"] != nil || raw["id_token"] != nil {
		t.Fatalf("exchange %v", raw)
	}
	if replay, _ := exchange(a.redirectURI, verifier); replay.status != http.StatusBadRequest || replay.Error != "invalid_grant" {
		t.Fatalf("code replay %+v", replay)
	}

	// The token is the person's user token in the organization chosen.
	var account struct {
		Data struct {
			ID         string `json:"id"`
			Attributes struct {
				Email string `json:"email"`
			} `json:"attributes"`
		} `json:"data"`
	}
	bearer(env, tok.AccessToken, http.MethodGet, "/api/v2/account/details", nil).MustStatus(t, http.StatusOK).JSON(t, &account)
	if account.Data.ID != u.ID || account.Data.Attributes.Email != u.Email {
		t.Fatalf("account %+v", account)
	}
	var stored struct {
		OrganizationID string `db:"organization_id"`
		Description    string `db:"description"`
		Audited        bool   `db:"audited"`
	}
	if err := env.DB.Get(&stored, `SELECT t.organization_id, t.description,
		EXISTS (SELECT 1 FROM audit_events e WHERE e.action = 'user_token.created' AND e.target_id = t.id) AS audited
		FROM user_tokens t WHERE t.user_id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	if stored.OrganizationID != u.OrganizationID || !strings.HasPrefix(stored.Description, "tofu login 20") || !stored.Audited {
		t.Fatalf("stored token %+v", stored)
	}
}

// TestOpenIDProvider: a standard relying party (go-oidc) discovers the
// provider, verifies the ID token (issuer, audience, signature) and its
// nonce, and reads userinfo, which answers by the granted scopes; a token
// without openid gets no ID token and no userinfo.
func TestOpenIDProvider(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Grace")
	ctx := context.Background()

	provider, err := oidc.NewProvider(ctx, env.Config.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Userinfo   string   `json:"userinfo_endpoint"`
		Algs       []string `json:"id_token_signing_alg_values_supported"`
		Scopes     []string `json:"scopes_supported"`
		Claims     []string `json:"claims_supported"`
		Subjects   []string `json:"subject_types_supported"`
		AuthzEndpt string   `json:"authorization_endpoint"`
	}
	if err := provider.Claims(&meta); err != nil {
		t.Fatal(err)
	}
	if meta.Userinfo != env.Config.Issuer()+"/api/auth/oauth2/userinfo" || !slices.Equal(meta.Algs, []string{"RS256"}) ||
		!slices.Contains(meta.Scopes, "openid") || !slices.Contains(meta.Claims, "email_verified") || !slices.Equal(meta.Subjects, []string{"public"}) {
		t.Fatalf("discovery %+v", meta)
	}

	a := newAgentClient(t, env)
	signIn := func(scope, nonce string) tokenAnswer {
		t.Helper()
		verifier := newVerifier(t)
		loc := a.authorize(t, url.Values{"scope": {scope}, "nonce": {nonce}, "code_challenge": {oauth.S256Challenge(verifier)},
			"code_challenge_method": {"S256"}})
		code := a.consent(t, u, loc, nil)
		tok := a.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {a.redirectURI},
			"code_verifier": {verifier}})
		if tok.status != http.StatusOK {
			t.Fatalf("exchange %+v", tok)
		}
		return tok
	}
	userinfo := func(tok tokenAnswer) (*oidc.UserInfo, map[string]any, error) {
		info, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tok.AccessToken}))
		if err != nil {
			return nil, nil, err
		}
		var claims map[string]any
		return info, claims, info.Claims(&claims)
	}

	full := signIn("openid email profile", "n-0S6_WzA2Mj")
	verifier := provider.Verifier(&oidc.Config{ClientID: a.id})
	idToken, err := verifier.Verify(ctx, full.IDToken)
	if err != nil {
		t.Fatalf("verifying the ID token: %v", err)
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified *bool  `json:"email_verified"`
		Name          string `json:"name"`
		AuthTime      int64  `json:"auth_time"`
		IssuedAt      int64  `json:"iat"`
	}
	if err := idToken.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	if idToken.Subject != u.ID || idToken.Nonce != "n-0S6_WzA2Mj" || claims.Email != u.Email || claims.EmailVerified == nil ||
		*claims.EmailVerified || claims.Name != "Grace" || claims.AuthTime == 0 || claims.AuthTime > claims.IssuedAt {
		t.Fatalf("ID token %+v %+v", idToken, claims)
	}
	// Another client's verifier, or a tampered token, fails.
	if _, err := provider.Verifier(&oidc.Config{ClientID: "ocl_someone_else"}).Verify(ctx, full.IDToken); err == nil {
		t.Fatal("an ID token verified for another audience")
	}
	parts := strings.Split(full.IDToken, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	forged := strings.Replace(string(payload), u.ID, "usr_someone_else", 1)
	if _, err := verifier.Verify(ctx, parts[0]+"."+base64.RawURLEncoding.EncodeToString([]byte(forged))+"."+parts[2]); err == nil || forged == string(payload) {
		t.Fatalf("a tampered ID token verified (%v)", err)
	}
	// An ID token is not an access token, nor the other way round.
	bearer(env, full.IDToken, http.MethodGet, "/v1/projects", nil).MustStatus(t, http.StatusUnauthorized)
	if _, err := verifier.Verify(ctx, full.AccessToken); err == nil {
		t.Fatal("an access token verified as an ID token")
	}

	info, raw, err := userinfo(full)
	if err != nil || info.Subject != u.ID || info.Email != u.Email || info.EmailVerified || raw["name"] != "Grace" {
		t.Fatalf("userinfo %+v %v %v", info, raw, err)
	}
	emailOnly := signIn("openid email", "")
	if _, raw, err := userinfo(emailOnly); err != nil || raw["email"] != u.Email || raw["name"] != nil {
		t.Fatalf("userinfo with email only: %v %v", raw, err)
	}
	profileOnly := signIn("openid profile", "")
	if _, raw, err := userinfo(profileOnly); err != nil || raw["email"] != nil || raw["email_verified"] != nil || raw["name"] != "Grace" {
		t.Fatalf("userinfo with profile only: %v %v", raw, err)
	}
	if idt, err := verifier.Verify(ctx, profileOnly.IDToken); err != nil || idt.Nonce != "" {
		t.Fatalf("ID token without a nonce: %v", err)
	}

	// Without openid: no ID token, and userinfo refuses the token.
	agent := signIn("mcp:tools", "ignored")
	if agent.IDToken != "" {
		t.Fatal("an ID token without the openid scope")
	}
	resp := bearer(env, agent.AccessToken, http.MethodGet, "/api/auth/oauth2/userinfo", nil)
	if resp.Status != http.StatusForbidden || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "insufficient_scope") {
		t.Fatalf("userinfo without openid: %d %s", resp.Status, resp.Body)
	}
	env.Anonymous().Get("/api/auth/oauth2/userinfo").MustStatus(t, http.StatusUnauthorized)
	bearer(env, "not-a-token", http.MethodGet, "/api/auth/oauth2/userinfo", nil).MustStatus(t, http.StatusUnauthorized)
	// Revoked: userinfo stops at once.
	revoked, err := http.Post(env.URL+"/api/auth/oauth2/revoke", "application/x-www-form-urlencoded",
		strings.NewReader(url.Values{"token": {full.AccessToken}, "client_id": {a.id}}.Encode()))
	if err != nil || revoked.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %v %v", revoked, err)
	}
	revoked.Body.Close()
	if _, _, err := userinfo(full); err == nil {
		t.Fatal("userinfo answered a revoked token")
	}
}
