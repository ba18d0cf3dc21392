package site

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/platform/failure"
	"github.com/cairnhq/cairn/api/platform/reqid"
	"github.com/cairnhq/cairn/bff/apiclient"
	"github.com/cairnhq/cairn/bff/session"
	"github.com/cairnhq/cairn/web"
)

// Options configure the dashboard.
type Options struct {
	// APIURL is the API's base URL as the dashboard reaches it.
	APIURL *url.URL
	// APIClient must not follow redirects.
	APIClient *http.Client
	// Origin is the dashboard's own scheme://host[:port]; unsafe requests
	// and live sockets must come from it.
	Origin   string
	Sessions *session.Manager
	// Proxy serves /api/control-plane/...
	Proxy  http.Handler
	Logger *slog.Logger
	// TrustedProxies may name the browser's address in forwarding headers
	// (CAIRN_TRUSTED_PROXIES); the dashboard passes that address on when it
	// signs someone in or up.
	TrustedProxies []netip.Prefix
	// VouchKey vouches to the API for the browser's address on sign-in
	// and sign-up (clientaddr.VouchKey).
	VouchKey []byte
	// CodeHostWebURL is the code host's web origin, for commit links
	// (CodeHostWebURL derives it from the API URL).
	CodeHostWebURL string
}

// Site is the dashboard's HTTP handler.
type Site struct {
	opts     Options
	api      *apiclient.Client
	sessions *session.Manager
	pages    *template.Template
	logger   *slog.Logger
	feeds    *liveFeeds
}

var funcs = template.FuncMap{
	"since":    since,
	"utc":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"duration": humanDuration,
	"label":    func(s string) string { return strings.ReplaceAll(s, "_", " ") },
	"sub":      func(a, b int) int { return a - b },
	"short":    func(s string) string { return shortDigest(s) },
	"deref": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	"derefInt": func(n *int) int {
		if n == nil {
			return 0
		}
		return *n
	},
}

// New parses the embedded templates and returns the dashboard handler.
func New(opts Options) (*Site, error) {
	pages, err := template.New("").Funcs(funcs).ParseFS(web.Templates, "templates/layout.html", "templates/partials.html")
	if err != nil {
		return nil, err
	}
	return &Site{opts: opts, api: apiclient.New(opts.APIURL, opts.APIClient, opts.VouchKey), sessions: opts.Sessions, pages: pages,
		logger: opts.Logger, feeds: newLiveFeeds(opts.APIURL, opts.APIClient, opts.Logger)}, nil
}

