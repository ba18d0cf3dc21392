package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestRedirectMatching(t *testing.T) {
	t.Parallel()
	registered := []string{"http://127.0.0.1:4000/cb", "https://agent.example/cb"}
	for requested, want := range map[string]bool{
		"http://127.0.0.1:4000/cb":       true,
		"http://127.0.0.1:51234/cb":      true, // a native client's free port
		"http://127.0.0.1:4000/other":    false,
		"http://127.0.0.1:4000/cb?x=1":   false,
		"https://agent.example/cb":       true,
		"https://agent.example:8443/cb":  false,
		"https://agent.example/cb/":      false,
		"https://evil.example/cb":        false,
		"http://localhost:4000/cb":       false,
		"https://agent.example/cb#frag":  false,
		"HTTPS://agent.example/cb/../cb": false,
	} {
		if got := RedirectMatches(registered, requested); got != want {
			t.Errorf("%s: %v, want %v", requested, got, want)
		}
	}
}

func TestScopesAndPKCE(t *testing.T) {
	t.Parallel()
	if got, err := ParseScope("mcp:write"); err != nil || joinScopes(got) != "mcp:tools mcp:write" {
		t.Fatalf("mcp:write alone: %v %v", got, err)
	}
	if _, err := ParseScope("mcp:tools admin"); !errors.Is(err, ErrInvalidScope) {
		t.Fatalf("unknown scope: %v", err)
	}
	verifier := strings.Repeat("a", 43)
	challenge := S256Challenge(verifier)
	if ValidateChallenge(challenge, "S256") != nil || ValidateChallenge(verifier, "plain") == nil || ValidateChallenge("short", "S256") == nil {
		t.Fatal("challenge validation")
	}
	if !VerifyS256(verifier, challenge) || VerifyS256(strings.Repeat("b", 43), challenge) || VerifyS256("short", S256Challenge("short")) {
		t.Fatal("verifier check")
	}
}

// TestSignedRequestsCannotBeAltered: the authorization request on its way
// through the dashboard fails on any change, addition or expiry.
func TestSignedRequestsCannotBeAltered(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Now()
	req := AuthorizationRequest{ClientID: "ocl_a", RedirectURI: "https://a.example/cb", Scopes: []string{"mcp:tools"},
		State: "s", CodeChallenge: S256Challenge(strings.Repeat("v", 43)), Resource: "https://mcp.example/mcp", ExpiresAt: now.Add(time.Minute)}
	query := signRequest(key, req)
	if got, err := verifyRequest(key, query, now); err != nil || got.ClientID != "ocl_a" {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for name, q := range map[string]string{
		"widened scope": strings.Replace(query, "scope=mcp%3Atools", "scope=mcp%3Atools+mcp%3Awrite", 1),
		"added field":   query + "&extra=1",
		"other key":     signRequest([]byte("another key of thirty-two bytes!"), req),
	} {
		if _, err := verifyRequest(key, q, now); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if _, err := verifyRequest(key, query, now.Add(2*time.Minute)); !errors.Is(err, ErrRequestExpired) {
		t.Fatalf("expired: %v", err)
	}
}

// TestMetadataDocuments: a client ID metadata document is accepted only
// when it names itself; the production fetcher refuses non-public
// addresses, so a client_id cannot make the server reach its own network.
func TestMetadataDocuments(t *testing.T) {
	t.Parallel()
	var body string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=60")
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	clientID := srv.URL + "/client.json"
	fetcher := NewMetadataFetcherWith(srv.Client())
	body = `{"client_id":"` + clientID + `","client_name":"Doc agent","redirect_uris":["http://127.0.0.1/cb"]}`
	c, lifetime, err := fetcher.Fetch(context.Background(), clientID)
	if err != nil || c.ID != clientID || !c.Public() || c.Name != "Doc agent" || lifetime != metadataMinCache {
		t.Fatalf("document: %+v %v %v", c, lifetime, err)
	}
	body = `{"client_id":"https://other.example/client.json","client_name":"Doc agent","redirect_uris":["http://127.0.0.1/cb"]}`
	if _, _, err := fetcher.Fetch(context.Background(), clientID); !errors.Is(err, ErrInvalidClient) {
		t.Fatalf("a document naming another client_id: %v", err)
	}
	body = `{"client_id":"` + clientID + `","client_name":"Doc agent","redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"client_secret_post"}`
	if _, _, err := fetcher.Fetch(context.Background(), clientID); !errors.Is(err, ErrInvalidClient) {
		t.Fatalf("a document with a shared secret: %v", err)
	}
	if _, _, err := NewMetadataFetcher().Fetch(context.Background(), clientID); !errors.Is(err, ErrInvalidClient) {
		t.Fatalf("the production fetcher reached a loopback address: %v", err)
	}
	for addr, public := range map[string]bool{"127.0.0.1:443": false, "169.254.169.254:80": false, "10.1.2.3:443": false,
		"[::1]:443": false, "[::ffff:192.168.0.1]:443": false, "100.64.0.1:443": false, "93.184.216.34:443": true} {
		if got := refuseNonPublic("tcp", addr, nil) == nil; got != public {
			t.Errorf("dialing %s allowed: %v", addr, got)
		}
	}
	for _, bad := range []string{"http://a.example/c.json", "https://a.example", "https://a.example/x/../c.json", "https://u:p@a.example/c"} {
		if ValidateMetadataDocumentURL(bad) == nil {
			t.Errorf("%s accepted as a client ID", bad)
		}
	}
}
