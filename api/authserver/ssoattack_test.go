package authserver_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/sso/ssotest"
)

// registerOIDC registers an OIDC provider for owner's organization and
// returns its ID.
func registerOIDC(t *testing.T, owner *apitest.User, issuer, clientID, domain string) string {
	t.Helper()
	var prov struct{ ID string }
	owner.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sso/register", Body: map[string]any{
		"type": "oidc", "issuer": issuer, "domains": []string{domain},
		"oidcConfig": map[string]any{"clientId": clientID, "clientSecret": "cairn-test-client-secret"},
	}}).MustStatus(t, http.StatusOK).Data(t, &prov)
	return prov.ID
}

// TestSSORequiredRefusesTheInstanceIdP: a member of an organization that
// requires SSO cannot sign in through the instance IdP instead of the
// organization's provider (the organization's IdP may have disabled them),
// and nothing is linked or started; its owner can, and the organization's
// own provider still signs the member in.
func TestSSORequiredRefusesTheInstanceIdP(t *testing.T) {
	t.Parallel()
	env, idp := ssoEnv(t)
	owner := env.WithOrganization("Olive")
	registerOIDC(t, owner, idp.URL, idp.ClientID, "example.com")
	owner.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sso/require",
		Body: map[string]any{"required": true}}).MustStatus(t, http.StatusOK)
	member := env.SignUp("member")
	env.Join(owner, member, "reader")
	if r := env.Anonymous().Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-in/email",
		Body: map[string]string{"email": member.Email, "password": member.Password}}); r.Code() != "SSO_REQUIRED" {
		t.Fatalf("password sign-in while SSO is required: %d %s", r.Status, r.Body)
	}
	sessions := func() int {
		var n int
		if err := env.DB.Get(&n, `SELECT count(*) FROM sessions WHERE user_id = $1`, member.ID); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := sessions()

	idp.SetUser(ssotest.User{Subject: "instance-" + member.Email, Email: member.Email, EmailVerified: true})
	back := callback(t, startSocial(t, env))
	if back.Query().Get("signInError") != "SSO_REQUIRED" || back.Query().Has("signInCode") || sessions() != before {
		t.Fatalf("the instance IdP signed in a member whose organization requires SSO: %s", back)
	}
	var linked int
	if err := env.DB.Get(&linked, `SELECT count(*) FROM external_identities WHERE user_id = $1`, member.ID); err != nil || linked != 0 {
		t.Fatalf("linked %d identities (%v)", linked, err)
	}

	idp.SetUser(ssotest.User{Subject: "instance-" + owner.Email, Email: owner.Email, EmailVerified: true})
	if back := callback(t, startSocial(t, env)); !back.Query().Has("signInCode") {
		t.Fatalf("the owner was refused: %s", back)
	}
	idp.SetUser(ssotest.User{Subject: "org-" + member.Email, Email: member.Email, EmailVerified: true})
	if back := callback(t, startSSO(t, env, member.Email)); !back.Query().Has("signInCode") {
		t.Fatalf("the organization's provider was refused: %s", back)
	}
}

// TestSignInRefusesTooManyGroups: a provider that asserts more groups
// than any team mapping needs is refused before anything is created or
// synced, and a dry run records the refusal without storing the list.
func TestSignInRefusesTooManyGroups(t *testing.T) {
	t.Parallel()
	env, idp := ssoEnv(t)
	owner := env.WithOrganization("Olive")
	providerID := registerOIDC(t, owner, idp.URL, idp.ClientID, "many.example")
	groups := make([]string, 20_000)
	for i := range groups {
		groups[i] = "g" + strconv.Itoa(i)
	}
	idp.SetUser(ssotest.User{Subject: "many", Email: "many@many.example", EmailVerified: true, Groups: groups})
	back := callback(t, startSSO(t, env, "many@many.example"))
	if back.Query().Get("signInError") != "SSO_TOO_MANY_GROUPS" || back.Query().Has("signInCode") {
		t.Fatalf("sent back to %s", back)
	}
	var n int
	if err := env.DB.Get(&n, `SELECT count(*) FROM users WHERE email = 'many@many.example'`); err != nil || n != 0 {
		t.Fatalf("%d accounts created (%v)", n, err)
	}

	var start struct{ URL string }
	owner.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sso/test", Body: map[string]string{
		"providerId": providerID, "callbackURL": env.Config.DashboardURL + "/done", "clientBinding": bindingHash()}}).
		MustStatus(t, http.StatusOK).Data(t, &start)
	resp, err := noFollow.Get(start.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	test := callback(t, resp.Header.Get("Location")).Query().Get("ssoTest")
	var result struct {
		Groups []string
		Error  string
	}
	owner.Get("/api/auth/sso/test-result?id="+test).MustStatus(t, http.StatusOK).Data(t, &result)
	if result.Error == "" || len(result.Groups) > 1000 {
		t.Fatalf("dry run: error %q, %d groups stored", result.Error, len(result.Groups))
	}
}

// TestIdPResponsesAreBounded: an organization's provider whose discovery
// document never ends is read only up to a bound, and the sign-in is
// refused instead of holding the whole answer in memory.
func TestIdPResponsesAreBounded(t *testing.T) {
	t.Parallel()
	var written atomic.Int64
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(strings.Repeat(" ", 64<<10))
		for written.Load() < 64<<20 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(huge.Close)
	env, _ := ssoEnv(t)
	owner := env.WithOrganization("Olive")
	registerOIDC(t, owner, huge.URL, "c", "huge.example")
	r := env.Anonymous().Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-in/sso", Body: map[string]string{
		"email": "a@huge.example", "callbackURL": env.Config.DashboardURL + "/done", "clientBinding": bindingHash()}})
	if r.Status < 400 {
		t.Fatalf("sign-in started: %d %s", r.Status, r.Body)
	}
	huge.CloseClientConnections()
	if n := written.Load(); n > 16<<20 {
		t.Fatalf("the API read %d MiB of the provider's discovery document", n>>20)
	}
}
