package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/cairnhq/cairn/api/platform/reqid"
)

// Prefix is the dashboard path under which the API is reachable.
const Prefix = "/api/control-plane"

// sessionCookie is the API's session cookie; it is the only credential the
// proxy ever sends upstream.
const sessionCookie = "__Secure-identity.session_token"

// Sessions yields the credentials of the dashboard session a request
// belongs to: the API session token to present upstream and the session's
// CSRF token. ok is false when the request has no signed-in session.
type Sessions interface {
	Credentials(r *http.Request) (apiToken string, csrfToken string, ok bool)
}

// forwardedHeaders are the only request headers that reach the API. The
// browser's cookies carry the dashboard session, not an API credential, and
// an Authorization header from script would let it choose its own
// principal, so both are dropped with everything else not listed.
var forwardedHeaders = []string{
	"Content-Type",
	"Accept",
	"Idempotency-Key",
	"If-Match",
}

type handler struct {
	api       *url.URL
	apiOrigin string
	// apiBase is the API URL's path without its trailing slash; API paths
	// are appended to it.
	apiBase  string
	origin   string
	sessions Sessions
	routes   routeTable
	logger   *slog.Logger
	reverse  *httputil.ReverseProxy
}

// New returns the handler for Prefix/... . apiURL is the API's base URL as
// the dashboard reaches it; transport carries the upstream requests (nil
// means http.DefaultTransport); dashboardOrigin is the dashboard's own
// scheme://host[:port], the only origin unsafe requests may come from.
// Mount the handler on Prefix+"/" without stripping the prefix, behind the
// middleware that loads the session Sessions reads.
func New(apiURL *url.URL, transport http.RoundTripper, sessions Sessions, dashboardOrigin string, logger *slog.Logger) (http.Handler, error) {
	if apiURL == nil || (apiURL.Scheme != "http" && apiURL.Scheme != "https") || apiURL.Host == "" ||
		apiURL.User != nil || apiURL.RawQuery != "" || apiURL.Fragment != "" || apiURL.Opaque != "" {
		return nil, errors.New("proxy: apiURL must be an absolute http or https URL without credentials, query or fragment")
	}
	if sessions == nil {
		return nil, errors.New("proxy: sessions is required")
	}
	origin, err := parseOrigin(dashboardOrigin)
	if err != nil {
		return nil, fmt.Errorf("proxy: dashboardOrigin: %w", err)
	}
	if transport == nil {
		transport = http.DefaultTransport
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{
		api:       apiURL,
		apiOrigin: originOf(apiURL),
		apiBase:   strings.TrimSuffix(apiURL.EscapedPath(), "/"),
		origin:    origin,
		sessions:  sessions,
		routes:    compileRoutes(routes),
		logger:    logger,
	}
	h.reverse = &httputil.ReverseProxy{
		Rewrite:   h.rewrite,
		Transport: transport,
		// Flush every write: log tails and plan downloads should reach the
		// browser as they arrive, and nothing is held back in a buffer.
		FlushInterval:  -1,
		ModifyResponse: h.modifyResponse,
		ErrorHandler:   h.upstreamFailed,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return h, nil
}

// forward is what ServeHTTP decided and rewrite applies.
type forward struct {
	apiPath  string
	apiToken string
}

type forwardKey struct{}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	requestID := r.Header.Get(reqid.Header)
	if !reqid.Valid(requestID) {
		requestID = ""
	}
	refuse := func(status int, code string) {
		id := requestID
		if id == "" {
			// Errors the proxy answers itself still get an ID, so a user's
			// report can be found in the dashboard's logs.
			id = reqid.New()
		}
		h.logger.InfoContext(r.Context(), "control-plane request refused",
			"request_id", id, "method", r.Method, "status", status, "code", code)
		writeError(w, status, code, id)
	}

	escaped := r.URL.RawPath
	if escaped == "" {
		escaped = r.URL.Path
	}
	apiPath, segments, found, ok := splitAPIPath(escaped)
	switch {
	case !found || r.URL.Opaque != "":
		refuse(http.StatusNotFound, codeNotFound)
		return
	case !ok:
		refuse(http.StatusBadRequest, codePathRefused)
		return
	}
	if r.Method == http.MethodOptions {
		// Same-origin script never needs a preflight, and answering one
		// would only advertise the API to other origins.
		w.Header().Set("Allow", strings.Join(h.routes.methodsFor(segments), ", "))
		refuse(http.StatusMethodNotAllowed, codeMethodNotAllowed)
		return
	}
	if !h.routes.allows(r.Method, segments) {
		refuse(http.StatusNotFound, codeNotFound)
		return
	}
	unsafe := r.Method != http.MethodGet && r.Method != http.MethodHead
	if unsafe && !h.sameOrigin(r) {
		refuse(http.StatusForbidden, codeCrossOrigin)
		return
	}
	apiToken, csrfToken, ok := h.sessions.Credentials(r)
	if !ok || !validCookieValue(apiToken) {
		refuse(http.StatusUnauthorized, codeUnauthenticated)
		return
	}
	if unsafe {
		ok, err := checkCSRF(r, csrfToken)
		if err != nil {
			h.logger.InfoContext(r.Context(), "reading form body for CSRF token", "request_id", requestID, "error", err)
		}
		if !ok {
			refuse(http.StatusForbidden, codeCSRFInvalid)
			return
		}
	}

	ctx := context.WithValue(r.Context(), forwardKey{}, forward{apiPath: apiPath, apiToken: apiToken})
	h.reverse.ServeHTTP(w, r.WithContext(ctx))
}

// rewrite builds the upstream request from scratch rather than filtering
// the browser's: whatever a browser adds in future stays on this side.
func (h *handler) rewrite(pr *httputil.ProxyRequest) {
	fw, _ := pr.In.Context().Value(forwardKey{}).(forward)

	out := pr.Out
	out.URL.Scheme = h.api.Scheme
	out.URL.Host = h.api.Host
	out.URL.Path = h.apiBase + fw.apiPath
	out.URL.RawPath = ""
	out.URL.RawQuery = pr.In.URL.RawQuery
	out.URL.Fragment = ""
	out.Host = ""

	header := make(http.Header, len(forwardedHeaders)+2)
	for _, name := range forwardedHeaders {
		if v := pr.In.Header.Values(name); len(v) > 0 {
			header[name] = v
		}
	}
	if id := pr.In.Header.Get(reqid.Header); reqid.Valid(id) {
		header.Set(reqid.Header, id)
	}
	header.Set("Cookie", sessionCookie+"="+fw.apiToken)
	out.Header = header
}

// validCookieValue reports whether token can be sent as a cookie value
// verbatim (RFC 6265 cookie-octets). A token that cannot is refused rather
// than quoted or trimmed into a different credential.
func validCookieValue(token string) bool {
	if token == "" || len(token) > 4096 {
		return false
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if c <= 0x20 || c >= 0x7f || c == '"' || c == ',' || c == ';' || c == '\\' {
			return false
		}
	}
	return true
}
