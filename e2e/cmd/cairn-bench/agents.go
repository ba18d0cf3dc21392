package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// benchAgents measures the authorization server and agent bearer tokens
// on /v1: GET /v1/workspaces with an agent bearer (claims, token row, live
// membership) against the same list with a session cookie, then token
// issuance (a refresh, which rotates the refresh token and signs and
// stores a new access token, each client on its own grant). The list comes
// first so that, like the session's, it is measured on a quiet database:
// after the thousands of rotations a second, the autovacuum and
// checkpoint they bring due would run inside the list's window.
func benchAgents(client *http.Client, apiURL, session string, sessionList result) error {
	noFollow := *client
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	var registered struct {
		ClientID string `json:"client_id"`
	}
	if err := postJSON(client, apiURL+"/api/auth/oauth2/register", map[string]any{"client_name": "bench agent",
		"redirect_uris": []string{"http://127.0.0.1:9/cb"}, "token_endpoint_auth_method": "none",
		"grant_types": []string{"authorization_code", "refresh_token"}}, &registered); err != nil {
		return err
	}
	var current struct {
		Data struct {
			Session struct {
				ActiveOrganizationID string `json:"active_organization_id"`
			} `json:"session"`
		} `json:"data"`
	}
	req, _ := http.NewRequest(http.MethodGet, apiURL+"/api/auth/get-session", nil)
	req.Header.Set("Cookie", "__Secure-identity.session_token="+session)
	if err := doJSON(client, req, &current); err != nil {
		return err
	}
	grant := func() (string, string, error) {
		verifier := make([]byte, 32)
		_, _ = rand.Read(verifier)
		v := base64.RawURLEncoding.EncodeToString(verifier)
		sum := sha256.Sum256([]byte(v))
		q := url.Values{"client_id": {registered.ClientID}, "redirect_uri": {"http://127.0.0.1:9/cb"}, "response_type": {"code"},
			"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}, "state": {"s"}}
		resp, err := noFollow.Get(apiURL + "/api/auth/oauth2/authorize?" + q.Encode())
		if err != nil {
			return "", "", err
		}
		resp.Body.Close()
		consent, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || resp.StatusCode != http.StatusFound {
			return "", "", fmt.Errorf("authorize: %d", resp.StatusCode)
		}
		raw, _ := json.Marshal(map[string]any{"query": consent.RawQuery, "organization_id": current.Data.Session.ActiveOrganizationID, "allow": true})
		req, _ := http.NewRequest(http.MethodPost, apiURL+"/api/auth/oauth2/consent", bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Cookie", "__Secure-identity.session_token="+session)
		var answer struct {
			Data struct {
				RedirectURI string `json:"redirect_uri"`
			} `json:"data"`
		}
		if err := doJSON(client, req, &answer); err != nil {
			return "", "", err
		}
		back, _ := url.Parse(answer.Data.RedirectURI)
		tok, err := tokenRequest(client, apiURL, url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")},
			"redirect_uri": {"http://127.0.0.1:9/cb"}, "code_verifier": {v}, "client_id": {registered.ClientID}})
		return tok.AccessToken, tok.RefreshToken, err
	}
	access := make([]string, *concurrency)
	refresh := make([]string, *concurrency)
	for w := range *concurrency {
		var err error
		if access[w], refresh[w], err = grant(); err != nil {
			return fmt.Errorf("authorizing bench agent: %w", err)
		}
	}
	list := load("GET /v1/workspaces?limit=20 (agent bearer)", *concurrency, *duration, func(w, _ int) bool {
		req, _ := http.NewRequest(http.MethodGet, apiURL+"/v1/workspaces?limit=20", nil)
		req.Header.Set("Authorization", "Bearer "+access[w])
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	report(list, sessionList, "p99 < 25 ms")
	issue := load("POST /api/auth/oauth2/token (refresh, rotating)", *concurrency, *duration, func(w, _ int) bool {
		tok, err := tokenRequest(client, apiURL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh[w]},
			"client_id": {registered.ClientID}})
		if err != nil {
			return false
		}
		refresh[w] = tok.RefreshToken
		return true
	})
	report(issue, result{}, "")
	return nil
}

type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
}

func tokenRequest(c *http.Client, apiURL string, form url.Values) (tokenAnswer, error) {
	resp, err := c.Post(apiURL+"/api/auth/oauth2/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		return tokenAnswer{}, err
	}
	defer resp.Body.Close()
	var out tokenAnswer
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.AccessToken == "" {
		return tokenAnswer{}, fmt.Errorf("token request: %d", resp.StatusCode)
	}
	return out, nil
}

func postJSON(c *http.Client, u string, body, out any) error {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	return doJSON(c, req, out)
}

func doJSON(c *http.Client, req *http.Request, out any) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
