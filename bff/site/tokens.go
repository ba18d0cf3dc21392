package site

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/bff/apiclient"
)

type userToken struct {
	ID          string     `json:"id"`
	Description string     `json:"description"`
	ExpiresAt   *time.Time `json:"expires_at"`
	CreatedAt   time.Time  `json:"created_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
}

// tokensPage lists the caller's own API tokens. Created carries a new
// token's plaintext: this response is the only place it ever appears.
type tokensPage struct {
	Tab     string
	Tokens  []userToken
	MoreURL string
	Created *createdSecret
	Notice  string
	Error   string
	// Unavailable says the list could not be read; it is only rendered
	// beside a new plaintext, which must not be lost to a failed read.
	Unavailable bool
}

// createdSecret is a just-minted token, shown once.
type createdSecret struct {
	ID        string
	Plaintext string
	What      string
}

var tokenNotices = map[string]string{"revoked": "Token revoked. It stops working at once."}

// tokenLifetimes are the expiries the forms offer, in days (0: none).
var tokenLifetimes = []int{30, 90, 365}

func (s *Site) userTokens(w http.ResponseWriter, r *http.Request, token string) {
	s.renderUserTokens(w, r, token, http.StatusOK, tokensPage{Notice: tokenNotices[r.URL.Query().Get("done")]})
}

func (s *Site) renderUserTokens(w http.ResponseWriter, r *http.Request, token string, status int, page tokensPage) {
	f := s.frame(r, "API tokens")
	page.Tab = "tokens"
	path := "/v1/user-tokens?limit=50"
	if c := r.URL.Query().Get("cursor"); c != "" {
		path += "&cursor=" + url.QueryEscape(c)
	}
	list, err := apiclient.List[userToken](r.Context(), s.api, token, path)
	if err != nil && page.Created == nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Unavailable = err != nil
	page.Tokens = list.Data
	if list.NextCursor != "" {
		page.MoreURL = "/organization/tokens?cursor=" + url.QueryEscape(list.NextCursor)
	}
	f.Page = page
	s.render(w, r, status, "org-tokens.html", f)
}

// expiryOf turns the form's lifetime in days into an expiry; anything but
// an offered lifetime means none.
func expiryOf(days string) *time.Time {
	n, err := strconv.Atoi(days)
	for _, offered := range tokenLifetimes {
		if err == nil && n == offered {
			t := time.Now().UTC().Add(time.Duration(n) * 24 * time.Hour).Truncate(time.Second)
			return &t
		}
	}
	return nil
}

// createUserToken mints a personal API token for `tofu login` and shows
// its plaintext once, in this response only; it is never stored in the
// dashboard's session or answered again.
func (s *Site) createUserToken(w http.ResponseWriter, r *http.Request, token string) {
	body := map[string]any{"description": strings.TrimSpace(r.PostFormValue("description"))}
	if at := expiryOf(r.PostFormValue("expires_in_days")); at != nil {
		body["expires_at"] = at
	}
	var created struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	if err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/user-tokens", newKey(), body, &created); err != nil {
		s.renderUserTokens(w, r, token, refusedStatus(err), tokensPage{Error: refusal(err)})
		return
	}
	s.renderUserTokens(w, r, token, http.StatusCreated, tokensPage{Created: &createdSecret{ID: created.ID, Plaintext: created.Token, What: "API token"}})
}

func (s *Site) revokeUserToken(w http.ResponseWriter, r *http.Request, token string) {
	err := s.api.Mutate(r.Context(), token, http.MethodDelete, "/v1/user-tokens/"+url.PathEscape(r.PathValue("tokenId")), newKey(), nil, nil)
	if err != nil {
		s.renderUserTokens(w, r, token, refusedStatus(err), tokensPage{Error: refusal(err)})
		return
	}
	http.Redirect(w, r, "/organization/tokens?done=revoked", http.StatusSeeOther)
}

// refusedStatus is the status a page shown again after a refused action
// answers with: the API's 4xx, or 200 when the API failed (the page then
// says so in words).
func refusedStatus(err error) int {
	if status := apiclient.StatusOf(err); status >= 400 && status < 500 {
		return status
	}
	return http.StatusOK
}
