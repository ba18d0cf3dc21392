package site

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/cairn/bff/apiclient"
)

// consentPath is the consent screen; the authorization server sends the
// browser here with the signed authorization request as the whole query.
const consentPath = "/oauth/consent"

// scopeWrite is the scope a person may withhold at consent.
const scopeWrite = "mcp:write"

type consentClient struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Kind        string  `json:"kind"`
	URI         *string `json:"uri"`
	RedirectURI string  `json:"redirect_uri"`
}

type consentPage struct {
	Query         string
	Client        consentClient
	RedirectHost  string
	Scopes        []string
	CanWrite      bool
	Organizations []organization
	ActiveID      string
	ExpiresAt     time.Time
	Error         string
	// CLI is the OpenTofu/Terraform CLI's `tofu login`, which asks for a
	// user API token rather than agent access.
	CLI bool
	// Agent, OpenID, Email and Profile say what the request asks for.
	Agent, OpenID, Email, Profile bool
}

// consent shows what an agent asks for: the client, where it will be sent,
// the organization the person grants it in and the scopes. A browser not
// signed in signs in first and comes back with the same signed query.
func (s *Site) consent(w http.ResponseWriter, r *http.Request) {
	token, ok := s.sessions.APIToken(r.Context())
	if !ok {
		http.Redirect(w, r, "/sign-in?"+url.Values{"next": {consentPath + "?" + r.URL.RawQuery}}.Encode(), http.StatusSeeOther)
		return
	}
	s.renderConsent(w, r, token, r.URL.RawQuery, "")
}

func (s *Site) renderConsent(w http.ResponseWriter, r *http.Request, token, query, message string) {
	f := s.frame(r, "Authorize an agent")
	var view struct {
		Client             consentClient  `json:"client"`
		Scopes             []string       `json:"scopes"`
		ExpiresAt          time.Time      `json:"expires_at"`
		Organizations      []organization `json:"organizations"`
		ActiveOrganization *string        `json:"active_organization_id"`
	}
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/oauth2/consent?"+query, nil, &view); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page := consentPage{Query: query, Client: view.Client, Scopes: view.Scopes, CanWrite: slices.Contains(view.Scopes, scopeWrite),
		Organizations: view.Organizations, ExpiresAt: view.ExpiresAt, Error: message,
		CLI: view.Client.Kind == "builtin", Agent: slices.Contains(view.Scopes, "mcp:tools"),
		OpenID: slices.Contains(view.Scopes, "openid"), Email: slices.Contains(view.Scopes, "email"),
		Profile: slices.Contains(view.Scopes, "profile")}
	if u, err := url.Parse(view.Client.RedirectURI); err == nil {
		page.RedirectHost = u.Host
		// The answer redirects to the client: the form may go there.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self' "+
			u.Scheme+"://"+u.Host)
	}
	if view.ActiveOrganization != nil {
		page.ActiveID = *view.ActiveOrganization
	}
	f.Page = page
	s.render(w, r, http.StatusOK, "consent.html", f)
}

// answerConsent sends the person's answer to the authorization server and
// the browser on to the client with the code (or the refusal).
func (s *Site) answerConsent(w http.ResponseWriter, r *http.Request, token string) {
	query := r.PostFormValue("query")
	allow := r.PostFormValue("decision") == "allow"
	body := map[string]any{"query": query, "organization_id": r.PostFormValue("organization_id"), "allow": allow}
	if allow && r.PostFormValue("write") != "on" {
		body["scopes"] = withoutWrite(query)
	}
	var out struct {
		RedirectURI string `json:"redirect_uri"`
	}
	if err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/oauth2/consent", body, &out); err != nil {
		if status := apiclient.StatusOf(err); status == http.StatusForbidden || status == http.StatusNotFound {
			s.renderConsent(w, r, token, query, "You are not a member of that organization.")
			return
		}
		s.unavailable(w, r, s.frame(r, "Authorize an agent"), err)
		return
	}
	http.Redirect(w, r, out.RedirectURI, http.StatusSeeOther)
}

// withoutWrite is the scope set of a signed authorization request (its
// query) without mcp:write: what a person who unticked write access
// grants. The server checks it against the request's own scopes.
func withoutWrite(query string) []string {
	v, _ := url.ParseQuery(query)
	scopes := slices.DeleteFunc(strings.Fields(v.Get("scope")), func(s string) bool { return s == scopeWrite })
	if len(scopes) == 0 {
		return nil
	}
	return scopes
}

type agentGrant struct {
	ID         string     `json:"id"`
	ClientName string     `json:"client_name"`
	ClientKind string     `json:"client_kind"`
	ClientID   string     `json:"client_id"`
	UserName   string     `json:"user_name"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

type agentsPage struct {
	Grants []agentGrant
	Notice string
}

// agents lists the agent clients authorized in the active organization
// (everyone's for a member manager, otherwise the person's own).
func (s *Site) agents(w http.ResponseWriter, r *http.Request, token string) {
	f := s.frame(r, "Agents")
	var page agentsPage
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/oauth2/grants", nil, &page.Grants); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	if r.URL.Query().Get("done") == "revoked" {
		page.Notice = "Access revoked: the agent's tokens stopped working."
	}
	f.Page = page
	s.render(w, r, http.StatusOK, "agents.html", f)
}

func (s *Site) revokeAgent(w http.ResponseWriter, r *http.Request, token string) {
	if err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/oauth2/grants/revoke",
		map[string]string{"grant_id": r.PathValue("id")}, nil); err != nil {
		s.unavailable(w, r, s.frame(r, "Agents"), err)
		return
	}
	http.Redirect(w, r, "/agents?done=revoked", http.StatusSeeOther)
}

// nextAfterSignIn is where sign-in continues: only back to the consent
// screen, so the parameter cannot send anyone elsewhere.
func nextAfterSignIn(next string) string {
	if strings.HasPrefix(next, consentPath+"?") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return "/runs"
}
