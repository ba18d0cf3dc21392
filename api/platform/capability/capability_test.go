package capability_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/platform/capability"
	"github.com/cairnhq/cairn/api/platform/config"
)

const secret = config.Secret("capability-test-secret-0123456789abcdef0123")

func TestSignerGrantsExactlyWhatItSigned(t *testing.T) {
	t.Parallel()
	s := capability.NewSigner(secret)
	now := time.Unix(1_800_000_000, 0)
	q, err := url.ParseQuery(s.QueryUntil(http.MethodGet, "/a?evaluation=1", now.Add(1500*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	expires, sig := q.Get("expires"), q.Get("signature")
	if expires != "1800000002" {
		t.Fatalf("expires %s: a deadline is rounded up to the second", expires)
	}
	if !s.Valid(http.MethodGet, "/a?evaluation=1", expires, sig, now) || !s.Valid(http.MethodGet, "/a?evaluation=1", expires, sig, now.Add(2*time.Second)) {
		t.Fatal("the signed grant is refused before its deadline")
	}
	for name, ok := range map[string]bool{
		"after the deadline": s.Valid(http.MethodGet, "/a?evaluation=1", expires, sig, now.Add(3*time.Second)),
		"another method":     s.Valid(http.MethodPut, "/a?evaluation=1", expires, sig, now),
		"another resource":   s.Valid(http.MethodGet, "/a?evaluation=2", expires, sig, now),
		"another expiry":     s.Valid(http.MethodGet, "/a?evaluation=1", "1800000009", sig, now),
		"bad expiry":         s.Valid(http.MethodGet, "/a?evaluation=1", "soon", sig, now),
		"another key":        capability.NewSigner(secret+"x").Valid(http.MethodGet, "/a?evaluation=1", expires, sig, now),
		"no key":             capability.NewSigner("short").Valid(http.MethodGet, "/a?evaluation=1", expires, capability.NewSigner("short").Sign(http.MethodGet, "/a?evaluation=1", 1800000002), now),
	} {
		if ok {
			t.Errorf("%s: accepted", name)
		}
	}
}
