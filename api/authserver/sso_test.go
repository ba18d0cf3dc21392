package authserver_test

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/sso/ssotest"
)

const bindingSecret = "browser-bound-secret"

func bindingHash() string {
	sum := sha256.Sum256([]byte(bindingSecret))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// ssoEnv is an API whose instance IdP is an in-process provider.
func ssoEnv(t *testing.T) (*apitest.Env, *ssotest.IdP) {
	idp := ssotest.Start(t)
	env := apitest.New(t, func(s *apitest.Settings) {
		s.Config.IdPName, s.Config.IdPIssuer = "oidc", idp.URL
		s.Config.IdPClientID, s.Config.IdPClientSecret = idp.ClientID, "cairn-test-client-secret"
	})
	return env, idp
}

var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// startSocial starts a flow and walks the provider's redirect, returning
// the API callback URL the provider sent the browser to.
func startSocial(t *testing.T, env *apitest.Env) string {
	t.Helper()
	var start struct{ URL string }
	env.Anonymous().Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-in/social", Body: map[string]string{
		"provider": "oidc", "callbackURL": env.Config.DashboardURL + "/done", "clientBinding": bindingHash()}}).
		MustStatus(t, http.StatusOK).Data(t, &start)
	resp, err := noFollow.Get(start.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header.Get("Location")
}

// callback follows the provider's redirect to the API and returns the
// dashboard URL the API sent the browser to.
func callback(t *testing.T, callbackURL string) *url.URL {
	t.Helper()
	resp, err := noFollow.Get(callbackURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil {
		t.Fatalf("callback: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return back
}

func accounts(t *testing.T, env *apitest.Env) int {
	var n int
	if err := env.DB.Get(&n, `SELECT count(*) FROM users`); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSocialSignInRefusesForgedIDTokens: an ID token whose signature,
// issuer, audience, expiry or nonce does not check out sends the browser
// back with ID_TOKEN_INVALID, and neither an account, a session nor a code
// is created; the untouched token signs in.
func TestSocialSignInRefusesForgedIDTokens(t *testing.T) {
	t.Parallel()
	env, idp := ssoEnv(t)
	for _, tc := range []struct {
		name  string
		setup func()
	}{
		{"wrong audience", func() { idp.EditClaims(func(c map[string]any) { c["aud"] = "someone-else" }) }},
		{"wrong issuer", func() { idp.EditClaims(func(c map[string]any) { c["iss"] = "https://evil.example" }) }},
		{"wrong nonce", func() { idp.EditClaims(func(c map[string]any) { c["nonce"] = "replayed-nonce" }) }},
		{"expired", func() { idp.EditClaims(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }) }},
		{"another key's signature", func() { idp.SignWithAnotherKey(true) }},
		{"tampered signature", func() { idp.BreakSignatures(true) }},
		{"tampered claims", func() {
			idp.EditClaims(func(c map[string]any) { c["email"] = "admin@example.com" })
			idp.BreakSignatures(true)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idp.EditClaims(nil)
			idp.SignWithAnotherKey(false)
			idp.BreakSignatures(false)
			tc.setup()
			back := callback(t, startSocial(t, env))
			if got := back.Query().Get("signInError"); got != "ID_TOKEN_INVALID" || back.Query().Has("signInCode") {
				t.Fatalf("sent back to %s", back)
			}
			if n := accounts(t, env); n != 0 {
				t.Fatalf("%d accounts created", n)
			}
		})
	}
	idp.EditClaims(nil)
	idp.SignWithAnotherKey(false)
	idp.BreakSignatures(false)
	back := callback(t, startSocial(t, env))
	var in struct{ User struct{ Email string } }
	env.Anonymous().Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-in/code",
		Body: map[string]string{"code": back.Query().Get("signInCode"), "clientBinding": bindingSecret}}).
		MustStatus(t, http.StatusOK).Data(t, &in)
	if in.User.Email != "jane@example.com" {
		t.Fatalf("signed in as %q", in.User.Email)
	}
}

// TestSocialSignInRefusesExpiredState: a callback after the flow's ten
// minutes is sent back with SIGN_IN_STATE_EXPIRED and creates nothing.
func TestSocialSignInRefusesExpiredState(t *testing.T) {
	t.Parallel()
	env, _ := ssoEnv(t)
	cb := startSocial(t, env)
	if _, err := env.DB.Exec(`UPDATE sign_in_flows SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	back := callback(t, cb)
	if back.Query().Get("signInError") != "SIGN_IN_STATE_EXPIRED" || accounts(t, env) != 0 {
		t.Fatalf("expired state sent back to %s", back)
	}
}

// TestSocialSignInClosedWithoutStrongSecret: a missing or short client
// secret lists no provider and answers 503, never an open sign-in.
func TestSocialSignInClosedWithoutStrongSecret(t *testing.T) {
	t.Parallel()
	idp := ssotest.Start(t)
	env := apitest.New(t, func(s *apitest.Settings) {
		s.Config.IdPName, s.Config.IdPIssuer, s.Config.IdPClientID, s.Config.IdPClientSecret = "oidc", idp.URL, idp.ClientID, "short"
	})
	r := env.Anonymous().Get("/api/auth/sign-in/providers").MustStatus(t, http.StatusOK)
	if !strings.Contains(string(r.Body), `"social":[]`) {
		t.Fatalf("providers: %s", r.Body)
	}
	r = env.Anonymous().Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-in/social", Body: map[string]string{
		"provider": "oidc", "callbackURL": env.Config.DashboardURL + "/done", "clientBinding": bindingHash()}})
	if r.Status != http.StatusServiceUnavailable || r.Code() != "IDP_UNCONFIGURED" {
		t.Fatalf("weak secret: %d %s", r.Status, r.Body)
	}
}
