package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/e2e/devstack"
)

const (
	dexClientSecret = "cairn-dex-client-secret-0123"
	dexPassword     = "dex-password-123"
)

// dexUser is a static-password user of the Dex the SSO tests start.
type dexUser struct {
	email, name string
	verified    bool
	groups      []string
}

// dexConfig is Dex with memory storage, one static client whose redirect
// URIs are Cairn's callbacks, and password users.
func dexConfig(issuer string, port int, redirects []string, users []dexUser) string {
	hash, _ := bcrypt.GenerateFromPassword([]byte(dexPassword), 10)
	var b strings.Builder
	fmt.Fprintf(&b, "issuer: %s\nstorage: {type: memory}\nweb: {http: '127.0.0.1:%d'}\noauth2: {skipApprovalScreen: true}\n", issuer, port)
	fmt.Fprintf(&b, "staticClients:\n- id: cairn\n  secret: %s\n  name: Cairn\n  redirectURIs: [%s]\n", dexClientSecret, "'"+strings.Join(redirects, "', '")+"'")
	b.WriteString("enablePasswordDB: true\nstaticPasswords:\n")
	for i, u := range users {
		fmt.Fprintf(&b, "- email: %q\n  hash: %q\n  username: %q\n  userID: \"user-%d\"\n  emailVerified: %t\n  groups: [%s]\n",
			u.email, hash, u.name, i, u.verified, strings.Join(u.groups, ", "))
	}
	return b.String()
}

// ssoBrowser is a plain HTTP client that goes through the IdP's pages by
// following redirects, and stops where the API sends it back to the
// dashboard. It keeps the IdP → API callback URL it passed through.
type ssoBrowser struct {
	client    *http.Client
	callbacks []string
	secret    string
}

