package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/apitest"
)

// scimCall is one SCIM request with the organization's token; it answers
// the status and the decoded body.
func (s *Stack) scimCall(t *testing.T, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	status, answer := call(t, s.Client, method, s.APIURL+"/api/auth/scim/v2"+path, raw,
		"Authorization", "Bearer "+token, "Content-Type", "application/scim+json")
	var out map[string]any
	if len(answer) > 0 {
		if err := json.Unmarshal(answer, &out); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, status, answer)
		}
	}
	return status, out
}

// TestSCIMDeactivationEndsEverySessionAndToken runs against the real
// binaries: an owner generates the organization's SCIM token, the identity
// provider provisions a person, who signs in (their password set in the
// database: SCIM gives none), opens a dashboard session, creates a user API
// token and authorizes an agent. Entra ID's active "False" makes the
// dashboard session, the cut_ token on /api/v2 and the agent token on /v1
// all 401 on their next request; "True" lets the person sign in again
// while none of the old ones work.
func TestSCIMDeactivationEndsEverySessionAndToken(t *testing.T) {
	t.Parallel()
	s := StartStack(t)
	owner := s.newMember(t, "scim-owner")
	ownerCookie := []string{"Cookie", "__Secure-identity.session_token=" + owner.session}
	var generated struct {
		SCIMToken string `json:"scimToken"`
	}
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/scim/generate-token", map[string]any{}, &generated, ownerCookie...); st != http.StatusOK {
		t.Fatalf("generate-token: %d", st)
	}
	email := fmt.Sprintf("provisioned-%d@example.com", time.Now().UnixNano())
	st, created := s.scimCall(t, generated.SCIMToken, http.MethodPost, "/Users", map[string]any{
		"schemas":  []string{"urn:ietf:params:scim:schemas:core:2.0:User"},
		"userName": email, "name": map[string]any{"givenName": "Pro", "familyName": "Visioned"},
		"emails": []any{map[string]any{"value": email, "primary": true, "type": "work"}}, "active": true})
	if st != http.StatusCreated {
		t.Fatalf("provisioning: %d %v", st, created)
	}
	userID := created["id"].(string)
	conn, err := sqlx.Open("postgres", s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec(`UPDATE users SET password_hash = (SELECT password_hash FROM users WHERE email = $2) WHERE id = $1`,
		userID, owner.email); err != nil {
		t.Fatal(err)
	}

	var signedIn struct{ Token string }
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/sign-in/email",
		map[string]string{"email": email, "password": "correct horse battery staple"}, &signedIn); st != http.StatusOK {
		t.Fatalf("sign-in: %d", st)
	}
	cookie := []string{"Cookie", "__Secure-identity.session_token=" + signedIn.Token}
	var userToken struct{ Token string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/user-tokens", map[string]string{"description": "cli"}, &userToken,
		append(cookie, "Idempotency-Key", "scim-token-"+userID)...); st != http.StatusCreated {
		t.Fatalf("user token: %d", st)
	}
	agent, err := apitest.AgentToken(s.Client, s.APIURL, strings.TrimRight(s.MCPURL, "/")+"/mcp", signedIn.Token, owner.orgID)
	if err != nil {
		t.Fatal(err)
	}
	dashboard := browserFrom("127.0.0.29")
	if got := dashboardSignIn(t, s, dashboard, email, "correct horse battery staple"); got != "signed in" {
		t.Fatalf("dashboard sign-in: %s", got)
	}
	sessionStatus := func() int {
		st, _ := call(t, s.Client, http.MethodGet, s.APIURL+"/api/auth/get-session", nil, cookie...)
		return st
	}
	dashboardStatus := func() int {
		st, _ := call(t, dashboard, http.MethodGet, s.DashboardURL+"/organizations", nil)
		return st
	}
	userTokenStatus := func() int {
		st, _ := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/account/details", nil, "Authorization", "Bearer "+userToken.Token)
		return st
	}
	agentStatus := func() int {
		st, _ := call(t, s.Client, http.MethodGet, s.APIURL+"/v1/workspaces", nil, "Authorization", "Bearer "+agent)
		return st
	}
	if sessionStatus() != http.StatusOK || dashboardStatus() != http.StatusOK || userTokenStatus() != http.StatusOK ||
		agentStatus() == http.StatusUnauthorized {
		t.Fatalf("before deactivation: session %d, dashboard %d, user token %d, agent %d",
			sessionStatus(), dashboardStatus(), userTokenStatus(), agentStatus())
	}

	deactivate := func(value string) {
		t.Helper()
		st, body := s.scimCall(t, generated.SCIMToken, http.MethodPatch, "/Users/"+userID, map[string]any{
			"schemas":    []string{"urn:ietf:params:scim:api:messages:2.0:PatchOp"},
			"Operations": []any{map[string]any{"op": "Replace", "path": "active", "value": value}}})
		if st != http.StatusOK || body["active"] != (value == "True") {
			t.Fatalf("active %s: %d %v", value, st, body)
		}
	}
	deactivate("False")
	if sessionStatus() != http.StatusUnauthorized || userTokenStatus() != http.StatusUnauthorized || agentStatus() != http.StatusUnauthorized {
		t.Fatalf("after deactivation: session %d, user token %d, agent %d", sessionStatus(), userTokenStatus(), agentStatus())
	}
	if st := dashboardStatus(); st == http.StatusOK {
		t.Fatal("the dashboard still serves the deactivated person")
	}
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/sign-in/email",
		map[string]string{"email": email, "password": "correct horse battery staple"}, nil); st != http.StatusUnauthorized {
		t.Fatalf("sign-in while deactivated: %d", st)
	}

	deactivate("True")
	if sessionStatus() != http.StatusUnauthorized || userTokenStatus() != http.StatusUnauthorized || agentStatus() != http.StatusUnauthorized {
		t.Fatal("reactivation revived an old session or token")
	}
	var again struct{ Token string }
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/sign-in/email",
		map[string]string{"email": email, "password": "correct horse battery staple"}, &again); st != http.StatusOK {
		t.Fatalf("sign-in after reactivation: %d", st)
	}
	if st, _ := call(t, s.Client, http.MethodGet, s.APIURL+"/api/auth/get-session", nil,
		"Cookie", "__Secure-identity.session_token="+again.Token); st != http.StatusOK {
		t.Fatalf("new session: %d", st)
	}
}
