package authserver_test

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
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

// startSSO starts an organization SSO sign-in for email and walks the
// provider's redirect, returning the API callback URL.
func startSSO(t *testing.T, env *apitest.Env, email string) string {
	t.Helper()
	var start struct{ URL string }
	env.Anonymous().Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-in/sso", Body: map[string]string{
		"email": email, "callbackURL": env.Config.DashboardURL + "/done", "clientBinding": bindingHash()}}).
		MustStatus(t, http.StatusOK).Data(t, &start)
	resp, err := noFollow.Get(start.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header.Get("Location")
}

// TestLinkingAnExistingAccountByEmail: a verified address is not enough to
// take over the account that has it. An organization's provider links only
// an account that belongs to no other organization, so an owner cannot
// register a provider for a member's address and sign in as them
// elsewhere; the instance IdP does not link an account that only an
// organization's provider created.
func TestLinkingAnExistingAccountByEmail(t *testing.T) {
	t.Parallel()
	env, idp := ssoEnv(t)
	owner := env.WithOrganization("Olive")
	domain := fmt.Sprintf("d%d.example", time.Now().UnixNano())
	owner.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sso/register", Body: map[string]any{
		"type": "oidc", "issuer": idp.URL, "domains": []string{domain},
		"oidcConfig": map[string]any{"clientId": idp.ClientID, "clientSecret": "cairn-test-client-secret"},
	}}).MustStatus(t, http.StatusOK)

	signUp := func(local string) *apitest.User {
		email := local + "@" + domain
		c := env.Anonymous()
		var out struct {
			User  struct{ ID string } `json:"user"`
			Token string              `json:"token"`
		}
		c.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-up/email", Body: map[string]string{
			"email": email, "password": "correct horse battery staple", "name": local}}).MustStatus(t, http.StatusOK).Data(t, &out)
		c.Token = out.Token
		return &apitest.User{Client: c, ID: out.User.ID, Email: email, Password: "correct horse battery staple"}
	}
	ssoAs := func(email string) *url.URL {
		idp.SetUser(ssotest.User{Subject: "sub-" + email, Email: email, EmailVerified: true, Name: email})
		return callback(t, startSSO(t, env, email))
	}
	linked := func(email string) int {
		var n int
		if err := env.DB.Get(&n, `SELECT count(*) FROM external_identities e JOIN users u ON u.id = e.user_id
			WHERE u.email = $1`, email); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Someone who works in another organization too: refused, nothing linked.
	elsewhere := signUp("victim")
	other := env.WithOrganization("Other")
	env.Join(other, elsewhere, "reader")
	env.Join(owner, elsewhere, "reader")
	if back := ssoAs(elsewhere.Email); back.Query().Get("signInError") != "ACCOUNT_NOT_LINKABLE" || linked(elsewhere.Email) != 0 {
		t.Fatalf("a member of another organization was linked: %s", back)
	}

	// A member of this organization only (or of none): linked and signed in.
	member := signUp("member")
	env.Join(owner, member, "reader")
	if back := ssoAs(member.Email); back.Query().Get("signInCode") == "" || linked(member.Email) != 1 {
		t.Fatalf("the organization's own member was not linked: %s", back)
	}

	// An account the organization's provider created cannot be claimed
	// through the instance IdP by the same address.
	created := "created@" + domain
	if back := ssoAs(created); back.Query().Get("signInCode") == "" {
		t.Fatalf("just-in-time account not created: %s", back)
	}
	idp.SetUser(ssotest.User{Subject: "google-" + created, Email: created, EmailVerified: true})
	if back := callback(t, startSocial(t, env)); back.Query().Get("signInError") != "ACCOUNT_NOT_LINKABLE" || linked(created) != 1 {
		t.Fatalf("the instance IdP claimed an account an organization created: %s", back)
	}

	// A password account is linked by the instance IdP.
	idp.SetUser(ssotest.User{Subject: "google-" + elsewhere.Email, Email: elsewhere.Email, EmailVerified: true})
	if back := callback(t, startSocial(t, env)); back.Query().Get("signInCode") == "" || linked(elsewhere.Email) != 1 {
		t.Fatalf("the instance IdP did not link a password account: %s", back)
	}
}
