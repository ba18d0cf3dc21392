package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/cairnhq/cairn/api/sso/ssotest"
)

const benchSSORounds = 200

// benchSSO measures an SSO callback — the code exchange, the ID token's
// verification (signature, issuer, audience, expiry, nonce), the account
// lookup, the session and the one-time code — against an in-process IdP,
// beside a get-session of the same API in the same run. Each round starts
// its own flow (untimed): a callback's state is single use.
func benchSSO(dbURL string) error {
	idp, err := ssotest.New()
	if err != nil {
		return err
	}
	defer idp.Close()
	api, err := startAPI(dbURL, nil, "IDP_CLIENT_ID="+idp.ClientID, "IDP_CLIENT_SECRET="+idp.ClientSecret,
		"CAIRN_IDP_ISSUER="+idp.URL, "CAIRN_IDP_NAME=oidc")
	if err != nil {
		return err
	}
	defer api.Stop()
	client := &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	secret := "bench-browser-secret"
	sum := sha256.Sum256([]byte(secret))
	binding := base64.RawURLEncoding.EncodeToString(sum[:])
	callbackURL := func() (string, error) {
		var start struct{ URL string }
		if err := postData(client, api.URL+"/api/auth/sign-in/social", map[string]string{
			"provider": "oidc", "callbackURL": "http://127.0.0.1:8090/done", "clientBinding": binding}, &start); err != nil {
			return "", fmt.Errorf("starting a sign-in: %w", err)
		}
		resp, err := client.Get(start.URL)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		return resp.Header.Get("Location"), nil
	}
	var callbacks, sessions []float64
	var session string
	for i := range benchSSORounds {
		cb, err := callbackURL()
		if err != nil {
			return err
		}
		t0 := time.Now()
		resp, err := client.Get(cb)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			return fmt.Errorf("SSO callback %d: %d", i, resp.StatusCode)
		}
		callbacks = append(callbacks, ms64(time.Since(t0)))
		if session == "" {
			session, err = redeemBenchCode(client, api.URL, resp.Header.Get("Location"), secret)
			if err != nil {
				return err
			}
		}
	}
	for range benchSSORounds {
		t0 := time.Now()
		if st := call(client, http.MethodGet, api.URL+"/api/auth/get-session", session, nil, nil, nil); st != http.StatusOK {
			return fmt.Errorf("get-session: %d", st)
		}
		sessions = append(sessions, ms64(time.Since(t0)))
	}
	sort.Float64s(callbacks)
	sort.Float64s(sessions)
	fmt.Printf("%-44s p50 %7.2f ms  p99 %7.2f ms  (%d sequential)\n", "SSO callback (OIDC verify + session + code)",
		percentile(callbacks, 0.50), percentile(callbacks, 0.99), benchSSORounds)
	fmt.Printf("%-44s p50 %7.2f ms  p99 %7.2f ms  | SSO callback vs get-session: p50 x%.2f, p99 x%.2f\n",
		"GET /api/auth/get-session (baseline)", percentile(sessions, 0.50), percentile(sessions, 0.99),
		percentile(callbacks, 0.50)/percentile(sessions, 0.50), percentile(callbacks, 0.99)/percentile(sessions, 0.99))
	return nil
}

// redeemBenchCode exchanges the first callback's code for a session token.
func redeemBenchCode(client *http.Client, apiURL, location, secret string) (string, error) {
	u, err := url.Parse(location)
	if err != nil {
		return "", err
	}
	var in struct{ Token string }
	if err := postData(client, apiURL+"/api/auth/sign-in/code", map[string]string{
		"code": u.Query().Get("signInCode"), "clientBinding": secret}, &in); err != nil || in.Token == "" {
		return "", fmt.Errorf("redeeming the sign-in code: %v", err)
	}
	return in.Token, nil
}

// postData posts JSON and decodes the answer's data.
func postData(client *http.Client, url string, body, out any) error {
	raw, _ := json.Marshal(body)
	resp, err := client.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d", url, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(&struct{ Data any }{Data: out})
}
