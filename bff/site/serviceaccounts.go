package site

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/bff/apiclient"
)

type serviceAccount struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	CreatedBy   string    `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
}

type serviceAccountToken struct {
	ID          string     `json:"id"`
	Permissions []string   `json:"permissions"`
	ProjectID   *string    `json:"project_id"`
	WorkspaceID *string    `json:"workspace_id"`
	ExpiresAt   time.Time  `json:"expires_at"`
	CreatedAt   time.Time  `json:"created_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
}

// Status is what the token can do now: active, revoked or expired.
func (t serviceAccountToken) Status() string {
	switch {
	case t.RevokedAt != nil:
		return "revoked"
	case !t.ExpiresAt.After(time.Now()):
		return "expired"
	}
	return "active"
}

type serviceAccountsPage struct {
	Tab      string
	Accounts []serviceAccount
	MoreURL  string
	Error    string
	// CanManage is whether the caller may create accounts (and see them:
	// the list needs the same permission).
	CanManage bool
}

func (s *Site) serviceAccounts(w http.ResponseWriter, r *http.Request, token string) {
	s.renderServiceAccounts(w, r, token, http.StatusOK, "")
}

func (s *Site) renderServiceAccounts(w http.ResponseWriter, r *http.Request, token string, status int, message string) {
	f := s.frame(r, "Service accounts")
	page := serviceAccountsPage{Tab: "service-accounts", Error: message}
	c, err := s.callerFor(r.Context(), token, f)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.CanManage = c.Can(string(access.PermServiceAccountManage))
	if page.CanManage {
		path := "/v1/service-accounts?limit=50"
		if cur := r.URL.Query().Get("cursor"); cur != "" {
			path += "&cursor=" + url.QueryEscape(cur)
		}
		list, err := apiclient.List[serviceAccount](r.Context(), s.api, token, path)
		if err != nil {
			s.unavailable(w, r, f, err)
			return
		}
		page.Accounts = list.Data
		if list.NextCursor != "" {
			page.MoreURL = "/organization/service-accounts?cursor=" + url.QueryEscape(list.NextCursor)
		}
	}
	f.Page = page
	s.render(w, r, status, "org-service-accounts.html", f)
}

func (s *Site) createServiceAccount(w http.ResponseWriter, r *http.Request, token string) {
	var created serviceAccount
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/service-accounts", newKey(), map[string]string{
		"name": strings.TrimSpace(r.PostFormValue("name")), "description": strings.TrimSpace(r.PostFormValue("description"))}, &created)
	if err != nil {
		message := refusal(err)
		if apiclient.StatusOf(err) == http.StatusConflict {
			message = "A service account with that name already exists."
		}
		s.renderServiceAccounts(w, r, token, refusedStatus(err), message)
		return
	}
	http.Redirect(w, r, "/organization/service-accounts/"+url.PathEscape(created.ID), http.StatusSeeOther)
}

// serviceAccountDetail is an account's read: the account with its tokens
// (tokens have no list of their own).
type serviceAccountDetail struct {
	serviceAccount
	Tokens          []serviceAccountToken `json:"tokens"`
	TokensTruncated bool                  `json:"tokens_truncated"`
}

// serviceAccountPage is one account: its tokens and the issue form.
type serviceAccountPage struct {
	Tab     string
	Account serviceAccount
	Tokens  []serviceAccountToken
	// TokensTruncated says the oldest revoked or expired tokens are not
	// shown.
	TokensTruncated bool
	Created         *createdSecret
	Notice          string
	Error           string
	// Permissions the caller may grant: a token carries a subset of its
	// issuer's permissions.
	Permissions []string
	Projects    []project
	Workspaces  []workspaceRef
	Lifetimes   []int
	Unavailable bool
}

func (s *Site) serviceAccountPage(w http.ResponseWriter, r *http.Request, token string) {
	notice := ""
	if r.URL.Query().Get("done") == "revoked" {
		notice = "Token revoked. It stops working on its next request."
	}
	s.renderServiceAccount(w, r, token, http.StatusOK, serviceAccountPage{Notice: notice})
}

func (s *Site) renderServiceAccount(w http.ResponseWriter, r *http.Request, token string, status int, page serviceAccountPage) {
	f := s.frame(r, "Service account")
	ctx := r.Context()
	page.Tab, page.Lifetimes = "service-accounts", tokenLifetimes
	id := r.PathValue("accountId")
	fail := func(err error) {
		if page.Created != nil {
			// The plaintext exists only in this response: show it even
			// when the rest of the page cannot be read.
			page.Unavailable = true
			f.Page = page
			s.render(w, r, status, "org-service-account.html", f)
			return
		}
		s.unavailable(w, r, f, err)
	}
	var account serviceAccountDetail
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/service-accounts/"+url.PathEscape(id), nil, &account); err != nil {
		fail(err)
		return
	}
	page.Account, page.Tokens, page.TokensTruncated = account.serviceAccount, account.Tokens, account.TokensTruncated
	f.Title = page.Account.Name
	c, err := s.callerFor(ctx, token, f)
	if err != nil {
		fail(err)
		return
	}
	for _, p := range access.AllPermissions() {
		if c.Can(string(p)) {
			page.Permissions = append(page.Permissions, string(p))
		}
	}
	projects, err := apiclient.List[project](ctx, s.api, token, "/v1/projects?limit=100")
	if err != nil {
		fail(err)
		return
	}
	page.Projects = projects.Data
	if page.Workspaces, err = s.reachableWorkspaces(ctx, token); err != nil {
		fail(err)
		return
	}
	f.Page = page
	s.render(w, r, status, "org-service-account.html", f)
}

// issueServiceAccountToken issues a token with the chosen permissions and
// boundaries and shows its plaintext once.
func (s *Site) issueServiceAccountToken(w http.ResponseWriter, r *http.Request, token string) {
	expires := expiryOf(r.PostFormValue("expires_in_days"))
	if expires == nil {
		s.renderServiceAccount(w, r, token, http.StatusUnprocessableEntity, serviceAccountPage{Error: "Choose how long the token lives (at most a year)."})
		return
	}
	body := map[string]any{"permissions": r.PostForm["permissions"], "expires_at": expires,
		"project_id": r.PostFormValue("project_id"), "workspace_id": r.PostFormValue("workspace_id")}
	var issued struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/service-accounts/"+url.PathEscape(r.PathValue("accountId"))+"/tokens", newKey(), body, &issued)
	if err != nil {
		message := refusal(err)
		if apiclient.CodeOf(err) == "VALIDATION_FAILED" || apiclient.StatusOf(err) == http.StatusUnprocessableEntity {
			message = "Choose at least one permission you hold, and boundaries inside this organization."
		}
		s.renderServiceAccount(w, r, token, refusedStatus(err), serviceAccountPage{Error: message})
		return
	}
	s.renderServiceAccount(w, r, token, http.StatusCreated, serviceAccountPage{Created: &createdSecret{ID: issued.ID, Plaintext: issued.Token, What: "service account token"}})
}

func (s *Site) revokeServiceAccountToken(w http.ResponseWriter, r *http.Request, token string) {
	account := url.PathEscape(r.PathValue("accountId"))
	err := s.api.Mutate(r.Context(), token, http.MethodDelete, "/v1/service-accounts/"+account+"/tokens/"+url.PathEscape(r.PathValue("tokenId")), newKey(), nil, nil)
	if err != nil {
		s.renderServiceAccount(w, r, token, refusedStatus(err), serviceAccountPage{Error: refusal(err)})
		return
	}
	http.Redirect(w, r, "/organization/service-accounts/"+account+"?done=revoked", http.StatusSeeOther)
}
