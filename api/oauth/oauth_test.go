package oauth

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// TestMetadataFetchDialsOnlyPublicAddresses: the dial check refuses every
// special-purpose range, each just inside its bounds, and allows the public
// address just outside where the range has a public neighbour; IPv4-mapped
// IPv6 addresses are judged as the IPv4 address they map.
func TestMetadataFetchDialsOnlyPublicAddresses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr   string
		public bool
	}{
		{"93.184.216.34", true},
		{"[2606:2800:220:1:248:1893:25c8:1946]", true},
		{"127.0.0.1", false},
		{"[::1]", false},
		{"10.1.2.3", false},
		{"192.168.0.1", false},
		{"[::ffff:192.168.0.1]", false},
		{"169.254.169.254", false},
		{"[fe80::1]", false},
		{"[fd00::1]", false},
		{"224.0.0.1", false},
		{"[::]", false},
		// 0.0.0.0/8: "this network".
		{"0.0.0.0", false}, {"0.255.255.255", false}, {"1.0.0.0", true},
		// 100.64.0.0/10: shared carrier space.
		{"100.64.0.1", false}, {"100.127.255.255", false}, {"100.63.255.255", true}, {"100.128.0.0", true},
		// 192.0.0.0/24: IETF protocol assignments.
		{"192.0.0.1", false}, {"192.0.0.255", false}, {"[::ffff:192.0.0.8]", false}, {"191.255.255.255", true}, {"192.0.1.0", true},
		// 198.18.0.0/15: benchmarking.
		{"198.18.0.1", false}, {"198.19.255.255", false}, {"198.17.255.255", true}, {"198.20.0.0", true},
		// 240.0.0.0/4: reserved, with the limited broadcast address.
		{"240.0.0.1", false}, {"255.255.255.255", false}, {"[::ffff:250.1.2.3]", false}, {"239.255.255.255", false}, {"223.255.255.255", true},
		// NAT64: the well-known prefix (here mapping 127.0.0.1 and a
		// public address alike) and the local-use prefix.
		{"[64:ff9b::7f00:1]", false}, {"[64:ff9b::5db8:d822]", false}, {"[64:ff9b::ffff:ffff]", false},
		{"[64:ff9b:0:0:0:1::]", true},
		{"[64:ff9b:1::a00:1]", false}, {"[64:ff9b:1:ffff:ffff:ffff:ffff:ffff]", false}, {"[64:ff9b:2::1]", true},
		// 6to4 and Teredo tunnels.
		{"[2002:7f00:1::1]", false}, {"[2002:ffff::1]", false}, {"[2003::1]", true},
		{"[2001::1]", false}, {"[2001:0:ffff::1]", false}, {"[2001:1::1]", true},
	} {
		addr := tc.addr + ":443"
		if got := refuseNonPublic("tcp", addr, nil) == nil; got != tc.public {
			t.Errorf("dialing %s allowed %v, want %v", addr, got, tc.public)
		}
	}
}

// TestMetadataFetchChecksTheDialedAddress: the production fetcher checks
// the address it connects to, not the URL's host, so a name resolving to a
// refused address never gets a request; a redirect is never followed.
func TestMetadataFetchChecksTheDialedAddress(t *testing.T) {
	t.Parallel()
	var conns, hits atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/moved.json" {
			http.Redirect(w, r, "/client.json", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"client_id":"https://` + r.Host + r.URL.Path + `","client_name":"Doc agent","redirect_uris":["http://127.0.0.1/cb"]}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	// "localhost" passes every URL check; only the dial sees 127.0.0.1,
	// and it never connects.
	byName := "https://localhost:" + port + "/client.json"
	if _, _, err := NewMetadataFetcher().Fetch(context.Background(), byName); !errors.Is(err, ErrInvalidClient) {
		t.Fatalf("fetching through a name that resolves to loopback: %v", err)
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("the refused address got %d connections", n)
	}
	// A fetcher allowed to reach the test server still stops at a redirect.
	moved := srv.URL + "/moved.json"
	if _, _, err := NewMetadataFetcherWith(srv.Client()).Fetch(context.Background(), moved); !errors.Is(err, ErrInvalidClient) {
		t.Fatalf("a redirected document: %v", err)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("%d requests, want only the redirecting one", n)
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
	for _, bad := range []string{"http://a.example/c.json", "https://a.example", "https://a.example/x/../c.json", "https://u:p@a.example/c"} {
		if ValidateMetadataDocumentURL(bad) == nil {
			t.Errorf("%s accepted as a client ID", bad)
		}
	}
}
