package samltest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// Target is a running Cairn API (in the test process or the real binary)
// and an owner of an organization on it: the scenarios below register a
// SAML provider there and sign people in through Cairn's real routes.
type Target struct {
	APIURL       string
	DashboardURL string
	// OwnerToken is the session token of an owner whose active
	// organization is OrganizationID.
	OwnerToken     string
	OrganizationID string
	// DB reads what a sign-in created.
	DB *sqlx.DB
	// LiveDashboard says a real dashboard serves DashboardURL, so the
	// scenarios follow the API's redirects into it.
	LiveDashboard bool
}

// site is a Target with a SAML provider whose IdP runs in the test.
type site struct {
	Target
	idp      *IdP
	provider struct {
		ID            string `json:"id"`
		SPMetadataURL string `json:"spMetadataUrl"`
		SPEntityID    string `json:"spEntityId"`
		ACSURL        string `json:"acsUrl"`
	}
	domain string
	client *http.Client
}

var domains atomic.Int64

// newSite starts an IdP and registers it for a fresh domain; clear gives
// the IdP Cairn's SP metadata without its encryption key.
func newSite(t *testing.T, tg Target, clear bool) *site {
	t.Helper()
	s := &site{Target: tg, idp: Start(t), domain: fmt.Sprintf("corp-%d-%d.example", time.Now().UnixNano(), domains.Add(1)),
		client: &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	st, body := s.call(t, http.MethodPost, "/api/auth/sso/register", map[string]any{
		"type": "saml", "issuer": s.idp.EntityID(), "domains": []string{s.domain},
		"samlConfig": map[string]string{"metadataXml": s.idp.Metadata()},
		"mapping":    map[string]string{"groups": "eduPersonAffiliation"}, "defaultRole": "member",
	}, true)
	if st != http.StatusOK || json.Unmarshal(data(body), &s.provider) != nil || s.provider.ID == "" {
		t.Fatalf("registering the SAML provider: %d %s", st, body)
	}
	if s.provider.SPEntityID != s.provider.SPMetadataURL || s.provider.ACSURL != tg.APIURL+"/api/auth/sso/saml2/sp/acs/"+s.provider.ID {
		t.Fatalf("provider view %+v", s.provider)
	}
	res, err := http.Get(s.provider.SPMetadataURL)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/samlmetadata+xml" ||
		!strings.Contains(string(md), `entityID="`+strings.ReplaceAll(s.provider.SPEntityID, "&", "&amp;")+`"`) {
		t.Fatalf("SP metadata: %d %s %s", res.StatusCode, res.Header.Get("Content-Type"), md)
	}
	if missing, err := http.Get(s.APIURL + "/api/auth/sso/saml2/sp/metadata?providerId=ssop_missing"); err != nil ||
		missing.StatusCode != http.StatusNotFound {
		t.Fatalf("SP metadata of a missing provider: %v %v", missing, err)
	} else {
		missing.Body.Close()
	}
	if clear {
		md = []byte(WithoutEncryption(t, string(md)))
	}
	s.idp.TrustSP("cairn", string(md))
	return s
}

// call sends a JSON request to the API, as the owner when owner is set.
func (s *site) call(t testing.TB, method, path string, body any, owner bool, header ...string) (int, []byte) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, s.APIURL+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	if owner {
		req.Header.Set("Cookie", "__Secure-identity.session_token="+s.OwnerToken)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(res.Body)
	return res.StatusCode, answer
}

func data(body []byte) []byte {
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(body, &env)
	return env.Data
}

func (s *site) createTeams(t *testing.T, names ...string) {
	t.Helper()
	for i, name := range names {
		if st, body := s.call(t, http.MethodPost, "/v1/teams", map[string]string{"name": name}, true,
			"Idempotency-Key", fmt.Sprintf("team-%s-%s-%d", s.provider.ID, name, i)); st != http.StatusCreated {
			t.Fatalf("creating team %s: %d %s", name, st, body)
		}
	}
}

const bindingSecret = "the dashboard's browser-bound secret"

func (s *site) callback() string { return s.DashboardURL + "/sign-in/complete" }

// start begins a sign-in as the dashboard does and returns the IdP URL.
func (s *site) start(t testing.TB, email string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(bindingSecret))
	st, body := s.call(t, http.MethodPost, "/api/auth/sign-in/sso", map[string]string{"email": email,
		"callbackURL": s.callback(), "clientBinding": base64.RawURLEncoding.EncodeToString(sum[:])}, false)
	var out struct {
		URL      string `json:"url"`
		Redirect bool   `json:"redirect"`
	}
	if st != http.StatusOK || json.Unmarshal(data(body), &out) != nil || !out.Redirect || !strings.HasPrefix(out.URL, s.idp.URL+"/sso?") {
		t.Fatalf("sign-in/sso: %d %s", st, body)
	}
	return out.URL
}

