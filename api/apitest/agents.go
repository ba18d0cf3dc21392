package apitest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/cairnhq/cairn/api/oauth"
)

// Consent plays the person's part of an agent's authorization: the browser
// opens the client's authorization URL, the API sends it to the consent
// screen, and u (signed in) allows the request in u's active organization,
// granting scopes (nil: all requested). It returns the client's redirect
// URI with the code, state and issuer, as the browser would be sent there.
func (u *User) Consent(authorizeURL string, scopes []string) (*url.URL, error) {
	t := u.env.T
	t.Helper()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(authorizeURL)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	consent, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusFound || !strings.HasSuffix(consent.Path, "/oauth/consent") {
		// An error the authorization server sends back to the client.
		return consent, nil
	}
	u.Get("/api/auth/oauth2/consent?"+consent.RawQuery).MustStatus(t, http.StatusOK)
	var answer struct {
		RedirectURI string `json:"redirect_uri"`
	}
	u.Do(Request{Method: http.MethodPost, Path: "/api/auth/oauth2/consent", Body: map[string]any{
		"query": consent.RawQuery, "organization_id": u.OrganizationID, "allow": true, "scopes": scopes,
	}}).MustStatus(t, http.StatusOK).Data(t, &answer)
	return url.Parse(answer.RedirectURI)
}

// AgentToken runs the OAuth code flow of a freshly registered agent client
// with mcp:write for u and returns its access token.
func (u *User) AgentToken() string {
	env, t := u.env, u.env.T
	t.Helper()
	redirect := "http://127.0.0.1:9/callback"
	var client struct {
		ClientID string `json:"client_id"`
	}
	env.Anonymous().Do(Request{Method: http.MethodPost, Path: "/api/auth/oauth2/register", Body: map[string]any{
		"client_name": "Test agent", "redirect_uris": []string{redirect}, "token_endpoint_auth_method": "none",
		"grant_types": []string{"authorization_code"}}}).MustStatus(t, http.StatusCreated).JSON(t, &client)
	verifier := strings.Repeat("v", 50)
	q := url.Values{"client_id": {client.ClientID}, "redirect_uri": {redirect}, "response_type": {"code"}, "state": {"s"},
		"resource": {env.Config.AgentResource()}, "scope": {"mcp:tools mcp:write"},
		"code_challenge": {oauth.S256Challenge(verifier)}, "code_challenge_method": {"S256"}}
	back, err := u.Consent(env.URL+"/api/auth/oauth2/authorize?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")}, "redirect_uri": {redirect},
		"code_verifier": {verifier}, "resource": {env.Config.AgentResource()}, "client_id": {client.ClientID}}
	resp, err := http.Post(env.URL+"/api/auth/oauth2/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("agent token: %d %v", resp.StatusCode, err)
	}
	return tok.AccessToken
}
