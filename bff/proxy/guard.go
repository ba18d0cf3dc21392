package proxy

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// maxFormBytes bounds the form body read to find a csrf_token field. The
// proxy otherwise streams bodies untouched; only a small form is worth
// buffering, and a large one must carry the token in X-CSRF-Token.
const maxFormBytes = 4 << 10

const (
	csrfHeader    = "X-CSRF-Token"
	csrfFormField = "csrf_token"
	formMediaType = "application/x-www-form-urlencoded"
)

// parseOrigin validates a configured origin and returns it in the form
// browsers send in the Origin header, so comparison can be exact.
func parseOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("parsing %q: %w", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("%q is not a scheme://host[:port] origin", s)
	}
	return originOf(u), nil
}

// originOf serializes u's origin as browsers do: lower case, default port
// omitted.
func originOf(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" {
		return scheme + "://" + net.JoinHostPort(host, port)
	}
	if strings.Contains(host, ":") {
		return scheme + "://[" + host + "]"
	}
	return scheme + "://" + host
}

// sameOrigin reports whether an unsafe request provably comes from the
// dashboard's own pages. The session cookie is SameSite=Lax, which still
// rides along on some cross-site requests, so the browser's own account of
// where a request came from is checked as well.
func (h *handler) sameOrigin(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	if site == "cross-site" || site == "same-site" {
		// same-site is refused too: a sibling subdomain is a different
		// application and may not act with the dashboard's session.
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		return origin == h.origin
	}
	// Browsers omit Origin on some same-origin requests; Fetch Metadata
	// still vouches for them. No header at all is not same-origin.
	return site == "same-origin"
}

// checkCSRF reports whether an unsafe request carries the session's CSRF
// token, in X-CSRF-Token or, for a small urlencoded form, in its csrf_token
// field. When it reads the form it puts the body back for the upstream.
func checkCSRF(r *http.Request, want string) (bool, error) {
	if want == "" {
		return false, nil
	}
	if got := r.Header.Get(csrfHeader); got != "" {
		return tokensEqual(got, want), nil
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != formMediaType || r.ContentLength > maxFormBytes || r.Body == nil {
		return false, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxFormBytes+1))
	if err != nil {
		return false, fmt.Errorf("reading form: %w", err)
	}
	if len(body) > maxFormBytes {
		return false, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return false, nil
	}
	got := form.Get(csrfFormField)
	if got == "" || !tokensEqual(got, want) {
		return false, nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	return true, nil
}

func tokensEqual(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
