package site

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cairnhq/cairn/bff/apiclient"
	"github.com/cairnhq/cairn/bff/session"
)

// ssoTestPath is where the API sends an owner back from a dry-run
// sign-in through their organization's SSO.
const ssoTestPath = "/organization/sso/test"

// ssoProvider is an organization's SSO provider as the identity server
// shows it; its secrets are never answered.
type ssoProvider struct {
	ID          string            `json:"id"`
	Type        string            `json:"type"`
	Issuer      string            `json:"issuer"`
	Domains     []string          `json:"domains"`
	Mapping     map[string]string `json:"mapping"`
	DefaultRole string            `json:"defaultRole"`
	CreatedAt   time.Time         `json:"createdAt"`
	// CallbackURL (OIDC) or SPMetadataURL and SPEntityID (SAML) are what
	// the identity provider is told about Cairn.
	CallbackURL   string `json:"callbackUrl"`
	SPMetadataURL string `json:"spMetadataUrl"`
	SPEntityID    string `json:"spEntityId"`
}

// scimTokenStatus says whether the organization has a SCIM token; the
// token itself is shown once, when generated.
type scimTokenStatus struct {
	Exists     bool       `json:"exists"`
	CreatedAt  *time.Time `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
}

// ssoTestResult is what a dry-run sign-in asserted and what it would do;
// the test changes nothing.
type ssoTestResult struct {
	Email         string   `json:"email"`
	EmailVerified bool     `json:"emailVerified"`
	Groups        []string `json:"groups"`
	Teams         []string `json:"teams"`
	Error         string   `json:"error"`
}

// ssoRegistration is the register form, kept to be shown again when the
// identity server refuses it.
type ssoRegistration struct {
	Type, Issuer, ClientID, Scopes, MetadataXML, Domains, GroupsAttribute, DefaultRole string
}

// ssoPage is the organization's single sign-on and SCIM settings, which
// only owners manage.
type ssoPage struct {
	Tab       string
	Owner     bool
	Providers []ssoProvider
	Required  bool
	SCIM      scimTokenStatus
	// SCIMBaseURL is what an identity provider's SCIM client is given.
	SCIMBaseURL string
	// CreatedSCIMToken is a new token's plaintext: this response is the
	// only place it ever appears.
	CreatedSCIMToken string
	Test             *ssoTestResult
	Form             ssoRegistration
	Roles            []string
	// ConfirmDelete names the provider whose deletion awaits confirmation.
	ConfirmDelete string
	Notice        string
	Error         string
}

// ssoNotices are the notices an action redirects back with.
var ssoNotices = map[string]string{
	"registered":   "SSO provider registered. Give the identity provider the callback or metadata URL below, then test it.",
	"deleted":      "SSO provider deleted. Its people sign in with it no longer.",
	"required":     "SSO is now required: members can no longer sign in with a password. Owners keep their password sign-in.",
	"not-required": "SSO is no longer required: members may sign in with a password again.",
}

func (s *Site) ssoSettings(w http.ResponseWriter, r *http.Request, token string) {
	s.renderSSO(w, r, token, http.StatusOK, ssoPage{Notice: ssoNotices[r.URL.Query().Get("done")]})
}

// renderSSO renders the SSO page around what the caller already decided
// to say. A list that cannot be read renders as unavailable, never as an
// empty one, unless the page carries a new SCIM token, which must not be
// lost to a failed read.
func (s *Site) renderSSO(w http.ResponseWriter, r *http.Request, token string, status int, page ssoPage) {
	f := s.frame(r, "Single sign-on")
	ctx := r.Context()
	page.Tab, page.Roles = "sso", []string{"member", "reader", "writer", "admin"}
	page.SCIMBaseURL = s.opts.APIURL.String() + "/api/auth/scim/v2/"
	if page.Form.Type == "" {
		page.Form = ssoRegistration{Type: "oidc", Scopes: "openid email profile groups", DefaultRole: "member"}
	}
	c, err := s.callerFor(ctx, token, f)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Owner = c.Role == "owner"
	if page.Owner {
		var listed struct {
			Providers []ssoProvider `json:"providers"`
			Required  bool          `json:"required"`
		}
		err = s.api.Call(ctx, token, http.MethodGet, "/api/auth/sso/providers", nil, &listed)
		if err == nil {
			err = s.api.Call(ctx, token, http.MethodGet, "/api/auth/scim/token", nil, &page.SCIM)
		}
		if err != nil && page.CreatedSCIMToken == "" {
			s.unavailable(w, r, f, err)
			return
		}
		page.Providers, page.Required = listed.Providers, listed.Required
	}
	f.Page = page
	s.render(w, r, status, "org-sso.html", f)
}

// registerSSOProvider registers an OIDC or SAML provider for the active
// organization.
func (s *Site) registerSSOProvider(w http.ResponseWriter, r *http.Request, token string) {
	form := ssoRegistration{Type: r.PostFormValue("type"), Issuer: strings.TrimSpace(r.PostFormValue("issuer")),
		ClientID: strings.TrimSpace(r.PostFormValue("client_id")), Scopes: r.PostFormValue("scopes"),
		MetadataXML: strings.TrimSpace(r.PostFormValue("metadata_xml")), Domains: r.PostFormValue("domains"),
		GroupsAttribute: strings.TrimSpace(r.PostFormValue("groups_attribute")), DefaultRole: r.PostFormValue("default_role")}
	body := map[string]any{"type": form.Type, "issuer": form.Issuer, "domains": fieldsOf(form.Domains),
		"mapping": map[string]string{"groups": form.GroupsAttribute}, "defaultRole": form.DefaultRole}
	switch form.Type {
	case "oidc":
		body["oidcConfig"] = map[string]any{"clientId": form.ClientID, "clientSecret": r.PostFormValue("client_secret"), "scopes": fieldsOf(form.Scopes)}
	case "saml":
		body["samlConfig"] = map[string]string{"metadataXml": form.MetadataXML}
	}
	if err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/sso/register", body, nil); err != nil {
		s.renderSSO(w, r, token, refusedStatus(err), ssoPage{Form: form, Error: ssoRefusal(err, "The provider could not be registered.")})
		return
	}
	http.Redirect(w, r, "/organization/sso?done=registered", http.StatusSeeOther)
}

// fieldsOf splits a list typed with commas, spaces or new lines.
func fieldsOf(raw string) []string {
	return strings.FieldsFunc(raw, func(c rune) bool { return c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t' })
}

// deleteSSOProvider needs a second, explicit confirmation.
func (s *Site) deleteSSOProvider(w http.ResponseWriter, r *http.Request, token string) {
	if r.PostFormValue("confirm") != "yes" {
		s.renderSSO(w, r, token, http.StatusOK, ssoPage{ConfirmDelete: r.PathValue("providerId")})
		return
	}
	err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/sso/delete", map[string]string{"providerId": r.PathValue("providerId")}, nil)
	if err != nil {
		s.renderSSO(w, r, token, refusedStatus(err), ssoPage{Error: ssoRefusal(err, "The provider could not be deleted.")})
		return
	}
	http.Redirect(w, r, "/organization/sso?done=deleted", http.StatusSeeOther)
}

// requireSSO turns "SSO required" on or off. Owners keep their password
// sign-in either way, so nobody can lock the organization out.
func (s *Site) requireSSO(w http.ResponseWriter, r *http.Request, token string) {
	required := r.PostFormValue("required") == "true"
	err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/sso/require", map[string]bool{"required": required}, nil)
	if err != nil {
		s.renderSSO(w, r, token, refusedStatus(err), ssoPage{Error: ssoRefusal(err, "The setting could not be changed.")})
		return
	}
	done := "not-required"
	if required {
		done = "required"
	}
	http.Redirect(w, r, "/organization/sso?done="+done, http.StatusSeeOther)
}

// testSSOProvider starts a dry-run sign-in through a provider as the
// owner; the API returns to ssoTestPath with the test's ID.
func (s *Site) testSSOProvider(w http.ResponseWriter, r *http.Request, token string) {
	binding := s.sessions.BeginFlow(r.Context(), session.FlowSSOTest, "")
	var out redirectAnswer
	err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/sso/test", map[string]string{
		"providerId": r.PathValue("providerId"), "callbackURL": s.opts.Origin + ssoTestPath, "clientBinding": binding}, &out)
	if err == nil && !outbound(out.URL) {
		err = &apiclient.Error{Status: http.StatusBadGateway, Code: "UPSTREAM_RESPONSE_INVALID"}
	}
	if err != nil {
		_, _, _ = s.sessions.EndFlow(r.Context(), session.FlowSSOTest)
		s.renderSSO(w, r, token, refusedStatus(err), ssoPage{Error: ssoRefusal(err, "The test could not be started.")})
		return
	}
	s.leaveFor(w, r, "Testing single sign-on", out.URL)
}

// ssoTestResult shows what the dry run asserted: the e-mail, the groups
// and the teams they map to, or why it failed.
func (s *Site) ssoTestResult(w http.ResponseWriter, r *http.Request, token string) {
	q := r.URL.Query()
	if _, _, began := s.sessions.EndFlow(r.Context(), session.FlowSSOTest); !began {
		s.renderSSO(w, r, token, http.StatusOK, ssoPage{Error: "That test was started in another browser or its result was already shown. Test again."})
		return
	}
	if code := q.Get("signInError"); code != "" || q.Get("ssoTest") == "" {
		s.renderSSO(w, r, token, http.StatusOK, ssoPage{Test: &ssoTestResult{Error: signInErrorMessage(code)}})
		return
	}
	var result ssoTestResult
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/sso/test-result?id="+url.QueryEscape(q.Get("ssoTest")), nil, &result); err != nil {
		s.unavailable(w, r, s.frame(r, "Single sign-on"), err)
		return
	}
	s.renderSSO(w, r, token, http.StatusOK, ssoPage{Test: &result})
}

// generateSCIMToken replaces the organization's SCIM token and shows the
// new one once, in this response only.
func (s *Site) generateSCIMToken(w http.ResponseWriter, r *http.Request, token string) {
	var out struct {
		SCIMToken string `json:"scimToken"`
	}
	if err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/scim/generate-token", map[string]string{}, &out); err != nil {
		s.renderSSO(w, r, token, refusedStatus(err), ssoPage{Error: ssoRefusal(err, "The SCIM token could not be generated.")})
		return
	}
	s.renderSSO(w, r, token, http.StatusCreated, ssoPage{CreatedSCIMToken: out.SCIMToken})
}

func ssoRefusal(err error, fallback string) string {
	switch apiclient.StatusOf(err) {
	case http.StatusForbidden:
		return "Only owners of the organization manage single sign-on and SCIM."
	case http.StatusNotFound:
		return "That provider no longer exists."
	case http.StatusConflict:
		return "Another provider already claims one of those e-mail domains or that issuer."
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return fallback + " Check the issuer, the client ID and secret or the metadata, and the e-mail domains."
	}
	return fallback + " Try again in a moment."
}
