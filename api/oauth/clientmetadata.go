package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Client ID metadata documents are fetched from wherever a client_id URL
// points, on behalf of an unauthenticated request: the fetch must not
// become a way to reach this network. These bounds keep it small.
const (
	metadataMaxBytes = 16 << 10
	metadataTimeout  = 5 * time.Second
	metadataMinCache = 5 * time.Minute
	metadataMaxCache = 24 * time.Hour
	metadataDefault  = time.Hour
)

// MetadataFetcher fetches client ID metadata documents.
type MetadataFetcher struct {
	client *http.Client
}

// NewMetadataFetcher returns a fetcher that connects only to public
// addresses (checked on the address actually dialed, so DNS rebinding
// gains nothing), never follows redirects and reads at most 16 KiB.
func NewMetadataFetcher() *MetadataFetcher {
	dialer := &net.Dialer{Timeout: metadataTimeout, Control: refuseNonPublic}
	transport := &http.Transport{
		DialContext:            dialer.DialContext,
		TLSHandshakeTimeout:    metadataTimeout,
		ResponseHeaderTimeout:  metadataTimeout,
		MaxResponseHeaderBytes: 16 << 10,
		DisableKeepAlives:      true,
		// A proxy would dial for us, past the address check.
		Proxy: nil,
	}
	return NewMetadataFetcherWith(&http.Client{Transport: transport})
}

// NewMetadataFetcherWith uses the given client's transport (tests serve
// documents from loopback with their own certificate authority); the
// fetcher still refuses redirects and bounds time and size.
func NewMetadataFetcherWith(c *http.Client) *MetadataFetcher {
	client := *c
	client.Timeout = metadataTimeout
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &MetadataFetcher{client: &client}
}

// refuseNonPublic refuses to connect to anything but a public unicast
// address (see publicAddress). It runs on every address actually dialed,
// after name resolution, so a name that resolves (or rebinds) to a
// refused address gains nothing.
func refuseNonPublic(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return err
	}
	if !publicAddress(ip) {
		return fmt.Errorf("refusing to fetch client metadata from non-public address %s", ip)
	}
	return nil
}

// nonPublicRanges are special-purpose ranges the standard library's
// predicates do not name: IPv4 "this network", shared carrier space, IETF
// protocol assignments, benchmarking and the reserved class E block with
// broadcast; and the IPv6 translation and tunnelling prefixes (NAT64's
// well-known and local-use prefixes, 6to4, Teredo), whose addresses carry
// an IPv4 address a gateway would connect to on our behalf.
var nonPublicRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("2001::/32"),
}

// publicAddress reports whether ip is a public unicast address: not
// loopback, private, link-local (cloud metadata services), multicast,
// unspecified, nor in nonPublicRanges. An IPv4-mapped IPv6 address is
// judged as the IPv4 address it maps.
func publicAddress(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsMulticast() || ip.IsUnspecified() || ip.IsInterfaceLocalMulticast() {
		return false
	}
	for _, r := range nonPublicRanges {
		if r.Contains(ip) {
			return false
		}
	}
	return true
}

// errMetadataUnavailable is any failure to get a usable document.
var errMetadataUnavailable = describe(ErrInvalidClient, "the client ID metadata document could not be fetched")

// Fetch reads and validates the document at clientID, returning the
// client it describes and how long it may be cached.
func (f *MetadataFetcher) Fetch(ctx context.Context, clientID string) (Client, time.Duration, error) {
	if err := ValidateMetadataDocumentURL(clientID); err != nil {
		return Client{}, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, metadataTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientID, nil)
	if err != nil {
		return Client{}, 0, errMetadataUnavailable
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return Client{}, 0, errMetadataUnavailable
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Client{}, 0, errMetadataUnavailable
	}
	if media, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil ||
		(media != "application/json" && !strings.HasSuffix(media, "+json")) {
		return Client{}, 0, errMetadataUnavailable
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, metadataMaxBytes+1))
	if err != nil || len(body) > metadataMaxBytes {
		return Client{}, 0, errMetadataUnavailable
	}
	var m Metadata
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil || dec.More() {
		return Client{}, 0, describe(ErrInvalidClient, "the client ID metadata document is not a JSON object")
	}
	if m.ClientID != clientID {
		return Client{}, 0, describe(ErrInvalidClient, "the client ID metadata document names another client_id")
	}
	if strings.TrimSpace(m.ClientName) == "" {
		return Client{}, 0, describe(ErrInvalidClient, "the client ID metadata document has no client_name")
	}
	c, err := validateMetadata(m, ClientMetadataDocument)
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			return Client{}, 0, describe(ErrInvalidClient, pe.Description)
		}
		return Client{}, 0, err
	}
	c.ID = clientID
	return c, cacheLifetime(resp.Header.Get("Cache-Control")), nil
}

// cacheLifetime follows the document's max-age within bounds: no-store or
// no-cache still get the minimum (a consent screen and the code exchange
// right after it must see the same client).
func cacheLifetime(cacheControl string) time.Duration {
	for _, directive := range strings.Split(cacheControl, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(strings.ToLower(directive)), "=")
		switch name {
		case "no-store", "no-cache":
			return metadataMinCache
		case "max-age":
			if seconds, err := strconv.Atoi(value); err == nil {
				return min(max(time.Duration(seconds)*time.Second, metadataMinCache), metadataMaxCache)
			}
		}
	}
	return metadataDefault
}