func newSSOBrowser(t *testing.T, dashboardURL string) *ssoBrowser {
	jar, _ := cookiejar.New(nil)
	dash, _ := url.Parse(dashboardURL)
	b := &ssoBrowser{secret: fmt.Sprintf("browser-secret-%s", t.Name())}
	b.client = &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.Contains(req.URL.Path, "/api/auth/callback/") || strings.Contains(req.URL.Path, "/api/auth/sso/callback/") {
			b.callbacks = append(b.callbacks, req.URL.String())
		}
		if req.URL.Host == dash.Host {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	return b
}

// binding is what the dashboard sends when it starts a flow: the
// base64url SHA-256 of the secret it keeps in the browser.
func (b *ssoBrowser) binding() string {
	sum := sha256.Sum256([]byte(b.secret))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

var formAction = regexp.MustCompile(`<form[^>]*action="([^"]+)"`)

// signIn starts a flow at the API, logs in at Dex and returns where the
// API sent the browser back (the dashboard's callback with its query).
func (b *ssoBrowser) signIn(t *testing.T, s *Stack, path string, body map[string]any, email string) *url.URL {
	t.Helper()
	body["callbackURL"] = s.DashboardURL + "/sign-in/complete"
	body["clientBinding"] = b.binding()
	var start struct {
		URL      string `json:"url"`
		Redirect bool   `json:"redirect"`
	}
	if st := s.apiJSON(t, http.MethodPost, path, body, &start); st != http.StatusOK || !start.Redirect {
		t.Fatalf("%s: %d", path, st)
	}
	resp, err := b.client.Get(start.URL + "&connector_id=local")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := formAction.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no login form at Dex: %d %s", resp.StatusCode, page)
	}
	action, _ := resp.Request.URL.Parse(html.UnescapeString(string(m[1])))
	resp, err = b.client.PostForm(action.String(), url.Values{"login": {email}, "password": {dexPassword}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after Dex's login: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(back.String(), s.DashboardURL+"/sign-in/complete?") {
		t.Fatalf("sent back to %q", resp.Header.Get("Location"))
	}
	return back
}

// redeem exchanges the one-time code for a session as the dashboard does.
func (b *ssoBrowser) redeem(t *testing.T, s *Stack, back *url.URL) member {
	t.Helper()
	code := back.Query().Get("signInCode")
	if code == "" {
		t.Fatalf("no sign-in code in %s", back)
	}
	var in struct {
		Token   string
		Session struct {
			ActiveOrganizationID *string `json:"active_organization_id"`
		}
		User struct{ ID, Email string }
	}
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/sign-in/code", map[string]string{"code": code, "clientBinding": b.secret}, &in); st != http.StatusOK {
		t.Fatalf("redeeming the code: %d", st)
	}
	m := member{email: in.User.Email, session: in.Token}
	if in.Session.ActiveOrganizationID != nil {
		m.orgID = *in.Session.ActiveOrganizationID
	}
	return m
}

// teamsOf reads the team names a user holds in an organization.
func teamsOf(t *testing.T, s *Stack, orgID, email string) []string {
	t.Helper()
	conn, err := db.Open(context.Background(), s.DatabaseURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	names := []string{}
	if err := conn.Select(&names, `SELECT t.name FROM team_members m JOIN teams t ON t.id = m.team_id
		JOIN users u ON u.id = m.user_id WHERE t.organization_id = $1 AND u.email = $2 ORDER BY t.name`, orgID, email); err != nil {
		t.Fatal(err)
	}
	return names
}

func countRows(t *testing.T, s *Stack, query string, args ...any) int {
	t.Helper()
	conn, err := db.Open(context.Background(), s.DatabaseURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n int
	if err := conn.Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSSOOIDCWithDex signs people in through a real Dex: the instance
// IdP creates the account with the verified e-mail; the organization's
// provider adds the member just in time and maps Dex's groups onto teams
// (exactly, never the owners team); after the groups change in Dex the
// next sign-in leaves the stale team; SSO-required refuses a member's
// password but not the owner's; and the bad inputs are refused with
// nothing created.
func TestSSOOIDCWithDex(t *testing.T) {
	t.Parallel()
	bin, err := devstack.EnsureDex(context.Background(), repoRoot(t), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	port, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dexDir := t.TempDir()
	dex := &devstack.DexServer{Bin: bin, Dir: dexDir, Port: port}
	t.Cleanup(func() { _ = dex.Stop() })
	s := StartStack(t, WithEnv("IDP_CLIENT_ID=cairn", "IDP_CLIENT_SECRET="+dexClientSecret,
		"CAIRN_IDP_ISSUER="+dex.Issuer(), "CAIRN_IDP_NAME=oidc"))

	owner := s.newMember(t, "ssoowner")
	s.createTeam(t, owner, "platform")
	s.createTeam(t, owner, "data")
	var prov struct {
		ID          string `json:"id"`
		CallbackURL string `json:"callbackUrl"`
	}
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/sso/register", map[string]any{
		"type": "oidc", "issuer": dex.Issuer(), "domains": []string{"example.org"},
		"oidcConfig": map[string]any{"clientId": "cairn", "clientSecret": dexClientSecret,
			"scopes": []string{"openid", "email", "profile", "groups"}},
	}, &prov, owner.cookie()...); st != http.StatusOK || prov.ID == "" {
		t.Fatalf("registering the provider: %d", st)
	}
	var listed struct {
		Providers []map[string]any `json:"providers"`
	}
	_, raw := call(t, s.Client, http.MethodGet, s.APIURL+"/api/auth/sso/providers", nil, owner.cookie()...)
	if strings.Contains(string(raw), dexClientSecret) {
		t.Fatalf("the provider list shows the client secret: %s", raw)
	}
	if s.apiJSON(t, http.MethodGet, "/api/auth/sso/providers", nil, &listed, owner.cookie()...); len(listed.Providers) != 1 {
		t.Fatalf("providers: %+v", listed)
	}

	redirects := []string{s.APIURL + "/api/auth/callback/oidc", prov.CallbackURL}
	alice := dexUser{email: "alice@example.org", name: "Alice", verified: true, groups: []string{"platform", "owners", "Data"}}
	mallory := dexUser{email: "mallory@example.org", name: "Mallory", verified: false, groups: []string{"platform"}}
	if err := dex.Start(context.Background(), dexConfig(dex.Issuer(), port, redirects, []dexUser{alice, mallory})); err != nil {
		t.Fatal(err)
	}

	// The instance IdP: the account is created with the verified e-mail.
	b := newSSOBrowser(t, s.DashboardURL)
	social := b.redeem(t, s, b.signIn(t, s, "/api/auth/sign-in/social", map[string]any{"provider": "oidc"}, alice.email))
	if social.email != alice.email || social.orgID != "" {
		t.Fatalf("social sign-in: %+v", social)
	}
	// The callback it came through is spent: a replay is refused and
	// hands out no code.
	replay, err := b.client.Get(b.callbacks[len(b.callbacks)-1])
	if err != nil {
		t.Fatal(err)
	}
	replay.Body.Close()
	if loc := replay.Header.Get("Location"); replay.StatusCode != http.StatusSeeOther ||
		!strings.Contains(loc, "signInError=SIGN_IN_STATE_EXPIRED") || strings.Contains(loc, "signInCode") {
		t.Fatalf("replayed callback: %d %s", replay.StatusCode, loc)
	}

	// Organization SSO: the same person (linked by verified e-mail) joins
	// just in time with the mapped team only: "owners" is never assigned
	// and "Data" does not match "data".
	sso := b.redeem(t, s, b.signIn(t, s, "/api/auth/sign-in/sso", map[string]any{"email": alice.email}, alice.email))
	if sso.orgID != owner.orgID {
		t.Fatalf("SSO sign-in's organization %q, want %q", sso.orgID, owner.orgID)
	}
	if got := teamsOf(t, s, owner.orgID, alice.email); !slices.Equal(got, []string{"platform"}) {
		t.Fatalf("teams after the first SSO sign-in: %v", got)
	}
	if n := countRows(t, s, `SELECT count(*) FROM users WHERE email = $1`, alice.email); n != 1 {
		t.Fatalf("%d accounts for %s", n, alice.email)
	}
	if n := countRows(t, s, `SELECT count(*) FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE u.email = $1 AND m.joined_via = 'sso' AND m.role = 'member'`, alice.email); n != 1 {
		t.Fatal("no just-in-time SSO membership with the default role")
	}

	// The groups change in Dex: the next sign-in leaves the stale team.
	alice.groups = []string{"data"}
	if err := dex.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := dex.Start(context.Background(), dexConfig(dex.Issuer(), port, redirects, []dexUser{alice, mallory})); err != nil {
		t.Fatal(err)
	}
	b.redeem(t, s, b.signIn(t, s, "/api/auth/sign-in/sso", map[string]any{"organizationSlug": owner.slug}, alice.email))
	if got := teamsOf(t, s, owner.orgID, alice.email); !slices.Equal(got, []string{"data"}) {
		t.Fatalf("teams after the groups changed: %v", got)
	}

	// An address Dex has not verified creates nothing.
	back := b.signIn(t, s, "/api/auth/sign-in/social", map[string]any{"provider": "oidc"}, mallory.email)
	if back.Query().Get("signInError") != "EMAIL_NOT_VERIFIED" || back.Query().Get("signInCode") != "" {
		t.Fatalf("unverified e-mail sent back to %s", back)
	}
	if n := countRows(t, s, `SELECT count(*) FROM users WHERE email = $1`, mallory.email); n != 0 {
		t.Fatal("an account was created for an unverified e-mail")
	}

	// A code redeemed without its browser's secret is refused and spent.
	back = b.signIn(t, s, "/api/auth/sign-in/social", map[string]any{"provider": "oidc"}, alice.email)
	code := back.Query().Get("signInCode")
	if a := postAuth(t, s.Client, s.APIURL+"/api/auth/sign-in/code", map[string]string{"code": code, "clientBinding": "another browser"}); a.status != http.StatusBadRequest || a.code != "SIGN_IN_CODE_INVALID" {
		t.Fatalf("code with the wrong binding: %+v", a)
	}
	if a := postAuth(t, s.Client, s.APIURL+"/api/auth/sign-in/code", map[string]string{"code": code, "clientBinding": b.secret}); a.status != http.StatusBadRequest {
		t.Fatalf("a spent code: %+v", a)
	}

	// Bad starts and callbacks are refused before anything is recorded.
	flows := countRows(t, s, `SELECT count(*) FROM sign_in_flows`)
	for _, tc := range []struct {
		name   string
		path   string
		body   map[string]any
		status int
		code   string
	}{
		{"unknown provider", "/api/auth/sign-in/social", map[string]any{"provider": "nope", "callbackURL": s.DashboardURL + "/x", "clientBinding": b.binding()}, http.StatusNotFound, "SSO_PROVIDER_NOT_FOUND"},
		{"callbackURL off the dashboard", "/api/auth/sign-in/social", map[string]any{"provider": "oidc", "callbackURL": "https://evil.example/x", "clientBinding": b.binding()}, http.StatusBadRequest, "CALLBACK_URL_UNTRUSTED"},
		{"no binding", "/api/auth/sign-in/social", map[string]any{"provider": "oidc", "callbackURL": s.DashboardURL + "/x"}, http.StatusBadRequest, "VALIDATION_FAILED"},
		{"unknown domain", "/api/auth/sign-in/sso", map[string]any{"email": "x@nowhere.example", "callbackURL": s.DashboardURL + "/x", "clientBinding": b.binding()}, http.StatusNotFound, "SSO_PROVIDER_NOT_FOUND"},
	} {
		if a := postAuth(t, s.Client, s.APIURL+tc.path, tc.body); a.status != tc.status || a.code != tc.code {
			t.Errorf("%s: %+v, want %d %s", tc.name, a, tc.status, tc.code)
		}
	}
	if n := countRows(t, s, `SELECT count(*) FROM sign_in_flows`); n != flows {
		t.Errorf("refused starts recorded %d flows", n-flows)
	}
	if st, body := get(t, s.APIURL+"/api/auth/callback/oidc?state=forged&code=x"); st != http.StatusBadRequest || !strings.Contains(string(body), "SIGN_IN_STATE_INVALID") {
		t.Errorf("forged state: %d %s", st, body)
	}

	// SSO required: a member's password sign-in is refused, the owner's is not.
	pw := s.onlyMemberOf(t, owner, "pwmember", "member")
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/sso/require", map[string]bool{"required": true}, nil, owner.cookie()...); st != http.StatusOK {
		t.Fatalf("requiring SSO: %d", st)
	}
	if a := postAuth(t, s.Client, s.APIURL+"/api/auth/sign-in/email", map[string]string{"email": pw.email, "password": "correct horse battery staple"}); a.status != http.StatusForbidden || a.code != "SSO_REQUIRED" {
		t.Fatalf("member's password sign-in under SSO-required: %+v", a)
	}
	if a := postAuth(t, s.Client, s.APIURL+"/api/auth/sign-in/email", map[string]string{"email": owner.email, "password": "correct horse battery staple"}); a.status != http.StatusOK {
		t.Fatalf("owner's password sign-in under SSO-required: %+v", a)
	}
	// A member may not change SSO settings.
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/sso/require", map[string]bool{"required": false}, nil, sso.cookie()...); st != http.StatusForbidden {
		t.Fatalf("member changing SSO-required: %d", st)
	}
}