// Handler routes the dashboard.
func (s *Site) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(web.Static, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", immutable(http.FileServerFS(static))))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	mux.HandleFunc("GET /{$}", s.root)
	mux.HandleFunc("GET /sign-in", s.signInPage)
	mux.HandleFunc("POST /sign-in", s.form(s.signIn))
	mux.HandleFunc("GET /sign-up", s.signUpPage)
	mux.HandleFunc("POST /sign-up", s.form(s.signUp))
	mux.HandleFunc("POST /sign-in/social", s.form(s.signInWithProvider))
	mux.HandleFunc("POST /sign-in/sso", s.form(s.signInWithSSO))
	mux.HandleFunc("GET /sign-in/sso", s.restartSSO)
	mux.HandleFunc("GET "+signInCompletePath, s.completeSignIn)
	mux.HandleFunc("POST /sign-out", s.form(s.signOut))
	mux.HandleFunc("GET /organizations", s.signedIn(s.organizations))
	mux.HandleFunc("POST /organizations", s.form(s.signedIn(s.createOrganization)))
	mux.HandleFunc("POST /organizations/active", s.form(s.signedIn(s.setActiveOrganization)))
	mux.HandleFunc("POST /organizations/invitations", s.form(s.signedIn(s.inviteMember)))
	mux.HandleFunc("POST /organizations/invitations/{id}/revoke", s.form(s.signedIn(s.revokeInvitation)))
	mux.HandleFunc("GET /invitations/{id}", s.invitation)
	mux.HandleFunc("POST /invitations/{id}/accept", s.form(s.signedIn(s.acceptInvitation)))
	mux.HandleFunc("POST /invitations/{id}/decline", s.form(s.signedIn(s.declineInvitation)))
	mux.HandleFunc("GET "+consentPath, s.consent)
	mux.HandleFunc("POST "+consentPath, s.form(s.signedIn(s.answerConsent)))
	mux.HandleFunc("GET /agents", s.signedIn(s.agents))
	mux.HandleFunc("POST /agents/{id}/revoke", s.form(s.signedIn(s.revokeAgent)))
	mux.HandleFunc("GET /runs", s.signedIn(s.runs))
	mux.HandleFunc("GET /runs/workspace-options", s.signedIn(s.workspaceOptions))
	run := func(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
		return s.signedIn(s.admitted(scopeRun, h))
	}
	mux.HandleFunc("GET /runs/{id}", run(s.run))
	mux.HandleFunc("GET /runs/{id}/changes", run(s.runChanges))
	mux.HandleFunc("POST /runs/{id}/approve", s.form(run(s.approve)))
	mux.HandleFunc("POST /runs/{id}/discard", s.form(run(s.discard)))
	mux.HandleFunc("POST /runs/{id}/override", s.form(run(s.override)))
	mux.HandleFunc("GET /workspaces", s.signedIn(s.workspaces))
	// Creating a workspace is an organization-wide mutation: the
	// organization's probe runs first, as it does for the page.
	mux.HandleFunc("POST /workspaces", s.form(s.signedIn(s.admitted(scopeOrganization, s.createWorkspace))))
	ws := func(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
		return s.signedIn(s.admitted(scopeWorkspace, h))
	}
	mux.HandleFunc("GET /workspaces/{id}", ws(s.workspaceTab("overview", s.loadOverview)))
	mux.HandleFunc("GET /workspaces/{id}/runs", ws(s.workspaceTab("runs", s.loadWorkspaceRuns)))
	mux.HandleFunc("GET /workspaces/{id}/states", ws(s.workspaceTab("states", s.loadStates)))
	mux.HandleFunc("GET /workspaces/{id}/variables", ws(s.workspaceTab("variables", s.loadVariables)))
	mux.HandleFunc("GET /workspaces/{id}/policies", ws(s.workspaceTab("policies", s.loadPolicies)))
	mux.HandleFunc("GET /workspaces/{id}/settings", ws(s.workspaceTab("settings", s.loadSettings)))
	mux.HandleFunc("POST /workspaces/{id}/settings", s.form(ws(s.updateWorkspaceSettings)))
	mux.HandleFunc("POST /workspaces/{id}/settings/run-triggers", s.form(ws(s.addRunTrigger)))
	mux.HandleFunc("POST /workspaces/{id}/settings/run-triggers/{triggerId}/remove", s.form(ws(s.removeRunTrigger)))
	mux.HandleFunc("POST /workspaces/{id}/settings/remote-state-sharing", s.form(ws(s.updateSharing)))
	mux.HandleFunc("POST /workspaces/{id}/policy-attachments", s.form(ws(s.attachPolicy)))
	mux.HandleFunc("POST /workspaces/{id}/policy-sets", s.form(ws(s.createPolicySet)))
	mux.HandleFunc("POST /workspaces/{id}/variables", s.form(ws(s.createVariable)))
	mux.HandleFunc("POST /workspaces/{id}/variables/{variableId}", s.form(ws(s.updateVariable)))
	mux.HandleFunc("POST /workspaces/{id}/variables/{variableId}/delete", s.form(ws(s.deleteVariable)))
	mux.HandleFunc("GET /workspaces/{id}/settings/cloud-access", ws(s.cloudAccess))
	mux.HandleFunc("POST /workspaces/{id}/settings/cloud-access/profiles", s.form(ws(s.createCredentialProfile)))
	mux.HandleFunc("POST /workspaces/{id}/settings/cloud-access/profiles/{profileId}/versions", s.form(ws(s.createCredentialVersion)))
	mux.HandleFunc("POST /workspaces/{id}/settings/cloud-access/profiles/{profileId}/versions/{versionId}/verify", s.form(ws(s.credentialAction("verify"))))
	mux.HandleFunc("POST /workspaces/{id}/settings/cloud-access/profiles/{profileId}/versions/{versionId}/revoke", s.form(ws(s.credentialAction("revoke"))))
	mux.HandleFunc("POST /workspaces/{id}/settings/cloud-access/profiles/{profileId}/archive", s.form(ws(s.credentialAction("archive"))))
	mux.HandleFunc("POST /workspaces/{id}/policy-attachments/{attachmentId}/detach", s.form(ws(s.detachPolicy)))
	mux.HandleFunc("GET /workspaces/{id}/settings/team-access", ws(s.workspaceTab("team-access", s.loadWorkspaceTeamAccess)))
	mux.HandleFunc("POST /workspaces/{id}/settings/team-access", s.form(ws(s.teamAccessAction(workspaceGrants, "grant"))))
	mux.HandleFunc("POST /workspaces/{id}/settings/team-access/{grantId}", s.form(ws(s.teamAccessAction(workspaceGrants, "update"))))
	mux.HandleFunc("POST /workspaces/{id}/settings/team-access/{grantId}/revoke", s.form(ws(s.teamAccessAction(workspaceGrants, "revoke"))))
	mux.HandleFunc("GET /workspaces/{id}/settings/source", ws(s.sourceSettings))
	mux.HandleFunc("POST /workspaces/{id}/settings/source", s.form(ws(s.saveSource)))
	mux.HandleFunc("POST /workspaces/{id}/settings/source/install", s.form(ws(s.startInstallation)))
	mux.HandleFunc("GET /workspaces/{id}/pull-requests/{ingestionId}", ws(s.workspaceTab("pull-request", s.loadPullRequest)))
	mux.HandleFunc("POST /workspaces/{id}/pull-requests/{ingestionId}/plan", s.form(ws(s.planPullRequest)))
	s.routeRuns(mux)
	s.routeRegistry(mux)
	org := func(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
		return s.signedIn(s.admitted(scopeOrganization, h))
	}
	mux.HandleFunc("GET /organization/audit", org(s.auditLog))
	s.routeVariableSets(mux, org)
	mux.HandleFunc("GET /organization/projects", org(s.projects))
	mux.HandleFunc("POST /organization/projects", s.form(org(s.createProject)))
	mux.HandleFunc("GET /organization/projects/{projectId}", org(s.projectPage))
	mux.HandleFunc("POST /organization/projects/{projectId}/team-access", s.form(org(s.teamAccessAction(projectGrants, "grant"))))
	mux.HandleFunc("POST /organization/projects/{projectId}/team-access/{grantId}", s.form(org(s.teamAccessAction(projectGrants, "update"))))
	mux.HandleFunc("POST /organization/projects/{projectId}/team-access/{grantId}/revoke", s.form(org(s.teamAccessAction(projectGrants, "revoke"))))
	mux.HandleFunc("GET /organization/teams", org(s.teams))
	mux.HandleFunc("POST /organization/teams", s.form(org(s.createTeam)))
	mux.HandleFunc("GET /organization/teams/{teamId}", org(s.teamPage))
	mux.HandleFunc("POST /organization/teams/{teamId}", s.form(org(s.updateTeam)))
	mux.HandleFunc("POST /organization/teams/{teamId}/members", s.form(org(s.addTeamMember)))
	mux.HandleFunc("POST /organization/teams/{teamId}/members/{userId}/remove", s.form(org(s.removeTeamMember)))
	mux.HandleFunc("POST /organization/teams/{teamId}/delete", s.form(org(s.deleteTeam)))
	mux.HandleFunc("GET /organization/members/{userId}", org(s.memberPage))
	mux.HandleFunc("GET /organization/tokens", org(s.userTokens))
	mux.HandleFunc("POST /organization/tokens", s.form(org(s.createUserToken)))
	mux.HandleFunc("POST /organization/tokens/{tokenId}/revoke", s.form(org(s.revokeUserToken)))
	mux.HandleFunc("GET /organization/service-accounts", org(s.serviceAccounts))
	mux.HandleFunc("POST /organization/service-accounts", s.form(org(s.createServiceAccount)))
	mux.HandleFunc("GET /organization/service-accounts/{accountId}", org(s.serviceAccountPage))
	mux.HandleFunc("POST /organization/service-accounts/{accountId}/tokens", s.form(org(s.issueServiceAccountToken)))
	mux.HandleFunc("POST /organization/service-accounts/{accountId}/tokens/{tokenId}/revoke", s.form(org(s.revokeServiceAccountToken)))
	mux.HandleFunc("GET /organization/settings", org(s.organizationSettings))
	mux.HandleFunc("GET /organization/sso", org(s.ssoSettings))
	mux.HandleFunc("POST /organization/sso/providers", s.form(org(s.registerSSOProvider)))
	mux.HandleFunc("POST /organization/sso/providers/{providerId}/delete", s.form(org(s.deleteSSOProvider)))
	mux.HandleFunc("POST /organization/sso/providers/{providerId}/test", s.form(org(s.testSSOProvider)))
	mux.HandleFunc("GET "+ssoTestPath, org(s.ssoTestResult))
	mux.HandleFunc("POST /organization/sso/require", s.form(org(s.requireSSO)))
	mux.HandleFunc("POST /organization/scim/token", s.form(org(s.generateSCIMToken)))
	mux.HandleFunc("GET /organization/code-host", org(s.codeHost))
	mux.HandleFunc("POST /organization/code-host/install", s.form(org(s.installFromCodeHost)))
	mux.HandleFunc("POST /organization/settings", s.form(org(s.updateOrganizationSettings)))
	mux.HandleFunc("POST /organizations/members/{userId}/role", s.form(s.signedIn(s.changeMemberRole)))
	mux.HandleFunc("POST /organizations/members/{userId}/remove", s.form(s.signedIn(s.removeMember)))
	// scs's LoadAndSave buffers the whole response to set its cookie first,
	// which would hold proxied bodies in memory and cannot hijack a
	// connection for the live socket. These two only read the session.
	outer := http.NewServeMux()
	outer.Handle("/", s.sessions.LoadAndSave(mux))
	s.routeStreams(outer)
	outer.Handle("GET /live/runs/{id}", s.sessions.ReadOnly(http.HandlerFunc(s.live)))
	if s.opts.Proxy != nil {
		outer.Handle("/api/control-plane/", s.sessions.ReadOnly(s.opts.Proxy))
	}
	// Outermost: a panic anywhere below is a bare 500 whose log line holds
	// only its classification and the request ID.
	return failure.Recover(s.logger, securityHeaders(outer, s.opts.CodeHostWebURL))
}

