package sso_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/server"
	"github.com/cairnhq/cairn/api/sso"
	"github.com/cairnhq/cairn/api/sso/samltest"
)

// samlSetup is an API server whose owner registered a samlidp running in
// the test as the organization's SAML provider for corp.example.
type samlSetup struct {
	env        *apitest.Env
	owner      *apitest.User
	svc        *sso.Service
	idp        *samltest.IdP
	provider   sso.Provider
	noRedirect *http.Client
}

func newSAMLSetup(t *testing.T, clear bool) *samlSetup {
	t.Helper()
	env := apitest.New(t)
	owner := env.WithOrganization("Owner")
	ctx := context.Background()
	ident, err := identity.NewService(env.DB, server.IdentityOptions(env.Config))
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.NewSealer(env.Config.MasterKeyBytes())
	if err != nil {
		t.Fatal(err)
	}
	// A second instance over the same database and keys, as another API
	// replica would be: the flows it starts finish at the server's ACS.
	svc := sso.NewService(env.DB, ident, server.SSOOptions(env.Config, sealer))
	sso.EnableSAML(svc)
	principal, err := ident.AuthenticateSession(ctx, owner.Token)
	if err != nil {
		t.Fatal(err)
	}
	idp := samltest.Start(t)
	prov, err := svc.Register(ctx, principal, sso.RegisterInput{Type: sso.TypeSAML, Issuer: idp.EntityID(),
		Domains: []string{"corp.example"}, MetadataXML: idp.Metadata(), Mapping: sso.Mapping{Groups: "eduPersonAffiliation"}})
	if err != nil {
		t.Fatal(err)
	}
	md := owner.Get("/api/auth/sso/saml2/sp/metadata?providerId="+url.QueryEscape(prov.ID)).MustStatus(t, http.StatusOK)
	if !strings.Contains(string(md.Body), svc.SPMetadataURL(prov.ID)) || md.Header.Get("Content-Type") != "application/samlmetadata+xml" {
		t.Fatalf("SP metadata: %s %s", md.Header.Get("Content-Type"), md.Body)
	}
	spMetadata := string(md.Body)
	if clear {
		spMetadata = samltest.WithoutEncryption(t, spMetadata)
	}
	idp.TrustSP("cairn", spMetadata)
	for _, name := range []string{"platform", "ops", "finance"} {
		owner.Mutate(http.MethodPost, "/v1/teams", map[string]string{"name": name}).MustStatus(t, http.StatusCreated)
	}
	return &samlSetup{env: env, owner: owner, svc: svc, idp: idp, provider: prov,
		noRedirect: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

const bindingSecret = "the dashboard's browser-bound secret"

func (s *samlSetup) start(t testing.TB, email string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(bindingSecret))
	redirect, err := s.svc.StartSSO(context.Background(), sso.SSOStartInput{Email: email, StartInput: sso.StartInput{
		CallbackURL: s.env.Config.DashboardURL + "/sign-in/complete", ClientBinding: base64.RawURLEncoding.EncodeToString(sum[:])}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(redirect, s.idp.URL+"/sso?") {
		t.Fatalf("sign-in starts at %q", redirect)
	}
	return redirect
}

// acsAnswer is what the ACS answered a posted response.
type acsAnswer struct {
	status   int
	location string
	body     string
}

// post sends the IdP's answer to the ACS as the browser's form would.
func (s *samlSetup) post(t testing.TB, p samltest.Posted) acsAnswer {
	t.Helper()
	res, err := s.noRedirect.PostForm(p.Action, p.Form())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return acsAnswer{res.StatusCode, res.Header.Get("Location"), string(body)}
}

// rows counts everything a sign-in could create.
func (s *samlSetup) rows(t testing.TB) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"users", "memberships", "sessions", "sign_in_codes", "team_members", "external_identities"} {
		var n int
		if err := s.env.DB.Get(&n, `SELECT count(*) FROM `+table); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

func (s *samlSetup) teamsOf(t testing.TB, email string) string {
	t.Helper()
	var names []string
	if err := s.env.DB.Select(&names, `SELECT t.name FROM team_members tm JOIN teams t ON t.id = tm.team_id
		JOIN users u ON u.id = tm.user_id WHERE u.email = $1 ORDER BY t.name`, email); err != nil {
		t.Fatal(err)
	}
	return strings.Join(names, ",")
}

// signedIn checks a 303 to the dashboard and redeems its code.
func (s *samlSetup) signedIn(t testing.TB, a acsAnswer) identity.SignedIn {
	t.Helper()
	callback := s.env.Config.DashboardURL + "/sign-in/complete?"
	if a.status != http.StatusSeeOther || !strings.HasPrefix(a.location, callback) {
		t.Fatalf("ACS answered %+v", a)
	}
	back, _ := url.Parse(a.location)
	res, err := s.svc.RedeemCode(context.Background(), back.Query().Get("signInCode"), bindingSecret)
	if err != nil {
		t.Fatalf("redeeming the sign-in code: %v", err)
	}
	return res
}

func TestSAMLSignInThroughTheACS(t *testing.T) {
	t.Parallel()
	s := newSAMLSetup(t, false)
	alice := samltest.User{Name: "alice", Password: "correct horse", Email: "alice@corp.example", CommonName: "Alice Corp",
		Groups: []string{"platform", "ops, unknown-group"}}
	s.idp.AddUser(alice)
	posted := s.idp.SignIn(s.start(t, alice.Email), alice)
	if samltest.Decode(t, posted.SAMLResponse).Root().FindElement("./EncryptedAssertion") == nil {
		t.Fatal("the IdP did not encrypt the assertion to the certificate in the SP metadata")
	}
	if posted.Action != s.svc.ACSURL(s.provider.ID) {
		t.Fatalf("the IdP posts to %q", posted.Action)
	}
	res := s.signedIn(t, s.post(t, posted))
	if res.User.Email != alice.Email || res.User.Name != "Alice Corp" {
		t.Fatalf("signed in as %+v", res.User)
	}
	if got := s.teamsOf(t, alice.Email); got != "ops,platform" {
		t.Fatalf("teams %q, want ops,platform", got)
	}
	var via string
	if err := s.env.DB.Get(&via, `SELECT joined_via FROM memberships WHERE user_id = $1 AND organization_id = $2`,
		res.User.ID, s.owner.OrganizationID); err != nil || via != "sso" {
		t.Fatalf("membership %q %v", via, err)
	}
	session := s.env.Anonymous()
	session.Token = res.Token
	session.Get("/api/auth/get-session").MustStatus(t, http.StatusOK)

	// The next sign-in follows the IdP's groups: ops is left.
	alice.Groups = []string{"platform"}
	s.idp.AddUser(alice)
	s.signedIn(t, s.post(t, s.idp.SignIn(s.start(t, alice.Email), alice)))
	if got := s.teamsOf(t, alice.Email); got != "platform" {
		t.Fatalf("teams after the groups changed %q, want platform", got)
	}
}

func TestSAMLACSRefusesTheNegativeCorpus(t *testing.T) {
	t.Parallel()
	s := newSAMLSetup(t, true)
	victim := samltest.User{Name: "bob", Password: "hunter22", Email: "bob@corp.example", Groups: []string{"platform"}}
	mallory := samltest.User{Name: "mallory", Password: "tr0ub4dor", Email: "bob@corp.example.evil.com"}
	alice := samltest.User{Name: "alice", Password: "correct horse", Email: "alice@corp.example"}
	for _, u := range []samltest.User{victim, mallory, alice} {
		s.idp.AddUser(u)
	}
	accepted := s.idp.SignIn(s.start(t, alice.Email), alice)
	s.signedIn(t, s.post(t, accepted))
	rig := samltest.Rig{IdP: s.idp, Start: s.start, Victim: victim, Mallory: mallory, Accepted: accepted}
	for _, f := range samltest.Corpus() {
		t.Run(f.Name, func(t *testing.T) {
			forged := f.Forge(t, rig)
			before := s.rows(t)
			a := s.post(t, forged)
			want := `"SAML_RESPONSE_INVALID"`
			if f.FlowSpent {
				want = `"SIGN_IN_STATE_EXPIRED"`
			}
			if a.status != http.StatusBadRequest || a.location != "" || !strings.Contains(a.body, want) {
				t.Fatalf("answered %+v, want a 400 naming %s", a, want)
			}
			if after := s.rows(t); !sameRows(before, after) {
				t.Fatalf("rows changed: %v → %v", before, after)
			}
		})
	}

	t.Run("unsolicited response starts a fresh SP-initiated sign-in", func(t *testing.T) {
		before := s.rows(t)
		a := s.post(t, s.idp.Unsolicited(s.svc.SPMetadataURL(s.provider.ID), victim))
		if a.status != http.StatusSeeOther || !strings.HasPrefix(a.location, s.idp.URL+"/sso?") {
			t.Fatalf("answered %+v, want a 303 to the IdP", a)
		}
		if q, _ := url.Parse(a.location); q.Query().Get("SAMLRequest") == "" || q.Query().Get("RelayState") == "" {
			t.Fatalf("no fresh AuthnRequest in %q", a.location)
		}
		if after := s.rows(t); !sameRows(before, after) {
			t.Fatalf("rows changed: %v → %v", before, after)
		}
	})
}

func sameRows(a, b map[string]int) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}
