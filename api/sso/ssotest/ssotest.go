// Package ssotest is an in-process OpenID Connect provider for tests and
// benchmarks of federated sign-in: discovery, JWKS, an authorization
// endpoint that approves at once (PKCE S256 required), a token endpoint
// and userinfo. Its knobs forge what a hostile or broken provider would
// send: edited claims, another key's signature, a broken signature.
package ssotest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// User is who the provider signs in next.
type User struct {
	Subject       string
	Email         string
	EmailVerified bool
	Name          string
	// Groups, when not nil, is the groups claim.
	Groups []string
}

// IdP is the running provider.
type IdP struct {
	URL          string
	ClientID     string
	ClientSecret string

	mu      sync.Mutex
	user    User
	edit    func(claims map[string]any)
	alien   bool
	corrupt bool
	codes   map[string]grant
	key     *rsa.PrivateKey
	other   *rsa.PrivateKey
	srv     *httptest.Server
}

type grant struct {
	nonce, challenge, redirect string
	user                       User
}

// Start runs a provider until the test ends.
func Start(t testing.TB) *IdP {
	t.Helper()
	idp, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(idp.Close)
	return idp
}

// New runs a provider until Close (for benchmarks outside a test).
func New() (*IdP, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	idp := &IdP{ClientID: "cairn-test", ClientSecret: "cairn-test-client-secret", codes: map[string]grant{},
		key: key, other: other, user: User{Subject: "u-1", Email: "jane@example.com", EmailVerified: true, Name: "Jane"}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", idp.discovery)
	mux.HandleFunc("GET /jwks", idp.jwks)
	mux.HandleFunc("GET /authorize", idp.authorize)
	mux.HandleFunc("POST /token", idp.token)
	mux.HandleFunc("GET /userinfo", idp.userinfo)
	idp.srv = httptest.NewServer(mux)
	idp.URL = idp.srv.URL
	return idp, nil
}

// Close stops the provider.
func (p *IdP) Close() { p.srv.Close() }

// SetUser sets who signs in next.
func (p *IdP) SetUser(u User) { p.mu.Lock(); p.user = u; p.mu.Unlock() }

// EditClaims edits the claims of every ID token issued from now on (nil: none).
func (p *IdP) EditClaims(edit func(claims map[string]any)) { p.mu.Lock(); p.edit = edit; p.mu.Unlock() }

// SignWithAnotherKey signs ID tokens with a key the JWKS does not publish.
func (p *IdP) SignWithAnotherKey(on bool) { p.mu.Lock(); p.alien = on; p.mu.Unlock() }

// BreakSignatures alters a byte of each ID token's signature.
func (p *IdP) BreakSignatures(on bool) { p.mu.Lock(); p.corrupt = on; p.mu.Unlock() }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (p *IdP) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{
		"issuer": p.URL, "authorization_endpoint": p.URL + "/authorize", "token_endpoint": p.URL + "/token",
		"jwks_uri": p.URL + "/jwks", "userinfo_endpoint": p.URL + "/userinfo",
		"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"}, "code_challenge_methods_supported": []string{"S256"},
	})
}

func (p *IdP) jwks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
}

func (p *IdP) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != p.ClientID || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	code := rand.Text()
	p.mu.Lock()
	p.codes[code] = grant{nonce: q.Get("nonce"), challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), user: p.user}
	p.mu.Unlock()
	back, _ := url.Parse(q.Get("redirect_uri"))
	bq := back.Query()
	bq.Set("code", code)
	bq.Set("state", q.Get("state"))
	back.RawQuery = bq.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (p *IdP) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
	}
	p.mu.Lock()
	g, found := p.codes[r.PostFormValue("code")]
	delete(p.codes, r.PostFormValue("code"))
	edit, alien, broken := p.edit, p.alien, p.corrupt
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
	if id != p.ClientID || secret != p.ClientSecret || !found || g.redirect != r.PostFormValue("redirect_uri") ||
		base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]string{"error": "invalid_grant"})
		return
	}
	now := time.Now()
	claims := map[string]any{"iss": p.URL, "aud": p.ClientID, "sub": g.user.Subject, "iat": now.Unix(),
		"exp": now.Add(5 * time.Minute).Unix(), "nonce": g.nonce, "email": g.user.Email,
		"email_verified": g.user.EmailVerified, "name": g.user.Name}
	if g.user.Groups != nil {
		claims["groups"] = g.user.Groups
	}
	if edit != nil {
		edit(claims)
	}
	key := p.key
	if alien {
		key = p.other
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	payload, _ := json.Marshal(claims)
	obj, err := signer.Sign(payload)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	raw, _ := obj.CompactSerialize()
	if broken {
		b := []byte(raw)
		b[len(b)-5] ^= 0x01
		if b[len(b)-5] == '-' || b[len(b)-5] == '_' {
			b[len(b)-5] = 'A'
		}
		raw = string(b)
	}
	writeJSON(w, map[string]any{"access_token": "at-" + rand.Text(), "token_type": "Bearer", "expires_in": 300, "id_token": raw})
}

func (p *IdP) userinfo(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	u := p.user
	p.mu.Unlock()
	writeJSON(w, map[string]any{"sub": u.Subject, "email": u.Email, "email_verified": u.EmailVerified})
}
