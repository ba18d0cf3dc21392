package clientaddr_test

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/platform/clientaddr"
)

func TestResolveBelievesHeadersOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:1::/48")}
	for _, tc := range []struct {
		name     string
		peer     string
		xff, fwd []string
		trusted  []netip.Prefix
		want     string
	}{
		{name: "no proxies configured: the peer, whatever it claims", peer: "10.1.1.1", xff: []string{"203.0.113.9"}, want: "10.1.1.1"},
		{name: "untrusted peer cannot choose its address", peer: "198.51.100.7", xff: []string{"203.0.113.9"}, trusted: trusted, want: "198.51.100.7"},
		{name: "trusted proxy without header", peer: "10.1.1.1", trusted: trusted, want: "10.1.1.1"},
		{name: "trusted proxy names the client", peer: "10.1.1.1", xff: []string{"203.0.113.9"}, trusted: trusted, want: "203.0.113.9"},
		{name: "a client's own prefix is ignored", peer: "10.1.1.1", xff: []string{"1.2.3.4, 203.0.113.9"}, trusted: trusted, want: "203.0.113.9"},
		{name: "chained trusted proxies are skipped", peer: "10.1.1.1", xff: []string{"1.2.3.4", "203.0.113.9, 10.2.2.2"}, trusted: trusted, want: "203.0.113.9"},
		{name: "all hops trusted: the leftmost", peer: "10.1.1.1", xff: []string{"10.3.3.3, 10.2.2.2"}, trusted: trusted, want: "10.3.3.3"},
		{name: "unreadable hop stops at the last trusted proxy", peer: "10.1.1.1", xff: []string{"1.2.3.4, garbage, 10.2.2.2"}, trusted: trusted, want: "10.2.2.2"},
		{name: "ports and brackets", peer: "10.1.1.1", xff: []string{"[2001:db8:2::5]:443"}, trusted: trusted, want: "2001:db8:2::5"},
		{name: "mapped IPv4 peer", peer: "::ffff:10.1.1.1", xff: []string{"::ffff:203.0.113.9"}, trusted: trusted, want: "203.0.113.9"},
		{name: "Forwarded when no X-Forwarded-For", peer: "2001:db8:1::1", fwd: []string{`for=1.2.3.4, for="[2001:db8:9::1]:4711";proto=https`}, trusted: trusted, want: "2001:db8:9::1"},
		{name: "X-Forwarded-For wins over a client's Forwarded", peer: "10.1.1.1", xff: []string{"203.0.113.9"}, fwd: []string{"for=1.2.3.4"}, trusted: trusted, want: "203.0.113.9"},
		{name: "obfuscated Forwarded identifier", peer: "10.1.1.1", fwd: []string{"for=_hidden, for=10.2.2.2"}, trusted: trusted, want: "10.2.2.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clientaddr.Resolve(netip.MustParseAddr(tc.peer), tc.xff, tc.fwd, tc.trusted)
			if got != netip.MustParseAddr(tc.want) {
				t.Fatalf("Resolve = %v, want %s", got, tc.want)
			}
		})
	}
}

func TestFromRequestReadsEveryHeaderLine(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "127.0.0.1:5555"
	r.Header.Add("X-Forwarded-For", "198.51.100.1")
	r.Header.Add("X-Forwarded-For", "203.0.113.9")
	if got := clientaddr.FromRequest(r, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}); got.String() != "203.0.113.9" {
		t.Fatalf("FromRequest = %v", got)
	}
	if got := clientaddr.FromRequest(r, nil); got.String() != "127.0.0.1" {
		t.Fatalf("FromRequest without trusted proxies = %v", got)
	}
}

func TestVouchedAddressNeedsTheKeyAndIsShortLived(t *testing.T) {
	t.Parallel()
	key, other := []byte("0123456789abcdef0123456789abcdef"), []byte("another key, another installation")
	now := time.Unix(1_800_000_000, 0)
	addr := netip.MustParseAddr("2001:db8::7")
	value := clientaddr.Vouch(key, addr, now)
	if got, ok := clientaddr.Vouched(key, value, now.Add(30*time.Second)); !ok || got != addr {
		t.Fatalf("Vouched = %v %v", got, ok)
	}
	if got, ok := clientaddr.Vouched(key, clientaddr.Vouch(key, netip.MustParseAddr("::ffff:192.0.2.1"), now), now); !ok || got.String() != "192.0.2.1" {
		t.Fatalf("mapped address vouched as %v %v", got, ok)
	}
	forged := strings.Replace(value, "2001:db8::7", "2001:db8::8", 1)
	for name, tc := range map[string]struct {
		key   []byte
		value string
		now   time.Time
	}{
		"another key":        {other, value, now},
		"no key":             {nil, value, now},
		"another address":    {key, forged, now},
		"too old":            {key, value, now.Add(2 * time.Minute)},
		"from the future":    {key, value, now.Add(-2 * time.Minute)},
		"a bare address":     {key, "203.0.113.9", now},
		"empty":              {key, "", now},
		"signature stripped": {key, value[:strings.LastIndexByte(value, ';')+1], now},
	} {
		if got, ok := clientaddr.Vouched(tc.key, tc.value, tc.now); ok {
			t.Errorf("%s: vouched for %v", name, got)
		}
	}
}