// acsAnswer is what the ACS answered a posted response.
type acsAnswer struct {
	Status   int
	Location string
	Body     string
}

// post sends the IdP's answer to the ACS as the browser's form would.
func (s *site) post(t testing.TB, p Posted) acsAnswer {
	t.Helper()
	res, err := s.client.PostForm(p.Action, p.Form())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return acsAnswer{res.StatusCode, res.Header.Get("Location"), string(body)}
}

// signedIn checks the 303 to the dashboard and redeems its code as the
// dashboard would; it returns the session token.
func (s *site) signedIn(t testing.TB, a acsAnswer, email, name string) string {
	t.Helper()
	if a.Status != http.StatusSeeOther || !strings.HasPrefix(a.Location, s.callback()+"?") {
		t.Fatalf("ACS answered %+v", a)
	}
	back, _ := url.Parse(a.Location)
	st, body := s.call(t, http.MethodPost, "/api/auth/sign-in/code", map[string]string{
		"code": back.Query().Get("signInCode"), "clientBinding": bindingSecret}, false)
	var out struct {
		Token string `json:"token"`
		User  struct{ Email, Name string }
	}
	if st != http.StatusOK || json.Unmarshal(data(body), &out) != nil || out.Token == "" || out.User.Email != email || out.User.Name != name {
		t.Fatalf("redeeming the sign-in code: %d %s", st, body)
	}
	return out.Token
}

// rows counts everything a sign-in could create.
func (s *site) rows(t testing.TB) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"users", "memberships", "sessions", "sign_in_codes", "team_members", "external_identities"} {
		var n int
		if err := s.DB.Get(&n, `SELECT count(*) FROM `+table); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

func (s *site) teamsOf(t testing.TB, email string) string {
	t.Helper()
	var names []string
	if err := s.DB.Select(&names, `SELECT t.name FROM team_members tm JOIN teams t ON t.id = tm.team_id
		JOIN users u ON u.id = tm.user_id WHERE u.email = $1 AND tm.organization_id = $2 ORDER BY t.name`,
		email, s.OrganizationID); err != nil {
		t.Fatal(err)
	}
	return strings.Join(names, ",")
}

// SignInScenario signs a new person in through the IdP with an encrypted
// assertion: Cairn creates the account, adds the member just in time with
// the provider's default role, puts them in the teams their groups name,
// and hands the dashboard a code for a working session; their next
// sign-in follows the IdP's groups.
func SignInScenario(t *testing.T, tg Target) {
	s := newSite(t, tg, false)
	s.createTeams(t, "platform", "ops", "finance")
	alice := User{Name: "alice", Password: "correct horse", Email: "alice@" + s.domain, CommonName: "Alice Corp",
		Groups: []string{"platform", "ops, unknown-group"}}
	s.idp.AddUser(alice)
	posted := s.idp.SignIn(s.start(t, alice.Email), alice)
	if Decode(t, posted.SAMLResponse).Root().FindElement("./EncryptedAssertion") == nil {
		t.Fatal("the IdP did not encrypt the assertion to the certificate in Cairn's SP metadata")
	}
	if posted.Action != s.provider.ACSURL {
		t.Fatalf("the IdP posts to %q, want %q", posted.Action, s.provider.ACSURL)
	}
	token := s.signedIn(t, s.post(t, posted), alice.Email, alice.CommonName)
	if got := s.teamsOf(t, alice.Email); got != "ops,platform" {
		t.Fatalf("teams %q, want ops,platform", got)
	}
	var member struct {
		Role      string `db:"role"`
		JoinedVia string `db:"joined_via"`
	}
	if err := s.DB.Get(&member, `SELECT m.role, m.joined_via FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE u.email = $1 AND m.organization_id = $2`, alice.Email, s.OrganizationID); err != nil ||
		member.Role != "member" || member.JoinedVia != "sso" {
		t.Fatalf("membership %+v %v", member, err)
	}
	req, _ := http.NewRequest(http.MethodGet, s.APIURL+"/api/auth/get-session", nil)
	req.Header.Set("Cookie", "__Secure-identity.session_token="+token)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the session does not work: %v %v", res, err)
	}

	alice.Groups = []string{"platform"}
	s.idp.AddUser(alice)
	s.signedIn(t, s.post(t, s.idp.SignIn(s.start(t, alice.Email), alice)), alice.Email, alice.CommonName)
	if got := s.teamsOf(t, alice.Email); got != "platform" {
		t.Fatalf("teams after the IdP's groups changed %q, want platform", got)
	}
}

