package githubfake

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The app's user-authorization credentials the fake knows; Cairn exchanges
// the installer's code with them to learn which installations that person
// can see.
const (
	ClientID     = "Iv1.cairnfake"
	ClientSecret = "fake-client-secret-0123456789"
)

// Routes of the installer's user authorization.
const (
	RouteOAuthToken        = "POST /login/oauth/access_token"
	RouteUserInstallations = "GET /user/installations"
)

// installer is a person who authorized the app while installing it.
type installer struct {
	installations []int64
}

// InstallerCode returns a fresh, single-use authorization code for a person
// who can see the given installations, as the provider appends to the setup
// URL when the app requests user authorization during installation.
func (s *Server) InstallerCode(installationIDs ...int64) string {
	code := randomHex()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = installer{installations: slices.Clone(installationIDs)}
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

// userInstallations lists, a page at a time, the installations the token's
// person can see.
func (s *Server) userInstallations(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	tok := strings.TrimSpace(auth[strings.IndexByte(auth, ' ')+1:])
	s.mu.Lock()
	who, ok := s.users[tok]
	var all []map[string]any
	for _, id := range who.installations {
		if in := s.installations[id]; in != nil {
			all = append(all, map[string]any{"id": in.ID, "app_id": s.AppID,
				"account": map[string]any{"login": in.AccountLogin, "id": in.AccountID, "type": in.AccountType}})
		}
	}
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials"})
		return
	}
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
