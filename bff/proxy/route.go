package proxy

import "strings"

//go:generate go run ./internal/routegen

// route is one method and path pattern of the API contract. A {param}
// segment stands for exactly one path segment.
type route struct {
	method  string
	pattern string
}

// Path limits. Parameters in the contract are opaque IDs, so nothing the
// dashboard legitimately calls comes near them.
const (
	maxPathBytes    = 2048
	maxSegmentBytes = 128
)

// routeTable matches request paths against the allowlist.
type routeTable []compiledRoute

type compiledRoute struct {
	method string
	// segments holds literal segments, with "" standing for a parameter.
	segments []string
}

func compileRoutes(rs []route) routeTable {
	table := make(routeTable, 0, len(rs))
	for _, r := range rs {
		segs := strings.Split(strings.TrimPrefix(r.pattern, "/"), "/")
		for i, s := range segs {
			if strings.HasPrefix(s, "{") {
				segs[i] = ""
			}
		}
		table = append(table, compiledRoute{method: r.method, segments: segs})
	}
	return table
}

// allows reports whether method and the already-validated path segments
// match an allowlisted route.
func (t routeTable) allows(method string, segments []string) bool {
	for _, r := range t {
		if r.method == method && r.matches(segments) {
			return true
		}
	}
	return false
}

// methodsFor lists the methods allowlisted for a path, for Allow headers.
func (t routeTable) methodsFor(segments []string) []string {
	var ms []string
	for _, r := range t {
		if r.matches(segments) {
			ms = append(ms, r.method)
		}
	}
	return ms
}

func (r compiledRoute) matches(segments []string) bool {
	if len(segments) != len(r.segments) {
		return false
	}
	for i, want := range r.segments {
		got := segments[i]
		if want == "" {
			if got == "" || len(got) > maxSegmentBytes {
				return false
			}
			continue
		}
		if got != want {
			return false
		}
	}
	return true
}

// splitAPIPath validates the escaped request path and returns the API path
// (the part after Prefix) and its segments. found is false when the path is
// not under Prefix at all; ok is false when it is but is malformed.
//
// The check runs on the escaped form so that an encoded slash or dot cannot
// hide from it, and it admits only the characters contract paths and IDs
// use, so no percent-encoding is ever legitimate. That also means the path
// forwarded upstream is exactly the path checked here.
func splitAPIPath(escaped string) (apiPath string, segments []string, found, ok bool) {
	if !strings.HasPrefix(escaped, Prefix+"/") {
		return "", nil, false, false
	}
	apiPath = escaped[len(Prefix):]
	if len(apiPath) > maxPathBytes || strings.Contains(apiPath, "//") || strings.Contains(apiPath, "..") {
		return "", nil, true, false
	}
	for i := 0; i < len(apiPath); i++ {
		if !pathByte(apiPath[i]) {
			return "", nil, true, false
		}
	}
	segments = strings.Split(apiPath[1:], "/")
	for _, s := range segments {
		if s == "." {
			return "", nil, true, false
		}
	}
	return apiPath, segments, true, true
}

func pathByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c == '_' || c == '.' || c == '-' || c == '/'
}