// CorpusScenario posts every forgery of the negative corpus to the ACS:
// each is a 400 naming why (SAML_RESPONSE_INVALID, or the spent flow's
// SIGN_IN_STATE_EXPIRED) and creates nothing. An unsolicited response is
// answered with a 303 into a fresh SP-initiated sign-in at the IdP, and
// creates nothing either.
func CorpusScenario(t *testing.T, tg Target) {
	s := newSite(t, tg, true)
	s.createTeams(t, "platform")
	victim := User{Name: "bob", Password: "hunter22", Email: "bob@" + s.domain, Groups: []string{"platform"}}
	mallory := User{Name: "mallory", Password: "tr0ub4dor", Email: victim.Email + ".evil.com"}
	alice := User{Name: "alice", Password: "correct horse", Email: "alice@" + s.domain, CommonName: "Alice"}
	for _, u := range []User{victim, mallory, alice} {
		s.idp.AddUser(u)
	}
	accepted := s.idp.SignIn(s.start(t, alice.Email), alice)
	s.signedIn(t, s.post(t, accepted), alice.Email, alice.CommonName)
	rig := Rig{IdP: s.idp, Start: s.start, Victim: victim, Mallory: mallory, Accepted: accepted}
	for _, f := range Corpus() {
		t.Run(f.Name, func(t *testing.T) {
			forged := f.Forge(t, rig)
			before := s.rows(t)
			a := s.post(t, forged)
			want := `"SAML_RESPONSE_INVALID"`
			if f.FlowSpent {
				want = `"SIGN_IN_STATE_EXPIRED"`
			}
			if a.Status != http.StatusBadRequest || a.Location != "" || !strings.Contains(a.Body, want) {
				t.Fatalf("answered %+v, want a 400 naming %s", a, want)
			}
			if after := s.rows(t); fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatalf("rows changed: %v → %v", before, after)
			}
		})
	}
	t.Run("unsolicited response starts a fresh SP-initiated sign-in", func(t *testing.T) {
		before := s.rows(t)
		a := s.post(t, s.idp.Unsolicited(s.provider.SPEntityID, victim))
		if a.Status != http.StatusSeeOther || !strings.Contains(a.Location, "/sign-in/sso?providerId="+s.provider.ID) {
			t.Fatalf("answered %+v, want a 303 to the dashboard's fresh SSO sign-in", a)
		}
		if after := s.rows(t); fmt.Sprint(before) != fmt.Sprint(after) {
			t.Fatalf("rows changed: %v → %v", before, after)
		}
		if !s.LiveDashboard {
			return
		}
		// The dashboard starts the fresh sign-in: a page that moves the
		// browser on to the IdP with a new AuthnRequest.
		resp, err := http.Get(a.Location)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), s.idp.URL+"/sso?") ||
			!strings.Contains(string(page), "SAMLRequest=") {
			t.Fatalf("the dashboard answered %d without moving on to the IdP: %.600s", resp.StatusCode, page)
		}
	})
}
