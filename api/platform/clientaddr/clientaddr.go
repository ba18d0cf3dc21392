package clientaddr

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Resolve returns the client's address. peer is the TCP peer; forwardedFor
// and forwarded are the values of every X-Forwarded-For and Forwarded
// header line. Headers count only when peer is in trusted. X-Forwarded-For
// wins when both are present: it is what nearly every proxy appends, so a
// Forwarded header a client adds behind such a proxy is never believed.
func Resolve(peer netip.Addr, forwardedFor, forwarded []string, trusted []netip.Prefix) netip.Addr {
	peer = peer.Unmap()
	if !contains(trusted, peer) {
		return peer
	}
	hops := splitForwardedFor(forwardedFor)
	if len(hops) == 0 {
		hops = splitForwarded(forwarded)
	}
	// Each trusted hop appended the address it saw, so the chain is reliable
	// from the right up to the first address that is not a trusted proxy:
	// that one is the client, and anything left of it is the client's word.
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		addr, ok := parseHop(hops[i])
		if !ok {
			// An unreadable hop ends the chain at the last trusted proxy,
			// which then stands for the client: throttling is shared rather
			// than escaped.
			return client
		}
		client = addr
		if !contains(trusted, addr) {
			return addr
		}
	}
	return client
}

// FromRequest is Resolve for a net/http request.
func FromRequest(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return Resolve(peer.Addr(), r.Header.Values("X-Forwarded-For"), r.Header.Values("Forwarded"), trusted)
}

func contains(prefixes []netip.Prefix, addr netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

func splitForwardedFor(lines []string) []string {
	var hops []string
	for _, line := range lines {
		for _, hop := range strings.Split(line, ",") {
			if hop = strings.TrimSpace(hop); hop != "" {
				hops = append(hops, hop)
			}
		}
	}
	return hops
}

// splitForwarded returns the for= parameter of each element of RFC 7239
// Forwarded headers; an element without one is an unreadable hop.
func splitForwarded(lines []string) []string {
	var hops []string
	for _, line := range lines {
		for _, element := range strings.Split(line, ",") {
			if strings.TrimSpace(element) == "" {
				continue
			}
			hop := "unknown"
			for _, pair := range strings.Split(element, ";") {
				name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(name, "for") {
					hop = strings.Trim(value, `"`)
				}
			}
			hops = append(hops, hop)
		}
	}
	return hops
}

// parseHop reads an address with or without a port, IPv6 possibly in
// brackets. Obfuscated identifiers and "unknown" are not addresses.
func parseHop(hop string) (netip.Addr, bool) {
	if addr, err := netip.ParseAddr(strings.Trim(hop, "[]")); err == nil {
		return addr.Unmap(), true
	}
	if host, _, err := net.SplitHostPort(hop); err == nil {
		if addr, err := netip.ParseAddr(host); err == nil {
			return addr.Unmap(), true
		}
	}
	return netip.Addr{}, false
}
