package githubfake

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The app's user-authorization credentials the fake knows; Cairn exchanges
// the installer's code with them to learn who completes an installation.
const (
	ClientID     = "Iv1.cairnfake"
	ClientSecret = "fake-client-secret-0123456789"
)

// Routes of the installer's user authorization.
const (
	RouteOAuthToken        = "POST /login/oauth/access_token"
	RouteUserInstallations = "GET /user/installations"
	RouteUser              = "GET /user"
	RouteUserMembership    = "GET /user/memberships/orgs/{org}"
)

// Person is someone who authorizes the app while installing it: who they
// are, the installations they can see, and their memberships in
// organizations (by organization login).
type Person struct {
	Login string
	ID    int64
	// Sees are the installations GET /user/installations lists.
	Sees []int64
	// Memberships are the person's own organization memberships, as GET
	// /user/memberships/orgs/{org} reports them.
	Memberships map[string]Membership
}

// Membership is a person's membership in an organization.
type Membership struct {
	// State is "active" or "pending" (an invitation not yet accepted).
	State string
	// Role is "admin", "member" or "billing_manager".
	Role string
}

// InstallerCode returns a fresh, single-use authorization code for the
// person who installed the given installations, as the provider appends to
// the setup URL when the app requests user authorization during
// installation: the account itself for a personal account, an active
// admin of each organization otherwise, who can see every one of them.
func (s *Server) InstallerCode(installationIDs ...int64) string {
	s.mu.Lock()
	p := Person{Login: "installer", ID: 5_000_000, Sees: slices.Clone(installationIDs), Memberships: map[string]Membership{}}
	for _, id := range installationIDs {
		in := s.installations[id]
		switch {
		case in == nil:
		case in.AccountType == "User":
			p.Login, p.ID = in.AccountLogin, in.AccountID
		default:
			p.Memberships[in.AccountLogin] = Membership{State: "active", Role: "admin"}
		}
	}
	s.mu.Unlock()
	return s.PersonCode(p)
}

// PersonCode returns a fresh, single-use authorization code for p.
func (s *Server) PersonCode(p Person) string {
	code := randomHex()
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Sees = slices.Clone(p.Sees)
	s.codes[code] = p
	return code
}

func randomHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// oauthToken exchanges a code for a user token: the client must be the
// app's, and a code works once.
func (s *Server) oauthToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "bad_request"})
		return
	}
	if r.PostForm.Get("client_id") != ClientID || r.PostForm.Get("client_secret") != ClientSecret {
		// GitHub answers 200 with an error document here.
		writeJSON(w, http.StatusOK, map[string]any{"error": "incorrect_client_credentials"})
		return
	}
	s.mu.Lock()
	who, ok := s.codes[r.PostForm.Get("code")]
	delete(s.codes, r.PostForm.Get("code"))
	var tok string
	if ok {
		tok = "ghu_" + randomHex()
		s.users[tok] = who
	}
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusOK, map[string]any{"error": "bad_verification_code",
			"error_description": "The code passed is incorrect or expired."})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "bearer", "scope": ""})
}

// person authenticates a user token; it writes the provider's 401 and
// returns false when the token is unknown.
func (s *Server) person(w http.ResponseWriter, r *http.Request) (Person, bool) {
	auth := r.Header.Get("Authorization")
	tok := strings.TrimSpace(auth[strings.IndexByte(auth, ' ')+1:])
	s.mu.Lock()
	who, ok := s.users[tok]
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials",
			"documentation_url": "https://docs.github.com/rest"})
	}
	return who, ok
}

func (s *Server) simpleUser(login string, id int64, kind string) map[string]any {
	return map[string]any{"login": login, "id": id, "node_id": "U_" + strconv.FormatInt(id, 10), "type": kind,
		"site_admin": false, "url": s.URL + "/users/" + login, "html_url": "https://github.com/" + login,
		"avatar_url": fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", id)}
}

// GET /user: the person the token belongs to.
func (s *Server) user(w http.ResponseWriter, r *http.Request) {
	who, ok := s.person(w, r)
	if !ok {
		return
	}
	u := s.simpleUser(who.Login, who.ID, "User")
	u["name"], u["company"], u["public_repos"], u["created_at"] = nil, nil, 0, "2026-01-01T00:00:00Z"
	writeJSON(w, http.StatusOK, u)
}

// GET /user/memberships/orgs/{org}: the person's own membership; a person
// not affiliated with the organization gets 404, as the provider answers.
func (s *Server) userMembership(w http.ResponseWriter, r *http.Request) {
	who, ok := s.person(w, r)
	if !ok {
		return
	}
	org := r.PathValue("org")
	var m Membership
	found := false
	for login, mm := range who.Memberships {
		if strings.EqualFold(login, org) {
			m, found, org = mm, true, login
		}
	}
	s.mu.Lock()
	var orgID int64
	for _, in := range s.installations {
		if strings.EqualFold(in.AccountLogin, org) {
			orgID = in.AccountID
		}
	}
	s.mu.Unlock()
	if !found || orgID == 0 {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"url":              s.URL + "/orgs/" + org + "/memberships/" + who.Login,
		"state":            m.State,
		"role":             m.Role,
		"organization_url": s.URL + "/orgs/" + org,
		"organization": map[string]any{"login": org, "id": orgID, "node_id": "O_" + strconv.FormatInt(orgID, 10),
			"url": s.URL + "/orgs/" + org, "description": nil},
		"user":        s.simpleUser(who.Login, who.ID, "User"),
		"permissions": map[string]any{"can_create_repository": m.Role == "admin"},
	})
}

// userInstallations lists, a page at a time, the installations the token's
// person can see.
func (s *Server) userInstallations(w http.ResponseWriter, r *http.Request) {
	who, ok := s.person(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	var all []map[string]any
	for _, id := range who.Sees {
		if in := s.installations[id]; in != nil {
			all = append(all, map[string]any{"id": in.ID, "app_id": s.AppID,
				"account": map[string]any{"login": in.AccountLogin, "id": in.AccountID, "type": in.AccountType}})
		}
	}
	s.mu.Unlock()
	perPage, page := 30, 1
	if n, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && n > 0 && n <= 100 {
		perPage = n
	}
	if n, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && n > 0 {
		page = n
	}
	from := min((page-1)*perPage, len(all))
	to := min(from+perPage, len(all))
	if to < len(all) {
		next := *r.URL
		q := next.Query()
		q.Set("page", strconv.Itoa(page+1))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", `<`+s.URL+next.RequestURI()+`>; rel="next"`)
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(all), "installations": all[from:to]})
}
