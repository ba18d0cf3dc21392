package site

import (
	"net/http"
	"strings"

	"github.com/cairnhq/cairn/bff/apiclient"
)

type signInPage struct {
	Email        string
	Error        string
	APIReachable bool
	APIVersion   string
	APIURL       string
}

func (s *Site) signInPage(w http.ResponseWriter, r *http.Request) {
	s.renderSignIn(w, r, http.StatusOK, "sign-in.html", "Sign in", signInPage{})
}

func (s *Site) signUpPage(w http.ResponseWriter, r *http.Request) {
	s.renderSignIn(w, r, http.StatusOK, "sign-up.html", "Create an account", signInPage{})
}

func (s *Site) renderSignIn(w http.ResponseWriter, r *http.Request, status int, name, title string, page signInPage) {
	page.APIURL = s.opts.APIURL.String()
	page.APIVersion, page.APIReachable = s.apiHealth(r.Context())
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
	err := s.api.Call(r.Context(), "", http.MethodPost, "/api/auth/sign-in/email",
		map[string]string{"email": email, "password": r.PostFormValue("password")}, &out)
	s.finishSignIn(w, r, "sign-in.html", "Sign in", email, out, err)
}

func (s *Site) signUp(w http.ResponseWriter, r *http.Request) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	var out signedInBody
	err := s.api.Call(r.Context(), "", http.MethodPost, "/api/auth/sign-up/email", map[string]string{
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
		case http.StatusConflict:
			message = "An account with that email already exists."
		case http.StatusBadRequest:
			message = "Check the email address and use a password of at least 12 characters."
		case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusInternalServerError:
			message = "Signing in is unavailable right now."
		}
		s.renderSignIn(w, r, http.StatusOK, page, title, signInPage{Email: email, Error: message})
		return
	}
	name := out.User.Name
	if name == "" {
		name = out.User.Email
	}
	if err := s.sessions.SignIn(r.Context(), out.Token, name); err != nil {
		s.unavailable(w, r, s.frame(r, title), err)
		return
	}
	http.Redirect(w, r, "/runs", http.StatusSeeOther)
}

func (s *Site) signOut(w http.ResponseWriter, r *http.Request) {
	if token, ok := s.sessions.APIToken(r.Context()); ok {
		_ = s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/sign-out", nil, nil)
	}
	_ = s.sessions.SignOut(r.Context())
	http.Redirect(w, r, "/sign-in", http.StatusSeeOther)
}

type organization struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Slug   string `json:"slug"`
	Role   string `json:"role"`
	Active bool   `json:"active"`
}

type orgMember struct {
	Email string `json:"email"`
	Name  string `json:"name"`
	Role  string `json:"role"`
}

type organizationsPage struct {
	Organizations []organization
	ActiveID      string
	Members       []orgMember
	Error         string
}

func (s *Site) organizations(w http.ResponseWriter, r *http.Request, token string) {
	s.renderOrganizations(w, r, token, "")
}

func (s *Site) renderOrganizations(w http.ResponseWriter, r *http.Request, token, message string) {
	f := s.frame(r, "Organizations")
	var orgs []organization
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/organization/list", nil, &orgs); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	var current struct {
		Session struct {
			ActiveOrganizationID *string `json:"active_organization_id"`
		} `json:"session"`
	}
	_ = s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/get-session", nil, &current)
	page := organizationsPage{Organizations: orgs, Error: message}
	if current.Session.ActiveOrganizationID != nil {
		page.ActiveID = *current.Session.ActiveOrganizationID
		_ = s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/organization/list-members", nil, &page.Members)
	}
	f.Page = page
	s.render(w, r, http.StatusOK, "organizations.html", f)
}

func (s *Site) createOrganization(w http.ResponseWriter, r *http.Request, token string) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	slug := strings.TrimSpace(r.PostFormValue("slug"))
	err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/organization/create", map[string]string{"name": name, "slug": slug}, nil)
	if err != nil {
		message := "The organization could not be created."
		if apiclient.StatusOf(err) == http.StatusConflict {
			message = "That short name is taken; choose another."
		}
		s.renderOrganizations(w, r, token, message)
		return
	}
	http.Redirect(w, r, "/runs", http.StatusSeeOther)
}

func (s *Site) setActiveOrganization(w http.ResponseWriter, r *http.Request, token string) {
	err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/organization/set-active",
		map[string]string{"organization_id": r.PostFormValue("organization_id")}, nil)
	if err != nil {
		s.renderOrganizations(w, r, token, "That organization could not be activated.")
		return
	}
	http.Redirect(w, r, "/runs", http.StatusSeeOther)
}
