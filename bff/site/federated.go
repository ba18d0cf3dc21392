package site

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/cairnhq/cairn/api/platform/clientaddr"
	"github.com/cairnhq/cairn/bff/apiclient"
	"github.com/cairnhq/cairn/bff/session"
)

// signInCompletePath is where the API sends the browser back with a
// one-time sign-in code (or an error) after an identity provider.
const signInCompletePath = "/sign-in/complete"

// redirectAnswer is the API's answer to starting a federated flow: where
// the browser goes next (the identity provider).
type redirectAnswer struct {
	URL string `json:"url"`
}

// signInWithProvider starts a sign-in through the instance's identity
// provider ("Continue with …").
func (s *Site) signInWithProvider(w http.ResponseWriter, r *http.Request) {
	s.startFederatedSignIn(w, r, "/api/auth/sign-in/social", map[string]any{"provider": r.PostFormValue("provider")}, "")
}

// signInWithSSO starts a sign-in through an organization's SSO, found by
// a work e-mail's domain or the organization's short name.
func (s *Site) signInWithSSO(w http.ResponseWriter, r *http.Request) {
	identifier := strings.TrimSpace(r.PostFormValue("identifier"))
	body := map[string]any{"organizationSlug": strings.ToLower(identifier)}
	if strings.Contains(identifier, "@") {
		body = map[string]any{"email": identifier}
	}
	s.startFederatedSignIn(w, r, "/api/auth/sign-in/sso", body, identifier)
}

// restartSSO is where the API sends a browser that arrived with an
// unsolicited (IdP-initiated) SAML response: a fresh SP-initiated sign-in
// through that provider, bound to this browser like any other. It changes
// nothing but this browser's pending flow, so it needs no form token.
func (s *Site) restartSSO(w http.ResponseWriter, r *http.Request) {
	providerID := r.URL.Query().Get("providerId")
	if !errorCodePattern.MatchString(providerID) {
		http.Redirect(w, r, "/sign-in", http.StatusSeeOther)
		return
	}
	s.startFederatedSignIn(w, r, "/api/auth/sign-in/sso", map[string]any{"providerId": providerID}, "")
}

// startFederatedSignIn binds a new flow to this browser's session, asks
// the API for the identity provider's URL and sends the browser there.
// The API returns to signInCompletePath; where sign-in continues after
// that (the consent screen, say) waits in the session, not in the URL.
func (s *Site) startFederatedSignIn(w http.ResponseWriter, r *http.Request, path string, body map[string]any, identifier string) {
	binding := s.sessions.BeginFlow(r.Context(), session.FlowSignIn, pendingNext(r.PostFormValue("next")))
	body["callbackURL"], body["clientBinding"] = s.opts.Origin+signInCompletePath, binding
	var out redirectAnswer
	err := s.api.CallFor(r.Context(), clientaddr.FromRequest(r, s.opts.TrustedProxies), "", http.MethodPost, path, body, &out)
	if err == nil && !outbound(out.URL) {
		err = &apiclient.Error{Status: http.StatusBadGateway, Code: "UPSTREAM_RESPONSE_INVALID"}
	}
	if err != nil {
		_, _, _ = s.sessions.EndFlow(r.Context(), session.FlowSignIn)
		page, title := "sign-in.html", "Sign in"
		if r.PostFormValue("from") == "sign-up" {
			page, title = "sign-up.html", "Create an account"
		}
		s.renderSignIn(w, r, refusedStatus(err), page, title, signInPage{Error: federatedStartRefusal(err, identifier != ""),
			Next: r.PostFormValue("next"), SSOIdentifier: identifier})
		return
	}
	s.leaveFor(w, r, "Signing in", out.URL)
}

// leaveFor sends the browser to an identity provider from a form post.
// The dashboard's Content-Security-Policy keeps forms to its own origin
// (form-action 'self'), which browsers apply to a form's redirects too, so
// the post answers a page that moves on by itself instead of a redirect.
func (s *Site) leaveFor(w http.ResponseWriter, r *http.Request, title, target string) {
	f := s.frame(r, title)
	f.Page = struct{ URL string }{target}
	s.render(w, r, http.StatusOK, "leaving.html", f)
}

