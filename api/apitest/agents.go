package apitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/cairnhq/cairn/api/authserver"
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
	return Consent(u.http, u.env.URL, u.Token, u.OrganizationID, authorizeURL, scopes)
}

// Consent is User.Consent for any API and session: the end-to-end tests
// drive the real binaries with it.
func Consent(client *http.Client, apiURL, session, organizationID, authorizeURL string, scopes []string) (*url.URL, error) {
	noFollow := &http.Client{Transport: client.Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
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
	if _, err := sessionCall(client, http.MethodGet, apiURL+"/api/auth/oauth2/consent?"+consent.RawQuery, session, nil); err != nil {
		return nil, err
	}
	raw, err := sessionCall(client, http.MethodPost, apiURL+"/api/auth/oauth2/consent", session, map[string]any{
		"query": consent.RawQuery, "organization_id": organizationID, "allow": true, "scopes": scopes})
	if err != nil {
		return nil, err
	}
	var answer struct {
		Data struct {
			RedirectURI string `json:"redirect_uri"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, err
	}
	return url.Parse(answer.Data.RedirectURI)
}

// sessionCall is one identity-server call with a session cookie; anything
// but 200 is an error.
func sessionCall(client *http.Client, method, target, session string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = strings.NewReader(string(raw))
	}
	req, err := http.NewRequest(method, target, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Cookie", authserver.SessionCookie+"="+session)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %d %s", method, target, resp.StatusCode, raw)
	}
	return raw, nil
}

// AgentToken runs the OAuth code flow of a freshly registered agent client
// with mcp:write for u and returns its access token.
func (u *User) AgentToken() string {
	t := u.env.T
	t.Helper()
	token, err := AgentToken(u.http, u.env.URL, u.env.Config.AgentResource(), u.Token, u.OrganizationID)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// AgentToken registers an agent client and runs its OAuth code flow with
// mcp:write for the person of a session in an organization, returning
// the access token for resource.
func AgentToken(client *http.Client, apiURL, resource, session, organizationID string) (string, error) {
	redirect := "http://127.0.0.1:9/callback"
	raw, err := json.Marshal(map[string]any{
		"client_name": "Test agent", "redirect_uris": []string{redirect}, "token_endpoint_auth_method": "none",
		"grant_types": []string{"authorization_code"}})
	if err != nil {
		return "", err
	}
	resp, err := client.Post(apiURL+"/api/auth/oauth2/register", "application/json", strings.NewReader(string(raw)))
	if err != nil {
		return "", err
	}
	var registered struct {
		ClientID string `json:"client_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&registered)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("registering an agent client: %d %v", resp.StatusCode, err)
	}
	verifier := strings.Repeat("v", 50)
	q := url.Values{"client_id": {registered.ClientID}, "redirect_uri": {redirect}, "response_type": {"code"}, "state": {"s"},
		"resource": {resource}, "scope": {"mcp:tools mcp:write"},
		"code_challenge": {oauth.S256Challenge(verifier)}, "code_challenge_method": {"S256"}}
	back, err := Consent(client, apiURL, session, organizationID, apiURL+"/api/auth/oauth2/authorize?"+q.Encode(), nil)
	if err != nil {
		return "", err
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")}, "redirect_uri": {redirect},
		"code_verifier": {verifier}, "resource": {resource}, "client_id": {registered.ClientID}}
	resp, err = client.Post(apiURL+"/api/auth/oauth2/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		return "", fmt.Errorf("agent token: %d %v", resp.StatusCode, err)
	}
	return tok.AccessToken, nil
}