func immutable(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		h.ServeHTTP(w, r)
	})
}

// sourceOrigin is a bare scheme://host[:port], safe to name in a CSP.
var sourceOrigin = regexp.MustCompile(`^https?://[A-Za-z0-9.\-]+(:[0-9]+)?$`)

// securityHeaders sets the page policy. Browsers apply form-action to a
// form post's redirects too, so the code host's web origin is allowed
// there: Install posts to the dashboard, which redirects to the code
// host's install page.
func securityHeaders(h http.Handler, codeHost string) http.Handler {
	formAction := "'self'"
	if sourceOrigin.MatchString(codeHost) {
		formAction += " " + codeHost
	}
	policy := "default-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action " + formAction
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", policy)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// frame is what every page's layout needs.
type frame struct {
	Title   string
	User    string
	CSRF    string
	Nav     bool
	Problem *apiclient.Error
	Page    any
	// Canary marks a dark-canary admission: only this exact surface.
	Canary bool
	// Section is the main navigation entry the page belongs to.
	Section string
	// Switcher is the organization switcher, nil when it could not load.
	Switcher *switcher
}

func (s *Site) frame(r *http.Request, title string) frame {
	f := frame{Title: title, CSRF: s.sessions.CSRF(r.Context()), Section: sectionOf(r.URL.Path)}
	token, ok := s.sessions.APIToken(r.Context())
	if ok {
		f.User, f.Nav = s.sessions.UserName(r.Context()), true
	}
	if canaryOnly(r.Context()) {
		f.Nav, f.Canary = false, true
	}
	if f.Nav {
		f.Switcher = s.switcher(r.Context(), token)
	}
	return f
}

// render writes a page: the layout around the named template file.
func (s *Site) render(w http.ResponseWriter, r *http.Request, status int, name string, f frame) {
	t, err := s.pages.Clone()
	if err == nil {
		_, err = t.ParseFS(web.Templates, "templates/"+name)
	}
	if err != nil {
		s.reportFailure(r, err, slog.String("template", name))
		http.Error(w, "dashboard template error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	entry := "layout"
	if r.Header.Get("HX-Request") == "true" && t.Lookup("fragment") != nil {
		entry = "fragment"
	}
	w.WriteHeader(status)
	if err := t.ExecuteTemplate(w, entry, f); err != nil {
		s.reportFailure(r, err, slog.String("template", name))
	}
}

// reportFailure logs a failure nothing handled with its fixed
// classification, the request ID and the given names (a template's) only:
// its text can carry what the page was rendering.
func (s *Site) reportFailure(r *http.Request, err error, names ...slog.Attr) {
	failure.Report(r.Context(), s.logger, err, append([]slog.Attr{failure.RequestID(reqid.From(r.Context()))}, names...)...)
}

// unavailable renders a failed API call as "unavailable", never as an
// empty page, keeping the upstream status, request ID and Retry-After.
func (s *Site) unavailable(w http.ResponseWriter, r *http.Request, f frame, err error) {
	var apiErr *apiclient.Error
	if !errors.As(err, &apiErr) {
		s.reportFailure(r, err)
		apiErr = &apiclient.Error{Status: http.StatusInternalServerError}
	}
	if apiErr.Status == http.StatusUnauthorized {
		_ = s.sessions.SignOut(r.Context())
		http.Redirect(w, r, "/sign-in", http.StatusSeeOther)
		return
	}
	if apiErr.RetryAfter != "" {
		w.Header().Set("Retry-After", apiErr.RetryAfter)
	}
	if apiErr.RequestID != "" {
		w.Header().Set("X-Request-Id", apiErr.RequestID)
	}
	f.Problem, f.Nav = apiErr, f.Nav && apiErr.Status != http.StatusServiceUnavailable
	status := apiErr.Status
	if status < 400 {
		status = http.StatusBadGateway
	}
	s.render(w, r, status, "unavailable.html", f)
}

// signedIn runs h only for a signed-in session; others go to sign-in.
func (s *Site) signedIn(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := s.sessions.APIToken(r.Context())
		if !ok {
			http.Redirect(w, r, "/sign-in", http.StatusSeeOther)
			return
		}
		h(w, r, token)
	}
}

// form guards a form post: same origin and the session's CSRF token.
func (s *Site) form(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if !s.sameOrigin(r) || r.ParseForm() != nil || !s.sessions.ValidCSRF(r.Context(), r.PostFormValue("csrf_token")) {
			http.Error(w, "This form could not be accepted: reload the page and try again.", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

// sameOrigin accepts a request whose Origin is the dashboard's, or which
// the browser marks same-origin when it sends no Origin.
func (s *Site) sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		return origin == s.opts.Origin
	}
	return r.Header.Get("Sec-Fetch-Site") == "same-origin"
}

// probe asks the API whether the organization (path "") or an exact
// workspace or run surface may be shown. Any failure denies.
func (s *Site) probe(ctx context.Context, token, path string) error {
	var out json.RawMessage
	return s.api.Call(ctx, token, http.MethodGet, "/v1/launch-access"+path, nil, &out)
}

func (s *Site) root(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.sessions.APIToken(r.Context()); ok {
		http.Redirect(w, r, "/runs", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/sign-in", http.StatusSeeOther)
}

func (s *Site) apiHealth(ctx context.Context) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.opts.APIURL.String()+"/health", nil)
	if err != nil {
		return "", false
	}
	resp, err := s.opts.APIClient.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var body struct {
		Version string `json:"version"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return "", false
	}
	return body.Version, true
}