// outbound reports whether an identity provider URL the API answered is
// one a browser may be sent to: absolute http or https.
func outbound(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

func federatedStartRefusal(err error, sso bool) string {
	switch apiclient.StatusOf(err) {
	case http.StatusNotFound:
		if sso {
			return "No organization signs in with SSO for that e-mail domain or short name."
		}
		return "That identity provider is not configured here."
	case http.StatusBadRequest:
		if sso {
			return "Enter your work e-mail address or your organization's short name."
		}
	case http.StatusTooManyRequests:
		return "Too many attempts. Wait a minute and try again."
	}
	return "Signing in through an identity provider is unavailable right now."
}

// completeSignIn is where the API returns the browser: it redeems the
// one-time code with the secret only this browser's session holds, then
// signs in exactly as a password sign-in does.
func (s *Site) completeSignIn(w http.ResponseWriter, r *http.Request) {
	secret, next, began := s.sessions.EndFlow(r.Context(), session.FlowSignIn)
	q := r.URL.Query()
	fail := func(message string) {
		s.renderSignIn(w, r, http.StatusOK, "sign-in.html", "Sign in", signInPage{Error: message, Next: next})
	}
	if code := q.Get("signInError"); code != "" || q.Get("signInCode") == "" {
		fail(signInErrorMessage(code))
		return
	}
	if !began {
		fail("This sign-in was started in another browser or has already been used. Sign in again.")
		return
	}
	var out signedInBody
	err := s.api.CallFor(r.Context(), clientaddr.FromRequest(r, s.opts.TrustedProxies), "", http.MethodPost, "/api/auth/sign-in/code",
		map[string]string{"code": q.Get("signInCode"), "clientBinding": secret}, &out)
	if err != nil || out.Token == "" {
		fail(codeRefusal(err))
		return
	}
	s.startSession(w, r, "Sign in", out, nextAfterSignIn(next))
}

func codeRefusal(err error) string {
	switch apiclient.StatusOf(err) {
	case http.StatusForbidden:
		return signInErrorMessage(apiclient.CodeOf(err))
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound:
		return "This sign-in has expired or was already used. Sign in again."
	case http.StatusTooManyRequests:
		return "Too many attempts. Wait a minute and try again."
	}
	return "Signing in is unavailable right now."
}

// errorCodePattern is what an error code from the query may look like;
// anything else is not repeated on the page.
var errorCodePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// signInErrorMessage words an error a federated sign-in came back with.
func signInErrorMessage(code string) string {
	switch code {
	case "":
		return "The sign-in did not complete. Sign in again."
	case "IDP_ERROR":
		return "The identity provider did not sign you in. Sign in again."
	case "EMAIL_NOT_VERIFIED":
		return "Your identity provider did not confirm your e-mail address, so Cairn cannot sign you in with it."
	case "SSO_EMAIL_DOMAIN_MISMATCH":
		return "Your identity provider signed you in with an address outside your organization's SSO domains."
	case "ACCOUNT_DEACTIVATED":
		return "This account is deactivated. Ask your organization's administrator."
	case "ACCOUNT_NOT_LINKABLE":
		return "An account with this e-mail address already exists, and this identity provider cannot sign in to it. Sign in the way you usually do."
	case "SSO_REQUIRED":
		return "Your organization requires signing in with SSO: use \"Sign in with SSO\" below."
	case "SIGN_IN_STATE_INVALID", "SIGN_IN_STATE_EXPIRED", "SIGN_IN_CODE_INVALID":
		return "The sign-in took too long or was already used. Sign in again."
	case "ID_TOKEN_INVALID":
		return "The identity provider's answer could not be verified. Sign in again."
	}
	if !errorCodePattern.MatchString(code) {
		return "Signing in through the identity provider failed. Sign in again."
	}
	return "Signing in through the identity provider failed (" + code + "). Sign in again."
}
