package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/cairnhq/cairn/api/platform/reqid"
)

// Codes of the errors the proxy answers itself.
const (
	codeNotFound             = "NOT_FOUND"
	codePathRefused          = "PATH_REFUSED"
	codeMethodNotAllowed     = "METHOD_NOT_ALLOWED"
	codeUnauthenticated      = "UNAUTHENTICATED"
	codeCrossOrigin          = "CROSS_ORIGIN_REQUEST_REFUSED"
	codeCSRFInvalid          = "CSRF_TOKEN_INVALID"
	codeUpstreamUnavailable  = "UPSTREAM_UNAVAILABLE"
	codeUpstreamRedirect     = "UPSTREAM_REDIRECT_REFUSED"
	maxUpstreamErrorBytes    = 64 << 10
	maxErrorCodeBytes        = 128
	noStore                  = "no-store"
	headerCacheControl       = "Cache-Control"
	headerRetryAfter         = "Retry-After"
	headerContentTypeOptions = "X-Content-Type-Options"
)

// errorEnvelope is the only error shape the browser sees: the API's bounded
// error object, whoever produced the error.
type errorEnvelope struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Status    int    `json:"status"`
	Code      string `json:"code"`
	RequestID string `json:"request_id"`
}

func errorJSON(status int, code, requestID string) []byte {
	b, _ := json.Marshal(errorEnvelope{Error: errorObject{Status: status, Code: code, RequestID: requestID}})
	return b
}

// writeError answers with the normalized envelope.
func writeError(w http.ResponseWriter, status int, code, requestID string) {
	body := errorJSON(status, code, requestID)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set(headerCacheControl, noStore)
	h.Set(headerContentTypeOptions, "nosniff")
	if requestID != "" {
		h.Set(reqid.Header, requestID)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// upstreamFailed answers when the API could not be reached or its answer
// was refused. The cause goes to the log only: it names internal hosts.
func (h *handler) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	code := codeUpstreamUnavailable
	if errors.Is(err, errRedirectRefused) {
		code = codeUpstreamRedirect
	}
	id := r.Header.Get(reqid.Header)
	if !reqid.Valid(id) {
		id = reqid.New()
	}
	level := slog.LevelWarn
	if errors.Is(err, context.Canceled) {
		// The browser went away; nothing is wrong upstream.
		level = slog.LevelDebug
	}
	h.logger.Log(r.Context(), level, "control-plane upstream failed",
		"request_id", id, "method", r.Method, "code", code, "error", err)
	writeError(w, http.StatusBadGateway, code, id)
}

var errRedirectRefused = errors.New("upstream redirect leaves the dashboard")

// modifyResponse applies the response rules to every upstream answer.
func (h *handler) modifyResponse(resp *http.Response) error {
	stripOriginBoundHeaders(resp.Header)
	switch {
	case resp.StatusCode >= 400:
		normalizeError(resp)
		return nil
	case resp.StatusCode >= 300:
		if err := h.rewriteLocation(resp); err != nil {
			return err
		}
	}
	if resp.Header.Get(headerCacheControl) == "" {
		// API answers are per-user; a shared cache must not keep one that
		// the API forgot to mark.
		resp.Header.Set(headerCacheControl, noStore)
	}
	return nil
}

// stripOriginBoundHeaders drops response headers whose meaning is tied to
// the origin that sent them. Served under the dashboard origin, an API
// cookie would land in the browser (and script), the API's CORS grants
// would open the dashboard origin to other sites, and Alt-Svc or
// Clear-Site-Data would redirect or wipe the dashboard itself.
func stripOriginBoundHeaders(h http.Header) {
	for name := range h {
		if strings.HasPrefix(name, "Access-Control-") {
			delete(h, name)
		}
	}
	h.Del("Set-Cookie")
	h.Del("Set-Cookie2")
	h.Del("Alt-Svc")
	h.Del("Clear-Site-Data")
}

// normalizeError replaces an upstream error with the bounded envelope,
// keeping what the browser needs to act on it: the status, the code, the
// request ID, when to retry and that it must not be cached. Messages and
// details are dropped; they are for the API's own clients, and an error
// rendered from them in the dashboard could echo attacker-chosen text.
func normalizeError(resp *http.Response) {
	var upstream errorEnvelope
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamErrorBytes))
	_ = resp.Body.Close()
	// A body that is not the API's envelope still yields a normalized error,
	// just without a code.
	_ = json.Unmarshal(raw, &upstream)

	code := upstream.Error.Code
	if !validErrorCode(code) {
		code = ""
	}
	requestID := resp.Header.Get(reqid.Header)
	if !reqid.Valid(requestID) {
		requestID = upstream.Error.RequestID
	}
	if !reqid.Valid(requestID) {
		requestID = ""
	}
	cacheControl := resp.Header.Get(headerCacheControl)
	if !hasNoStore(cacheControl) {
		cacheControl = noStore
	}
	retryAfter := resp.Header.Get(headerRetryAfter)

	body := errorJSON(resp.StatusCode, code, requestID)
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("Content-Length", strconv.Itoa(len(body)))
	header.Set(headerCacheControl, cacheControl)
	header.Set(headerContentTypeOptions, "nosniff")
	if requestID != "" {
		header.Set(reqid.Header, requestID)
	}
	if retryAfter != "" {
		header.Set(headerRetryAfter, retryAfter)
	}
	resp.Header = header
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	resp.ContentLength = int64(len(body))
	resp.TransferEncoding = nil
	resp.Trailer = nil
	resp.Uncompressed = false
}

func validErrorCode(code string) bool {
	if code == "" || len(code) > maxErrorCodeBytes {
		return false
	}
	for i := 0; i < len(code); i++ {
		if !pathByte(code[i]) || code[i] == '/' {
			return false
		}
	}
	return true
}

// hasNoStore reports whether a Cache-Control value forbids storing, in
// which case the upstream's exact policy (such as "private, no-store") is
// kept.
func hasNoStore(cacheControl string) bool {
	for directive := range strings.SplitSeq(cacheControl, ",") {
		if strings.EqualFold(strings.TrimSpace(directive), noStore) {
			return true
		}
	}
	return false
}

// rewriteLocation keeps a redirect from leading the browser off the
// dashboard. The proxy itself never follows redirects (ReverseProxy sends
// one request per browser request); this is about where the browser goes
// next. A Location on the API (absolute or relative, both resolve against
// the API URL) is rewritten to the same path under Prefix, so the browser's
// next request comes back through these checks with the dashboard session
// and never straight to the API. A Location on the dashboard origin passes
// unchanged; it is how the API hands the browser back to a page, as the
// code host's installation callback does. Anything else, including API
// paths outside /v1/, is refused with 502 rather than passed on: the
// dashboard origin must not become an open redirector.
func (h *handler) rewriteLocation(resp *http.Response) error {
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil
	}
	base := h.api
	if resp.Request != nil && resp.Request.URL != nil {
		base = resp.Request.URL
	}
	target, err := base.Parse(loc)
	if err != nil {
		return errRedirectRefused
	}
	switch originOf(target) {
	case h.origin:
		return nil
	case h.apiOrigin:
		apiPath, ok := strings.CutPrefix(target.EscapedPath(), h.apiBase)
		if !ok || !strings.HasPrefix(apiPath, "/v1/") {
			return errRedirectRefused
		}
		rewritten := Prefix + apiPath
		if target.RawQuery != "" {
			rewritten += "?" + target.RawQuery
		}
		if target.Fragment != "" {
			rewritten += "#" + target.EscapedFragment()
		}
		resp.Header.Set("Location", rewritten)
		return nil
	}
	return errRedirectRefused
}
