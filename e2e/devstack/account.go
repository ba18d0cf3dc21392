package devstack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// AccountToken signs a new person up with email, gives them an
// organization of their own (slug home) and returns an account-wide API
// token for the remote-backend API: a client that acts as that person in
// every organization they belong to, including the ones it creates, as
// go-tfe's integration tests expect of an HCP Terraform user token.
func AccountToken(client *http.Client, apiURL, email, home string) (string, error) {
	var signedUp struct {
		Data struct {
			Token string `json:"token"`
		} `json:"data"`
	}
	body := map[string]string{"email": email, "password": "correct horse battery staple", "name": "Compat Person"}
	if err := postJSON(client, apiURL+"/api/auth/sign-up/email", "", "", body, &signedUp); err != nil {
		return "", fmt.Errorf("signing up: %w", err)
	}
	session := signedUp.Data.Token
	if err := postJSON(client, apiURL+"/api/auth/organization/create", session, "",
		map[string]string{"name": home, "slug": home}, nil); err != nil {
		return "", fmt.Errorf("creating the person's organization: %w", err)
	}
	var issued struct {
		Data struct {
			Token string `json:"token"`
		} `json:"data"`
	}
	if err := postJSON(client, apiURL+"/v1/user-tokens", session, "account-token-"+email,
		map[string]string{"description": "account-wide", "scope": "account"}, &issued); err != nil {
		return "", fmt.Errorf("creating the account-wide token: %w", err)
	}
	if issued.Data.Token == "" {
		return "", fmt.Errorf("creating the account-wide token: no token in the answer")
	}
	return issued.Data.Token, nil
}

// postJSON posts body as a signed-in session (when session is set) and
// decodes a 2xx answer into into (when set).
func postJSON(client *http.Client, url, session, idempotencyKey string, body, into any) error {
	raw, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("Cookie", "__Secure-identity.session_token="+session)
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, answer)
	}
	if into != nil {
		return json.Unmarshal(answer, into)
	}
	return nil
}
