package site

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/platform/clientaddr"
	"github.com/cairnhq/cairn/bff/apiclient"
)

type signInPage struct {
	Email string
	// Next is where a successful sign-in continues (the consent screen).
	Next         string
	Error        string
	APIReachable bool
	APIVersion   string
	APIURL       string
	// Providers are the instance's identity providers ("Continue with");
	// ProvidersUnavailable says they could not be read.
	Providers            []socialProvider
	ProvidersUnavailable bool
	// SSOIdentifier is what was typed into "Sign in with SSO".
	SSOIdentifier string
	// From is "sign-up" on the sign-up page, whose federated forms come
	// back to it with their errors.
	From string
}

// socialProvider is an identity provider the sign-in page offers.
type socialProvider struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

func (s *Site) signInPage(w http.ResponseWriter, r *http.Request) {
	s.renderSignIn(w, r, http.StatusOK, "sign-in.html", "Sign in", signInPage{Next: pendingNext(r.URL.Query().Get("next"))})
}

// pendingNext is the consent screen a sign-in carries on to, or "" for
// the default.
func pendingNext(next string) string {
	if next = nextAfterSignIn(next); next == "/runs" {
		return ""
	}
	return next
}

func (s *Site) signUpPage(w http.ResponseWriter, r *http.Request) {
	s.renderSignIn(w, r, http.StatusOK, "sign-up.html", "Create an account", signInPage{})
}

func (s *Site) renderSignIn(w http.ResponseWriter, r *http.Request, status int, name, title string, page signInPage) {
	page.APIURL = s.opts.APIURL.String()
	if name == "sign-up.html" {
		page.From = "sign-up"
	}
	page.APIVersion, page.APIReachable = s.apiHealth(r.Context())
	var providers struct {
		Social []socialProvider `json:"social"`
	}
	if err := s.api.Call(r.Context(), "", http.MethodGet, "/api/auth/sign-in/providers", nil, &providers); err != nil {
		page.ProvidersUnavailable = page.APIReachable
	}
	page.Providers = providers.Social
	f := s.frame(r, title)
	f.Page = page
	s.render(w, r, status, name, f)
}

type signedInBody struct {
	Token string `json:"token"`
	User  struct {
		Name  string `json:"name"`
		Email string `json:"email"`
	} `json:"user"`
}

func (s *Site) signIn(w http.ResponseWriter, r *http.Request) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	var out signedInBody
	err := s.api.CallFor(r.Context(), clientaddr.FromRequest(r, s.opts.TrustedProxies), "", http.MethodPost, "/api/auth/sign-in/email",
		map[string]string{"email": email, "password": r.PostFormValue("password")}, &out)
	s.finishSignIn(w, r, "sign-in.html", "Sign in", email, out, err)
}

func (s *Site) signUp(w http.ResponseWriter, r *http.Request) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	var out signedInBody
	err := s.api.CallFor(r.Context(), clientaddr.FromRequest(r, s.opts.TrustedProxies), "", http.MethodPost, "/api/auth/sign-up/email", map[string]string{
		"email": email, "password": r.PostFormValue("password"), "name": strings.TrimSpace(r.PostFormValue("name"))}, &out)
	s.finishSignIn(w, r, "sign-up.html", "Create an account", email, out, err)
}

// finishSignIn keeps the API session token in the dashboard session only;
// the browser gets the dashboard's cookie, never the API's.
func (s *Site) finishSignIn(w http.ResponseWriter, r *http.Request, page, title, email string, out signedInBody, err error) {
	if err != nil || out.Token == "" {
		message := "That email and password do not match an account."
		switch apiclient.StatusOf(err) {
		case http.StatusTooManyRequests:
			message = "Too many attempts. Wait a minute and try again."
			if wait := retryAfterOf(err); wait != "" {
				message = "Too many attempts. Try again in " + wait + "."
			}
		case http.StatusConflict:
			message = "An account with that email already exists."
		case http.StatusBadRequest:
			message = "Check the email address and use a password of at least 12 characters."
		case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusInternalServerError:
			message = "Signing in is unavailable right now."
			if apiclient.CodeOf(err) == "SIGN_IN_BUSY" {
				message = "Cairn is busy checking other passwords. Try again in a few seconds."
			}
		}
		if apiclient.CodeOf(err) == "SSO_REQUIRED" {
			message = "Your organization requires signing in with SSO: use \"Sign in with SSO\" below."
		}
		s.renderSignIn(w, r, http.StatusOK, page, title, signInPage{Email: email, Error: message, Next: r.PostFormValue("next")})
		return
	}
	next := nextAfterSignIn(r.PostFormValue("next"))
	if page == "sign-up.html" && next == "/runs" {
		// A new account's next step is its organization.
		next = "/welcome"
	}
	s.startSession(w, r, title, out, next)
}

// startSession renews the dashboard session around the API session token
// the sign-in answered (password or federated) and continues at next.
func (s *Site) startSession(w http.ResponseWriter, r *http.Request, title string, out signedInBody, next string) {
	name := out.User.Name
	if name == "" {
		name = out.User.Email
	}
	if err := s.sessions.SignIn(r.Context(), out.Token, name); err != nil {
		s.unavailable(w, r, s.frame(r, title), err)
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Site) signOut(w http.ResponseWriter, r *http.Request) {
	if token, ok := s.sessions.APIToken(r.Context()); ok {
		_ = s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/sign-out", nil, nil)
	}
	_ = s.sessions.SignOut(r.Context())
	http.Redirect(w, r, "/sign-in", http.StatusSeeOther)
}

// retryAfterOf words an upstream Retry-After (seconds) for a person.
func retryAfterOf(err error) string {
	var apiErr *apiclient.Error
	if !errors.As(err, &apiErr) {
		return ""
	}
	seconds, convErr := strconv.Atoi(apiErr.RetryAfter)
	if convErr != nil || seconds <= 0 {
		return ""
	}
	return humanDuration(time.Duration(seconds) * time.Second)
}
