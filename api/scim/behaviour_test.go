package scim_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// signIn gives a provisioned person the password every apitest account
// has (SCIM sets none) and signs them in, answering the status.
func signIn(t *testing.T, h harness, userID, email string) (*apitest.Client, int) {
	t.Helper()
	if _, err := h.env.DB.Exec(`UPDATE users SET password_hash = (SELECT password_hash FROM users WHERE id = $2) WHERE id = $1`,
		userID, h.owner.ID); err != nil {
		t.Fatal(err)
	}
	c := h.env.Anonymous()
	resp := c.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-in/email",
		Body: map[string]string{"email": email, "password": h.owner.Password}})
	if resp.Status == http.StatusOK {
		var out struct{ Token string }
		resp.Data(t, &out)
		c.Token = out.Token
	}
	return c, resp.Status
}

func (h harness) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := h.env.DB.Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

func deactivateOp(value any) map[string]any {
	return map[string]any{"schemas": []string{patchSchema},
		"Operations": []any{map[string]any{"op": "Replace", "path": "active", "value": value}}}
}

// TestEntraStringFalseDeactivatesAndEndsEverything: Entra ID's
// {"op":"Replace","path":"active","value":"False"} bans the person and, in
// the same transaction, deletes their sessions, user API tokens and agent
// grants, so each gets 401 on its next request; the owner still sees them,
// deactivated, arrived by SCIM. "True" lets them sign in again, but no old
// session or token works.
func TestEntraStringFalseDeactivatesAndEndsEverything(t *testing.T) {
	t.Parallel()
	h := setup(t)
	id, email := h.createUser(t, nil)
	person, status := signIn(t, h, id, email)
	if status != http.StatusOK {
		t.Fatalf("sign-in before deactivation: %d", status)
	}
	person.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/set-active",
		Body: map[string]string{"organization_id": h.owner.OrganizationID}}).MustStatus(t, http.StatusOK)
	var tok struct{ Token string }
	person.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "cli"}).
		MustStatus(t, http.StatusCreated).Data(t, &tok)
	agent := (&apitest.User{Client: person, ID: id, Email: email, OrganizationID: h.owner.OrganizationID}).AgentToken()
	// The user token works the remote-backend API, the agent token /v1.
	bearer := func(token string) int {
		path := "/v1/workspaces"
		if strings.HasPrefix(token, "cut_") {
			path = "/api/v2/account/details"
		}
		return h.env.Anonymous().Do(apitest.Request{Method: http.MethodGet, Path: path,
			Header: map[string]string{"Authorization": "Bearer " + token}}).Status
	}
	if st := person.Get("/v1/members").Status; st != http.StatusOK {
		t.Fatalf("session before deactivation: %d", st)
	}
	// A member reaches no workspace, so the agent's read is authenticated
	// and forbidden: what matters is that it is not 401 yet.
	if bearer(tok.Token) != http.StatusOK || bearer(agent) != http.StatusForbidden {
		t.Fatalf("tokens before deactivation: user %d, agent %d", bearer(tok.Token), bearer(agent))
	}

	got := h.do(t, http.MethodPatch, "/Users/"+id, deactivateOp("False")).must(t, http.StatusOK)
	if got.Body["active"] != false {
		t.Fatalf("after \"False\": %s", got.Raw)
	}
	if st := person.Get("/v1/members").Status; st != http.StatusUnauthorized {
		t.Fatalf("session after deactivation: %d", st)
	}
	if bearer(tok.Token) != http.StatusUnauthorized || bearer(agent) != http.StatusUnauthorized {
		t.Fatalf("tokens after deactivation: user %d, agent %d", bearer(tok.Token), bearer(agent))
	}
	if n := h.count(t, `SELECT (SELECT count(*) FROM sessions WHERE user_id = $1) + (SELECT count(*) FROM user_tokens WHERE user_id = $1)
		+ (SELECT count(*) FROM oauth_grants WHERE user_id = $1)`, id); n != 0 {
		t.Fatalf("%d sessions, tokens and grants left", n)
	}
	var reason string
	if err := h.env.DB.Get(&reason, `SELECT banned_reason FROM users WHERE id = $1 AND banned_at IS NOT NULL`, id); err != nil || reason != "Deactivated via SCIM" {
		t.Fatalf("ban: %q %v", reason, err)
	}
	if _, st := signIn(t, h, id, email); st != http.StatusUnauthorized {
		t.Fatalf("sign-in while deactivated: %d", st)
	}
	var members []struct {
		UserID      string `json:"user_id"`
		JoinedVia   string `json:"joinedVia"`
		Deactivated bool   `json:"deactivated"`
	}
	h.owner.Get("/api/auth/organization/list-members").MustStatus(t, http.StatusOK).Data(t, &members)
	found := false
	for _, m := range members {
		if m.UserID == id {
			found = m.JoinedVia == "scim" && m.Deactivated
		}
	}
	if !found {
		t.Fatalf("the owner's member list does not show the deactivated SCIM member: %+v", members)
	}
	if n := h.count(t, `SELECT count(*) FROM audit_events WHERE action = 'scim.user_deactivated' AND target_id = $1
		AND (evidence->>'ended_sessions')::int = 1 AND (evidence->>'revoked_agent_grants')::int = 1`, id); n != 1 {
		t.Fatalf("%d deactivation events with the counts", n)
	}

	got = h.do(t, http.MethodPatch, "/Users/"+id, deactivateOp("True")).must(t, http.StatusOK)
	if got.Body["active"] != true {
		t.Fatalf("after \"True\": %s", got.Raw)
	}
	if st := person.Get("/v1/members").Status; st != http.StatusUnauthorized {
		t.Fatalf("old session after reactivation: %d", st)
	}
	if bearer(tok.Token) != http.StatusUnauthorized || bearer(agent) != http.StatusUnauthorized {
		t.Fatal("an old token works again after reactivation")
	}
	again, st := signIn(t, h, id, email)
	if st != http.StatusOK || again.Get("/v1/members").Status != http.StatusOK {
		t.Fatalf("sign-in after reactivation: %d", st)
	}
}

// TestDuplicateCreateIsUniquenessWithoutLinking: an e-mail that already
// has an account (provisioned here, or someone who signed up) and a
// userName in use are 409 uniqueness, and nothing is created or linked.
func TestDuplicateCreateIsUniquenessWithoutLinking(t *testing.T) {
	t.Parallel()
	h := setup(t)
	_, email := h.createUser(t, nil)
	outsider := h.env.SignUp("Outsider")
	before := h.count(t, `SELECT count(*) FROM users`)
	for _, body := range []map[string]any{
		{"userName": "other-name", "emails": []any{map[string]any{"value": email, "primary": true}}},
		{"userName": email, "emails": []any{map[string]any{"value": "fresh@example.com", "primary": true}}},
		{"userName": strings.ToUpper(email), "emails": []any{map[string]any{"value": "fresh2@example.com"}}},
		{"userName": outsider.Email},
	} {
		body["schemas"] = []string{userSchema}
		got := h.do(t, http.MethodPost, "/Users", body).must(t, http.StatusConflict)
		if got.Body["scimType"] != "uniqueness" || got.Body["status"] != "409" {
			t.Fatalf("duplicate: %s", got.Raw)
		}
	}
	if after := h.count(t, `SELECT count(*) FROM users`); after != before {
		t.Fatalf("users %d → %d", before, after)
	}
	if n := h.count(t, `SELECT count(*) FROM memberships WHERE user_id = $1`, outsider.ID); n != 0 {
		t.Fatal("the existing account was linked into the organization")
	}
}

// TestFiltersAndPaging: eq, co, sw, pr, and, or on the attributes clients
// filter by; a filter with no hits is an empty ListResponse with
// "Resources": []; count is capped.
func TestFiltersAndPaging(t *testing.T) {
	t.Parallel()
	h := setup(t)
	a, emailA := h.createUser(t, map[string]any{"externalId": "ext-A", "displayName": "Alice Able"})
	b, _ := h.createUser(t, map[string]any{"externalId": "ext-B", "displayName": "Bob Baker"})
	h.do(t, http.MethodPatch, "/Users/"+b, deactivateOp(false)).must(t, http.StatusOK)
	for _, c := range []struct {
		filter string
		want   []string
	}{
		{`userName eq "` + emailA + `"`, []string{a}},
		{`userName eq "` + strings.ToUpper(emailA) + `"`, []string{a}},
		{`externalId eq "ext-B"`, []string{b}},
		{`externalId eq "EXT-B"`, nil},
		{`emails.value eq "` + emailA + `"`, []string{a}},
		{`emails[type eq "work" and value eq "` + emailA + `"]`, []string{a}},
		{`displayName co "baker"`, []string{b}},
		{`displayName sw "Ali"`, []string{a}},
		{`externalId pr`, []string{a, b}},
		{`active eq false`, []string{b}},
		{`active eq true and displayName co "a"`, []string{a}},
		{`externalId eq "ext-A" or externalId eq "ext-B"`, []string{a, b}},
		{`userName eq "nobody@example.com"`, nil},
	} {
		got := h.do(t, http.MethodGet, "/Users?filter="+queryEscape(c.filter), nil).must(t, http.StatusOK)
		var ids []string
		for _, r := range listOf(got.Body["Resources"]) {
			ids = append(ids, r.(map[string]any)["id"].(string))
		}
		if strings.Join(ids, ",") != strings.Join(c.want, ",") || got.Body["totalResults"] != float64(len(c.want)) {
			t.Fatalf("%s: %s, want %v", c.filter, got.Raw, c.want)
		}
		if len(c.want) == 0 && !bytes.Contains(got.Raw, []byte(`"Resources":[]`)) {
			t.Fatalf("%s: an empty result must be an empty ListResponse: %s", c.filter, got.Raw)
		}
	}
	got := h.do(t, http.MethodGet, "/Users?filter="+queryEscape(`title eq "x"`), nil).must(t, http.StatusBadRequest)
	if got.Body["scimType"] != "invalidFilter" {
		t.Fatalf("unsupported filter: %s", got.Raw)
	}
	page := h.do(t, http.MethodGet, "/Users?startIndex=2&count=1", nil).must(t, http.StatusOK)
	if page.Body["totalResults"] != float64(2) || len(listOf(page.Body["Resources"])) != 1 ||
		listOf(page.Body["Resources"])[0].(map[string]any)["id"] != b {
		t.Fatalf("second page: %s", page.Raw)
	}
	capped := h.do(t, http.MethodGet, "/Users?count=5000", nil).must(t, http.StatusOK)
	if capped.Body["itemsPerPage"] != float64(100) {
		t.Fatalf("count is not capped: %s", capped.Raw)
	}
	// A replace that leaves active out keeps the person deactivated.
	put := h.do(t, http.MethodPut, "/Users/"+b, map[string]any{"schemas": []string{userSchema}, "userName": "renamed@example.com",
		"displayName": "Bob Baker"}).must(t, http.StatusOK)
	if put.Body["active"] != false || put.Body["userName"] != "renamed@example.com" {
		t.Fatalf("replace without active: %s", put.Raw)
	}
}

func queryEscape(s string) string {
	r := strings.NewReplacer(" ", "%20", `"`, "%22", "[", "%5B", "]", "%5D", "@", "%40", "+", "%2B")
	return r.Replace(s)
}

// TestOktaSpecTestSteps follows Okta's SCIM 2.0 spec test: list with
// numeric counts and a complete first resource, read by ID, unknown
// userName and unknown ID, create and duplicate, the upper-cased userName
// lookup, Groups, and a bad token answered 401 in SCIM's error schema.
func TestOktaSpecTestSteps(t *testing.T) {
	t.Parallel()
	h := setup(t)
	id, email := h.createUser(t, nil)
	list := h.do(t, http.MethodGet, "/Users?count=1&startIndex=1", nil).must(t, http.StatusOK)
	first := listOf(list.Body["Resources"])[0].(map[string]any)
	name, _ := first["name"].(map[string]any)
	emails := listOf(first["emails"])
	if list.Body["totalResults"] != float64(1) || list.Body["itemsPerPage"] != float64(1) || list.Body["startIndex"] != float64(1) ||
		first["id"] != id || name["givenName"] == nil || name["familyName"] == nil || first["userName"] != email ||
		first["active"] != true || len(emails) != 1 || emails[0].(map[string]any)["value"] != email {
		t.Fatalf("list: %s", list.Raw)
	}
	h.do(t, http.MethodGet, "/Users/"+id, nil).must(t, http.StatusOK)
	none := h.do(t, http.MethodGet, "/Users?filter="+queryEscape(`userName eq "missing@example.com"`), nil).must(t, http.StatusOK)
	if none.Body["totalResults"] != float64(0) {
		t.Fatalf("unknown userName: %s", none.Raw)
	}
	missing := h.do(t, http.MethodGet, "/Users/usr_missing", nil).must(t, http.StatusNotFound)
	if missing.Body["detail"] == nil || missing.Body["status"] != "404" {
		t.Fatalf("unknown ID: %s", missing.Raw)
	}
	created := h.do(t, http.MethodPost, "/Users", map[string]any{"schemas": []string{userSchema}, "userName": "okta.spec@example.com",
		"name":   map[string]any{"givenName": "Okta", "familyName": "Spec"},
		"emails": []any{map[string]any{"value": "okta.spec@example.com", "primary": true}}}).must(t, http.StatusCreated)
	if created.Body["active"] != true {
		t.Fatalf("created: %s", created.Raw)
	}
	h.do(t, http.MethodPost, "/Users", map[string]any{"schemas": []string{userSchema}, "userName": "okta.spec@example.com"}).
		must(t, http.StatusConflict)
	upper := h.do(t, http.MethodGet, "/Users?filter="+queryEscape(`userName eq "OKTA.SPEC@EXAMPLE.COM"`), nil).must(t, http.StatusOK)
	if upper.Body["totalResults"] != float64(1) {
		t.Fatalf("upper-cased userName: %s", upper.Raw)
	}
	h.do(t, http.MethodGet, "/Groups?startIndex=1&count=100", nil).must(t, http.StatusOK)
	for _, token := range []string{"cscim_wrong", "", "not-a-scim-token"} {
		bad := scimCall(t, h.env, token, http.MethodGet, "/Users", nil).must(t, http.StatusUnauthorized)
		if bad.Body["status"] != "401" || !strings.Contains(string(bad.Raw), "urn:ietf:params:scim:api:messages:2.0:Error") {
			t.Fatalf("bad token: %s", bad.Raw)
		}
	}
	for _, path := range []string{"/ServiceProviderConfig", "/Schemas", "/ResourceTypes"} {
		h.do(t, http.MethodGet, path, nil).must(t, http.StatusOK)
	}
}

// TestOtherOrganizationsAreMissing: one organization's token neither sees
// nor changes another's provisioned people or teams (404 as for a missing
// one, never in a list), cannot add them to its groups, and never sees
// or changes an owners team.
func TestOtherOrganizationsAreMissing(t *testing.T) {
	t.Parallel()
	h := setup(t)
	other := h.env.WithOrganization("Other")
	theirs := harness{env: h.env, owner: other, token: generateToken(t, other)}
	userID, _ := theirs.createUser(t, nil)
	groupID := theirs.do(t, http.MethodPost, "/Groups", map[string]any{"schemas": []string{groupSchema}, "displayName": "theirs"}).
		must(t, http.StatusCreated).id(t)
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/Users/" + userID, nil},
		{http.MethodPatch, "/Users/" + userID, deactivateOp(false)},
		{http.MethodPut, "/Users/" + userID, map[string]any{"schemas": []string{userSchema}, "userName": "taken@example.com"}},
		{http.MethodDelete, "/Users/" + userID, nil},
		{http.MethodGet, "/Groups/" + groupID, nil},
		{http.MethodPatch, "/Groups/" + groupID, map[string]any{"schemas": []string{patchSchema},
			"Operations": []any{map[string]any{"op": "replace", "path": "displayName", "value": "mine"}}}},
		{http.MethodDelete, "/Groups/" + groupID, nil},
	} {
		got := h.do(t, c.method, c.path, c.body)
		missing := h.do(t, c.method, strings.Replace(strings.Replace(c.path, userID, "usr_missing", 1), groupID, "team_missing", 1), c.body)
		if got.Status != http.StatusNotFound || missing.Status != http.StatusNotFound || got.Body["scimType"] != missing.Body["scimType"] {
			t.Fatalf("%s %s: %d %s, missing one %d", c.method, c.path, got.Status, got.Raw, missing.Status)
		}
	}
	if list := h.do(t, http.MethodGet, "/Users", nil).must(t, http.StatusOK); list.Body["totalResults"] != float64(0) {
		t.Fatalf("users of another organization listed: %s", list.Raw)
	}
	mine := h.do(t, http.MethodPost, "/Groups", map[string]any{"schemas": []string{groupSchema}, "displayName": "mine"}).
		must(t, http.StatusCreated).id(t)
	add := h.do(t, http.MethodPatch, "/Groups/"+mine, map[string]any{"schemas": []string{patchSchema},
		"Operations": []any{map[string]any{"op": "add", "path": "members", "value": []any{map[string]any{"value": userID}}}}})
	if add.Status != http.StatusBadRequest || add.Body["scimType"] != "invalidValue" {
		t.Fatalf("adding another organization's person: %d %s", add.Status, add.Raw)
	}
	if n := theirs.count(t, `SELECT count(*) FROM users WHERE id = $1 AND banned_at IS NULL`, userID); n != 1 {
		t.Fatal("another organization's person was deactivated")
	}
	groups := h.do(t, http.MethodGet, "/Groups", nil).must(t, http.StatusOK)
	for _, r := range listOf(groups.Body["Resources"]) {
		if name := r.(map[string]any)["displayName"]; name != "mine" {
			t.Fatalf("group %v listed", name)
		}
	}
	var owners string
	if err := h.env.DB.Get(&owners, `SELECT id FROM teams WHERE organization_id = $1 AND owners`, h.owner.OrganizationID); err != nil {
		t.Fatal(err)
	}
	h.do(t, http.MethodGet, "/Groups/"+owners, nil).must(t, http.StatusNotFound)
	h.do(t, http.MethodDelete, "/Groups/"+owners, nil).must(t, http.StatusNotFound)
	h.do(t, http.MethodPatch, "/Groups/"+owners, map[string]any{"schemas": []string{patchSchema},
		"Operations": []any{map[string]any{"op": "remove", "path": "members"}}}).must(t, http.StatusNotFound)
	if n := h.count(t, `SELECT count(*) FROM team_members WHERE team_id = $1`, owners); n != 1 {
		t.Fatalf("owners team has %d members", n)
	}
}

// TestTokenIsTheOwnersAndReplaced: only an owner generates or reads the
// token's status; a new token replaces the old at once; the use is
// recorded; generation is audited.
func TestTokenIsTheOwnersAndReplaced(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := env.WithOrganization("Owner")
	var status struct {
		Exists     bool    `json:"exists"`
		CreatedAt  *string `json:"createdAt"`
		LastUsedAt *string `json:"lastUsedAt"`
	}
	owner.Get("/api/auth/scim/token").MustStatus(t, http.StatusOK).Data(t, &status)
	if status.Exists {
		t.Fatal("a token exists before any was generated")
	}
	admin := env.SignUp("Admin")
	env.Join(owner, admin, "admin")
	admin.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/scim/generate-token", Body: map[string]any{}}).
		MustStatus(t, http.StatusForbidden)
	admin.Get("/api/auth/scim/token").MustStatus(t, http.StatusForbidden)
	first := generateToken(t, owner)
	scimCall(t, env, first, http.MethodGet, "/Users", nil).must(t, http.StatusOK)
	owner.Get("/api/auth/scim/token").MustStatus(t, http.StatusOK).Data(t, &status)
	if !status.Exists || status.CreatedAt == nil || status.LastUsedAt == nil {
		t.Fatalf("status after use: %+v", status)
	}
	second := generateToken(t, owner)
	scimCall(t, env, first, http.MethodGet, "/Users", nil).must(t, http.StatusUnauthorized)
	scimCall(t, env, second, http.MethodGet, "/Users", nil).must(t, http.StatusOK)
	var n int
	if err := env.DB.Get(&n, `SELECT count(*) FROM audit_events WHERE action = 'scim.token_generated' AND organization_id = $1`,
		owner.OrganizationID); err != nil || n != 2 {
		t.Fatalf("%d token events (%v)", n, err)
	}
	var hash []byte
	if err := env.DB.Get(&hash, `SELECT token_hash FROM scim_tokens WHERE organization_id = $1`, owner.OrganizationID); err != nil ||
		bytes.Contains(hash, []byte(second)) {
		t.Fatal("the token is stored in the clear")
	}
}

// TestBodiesAreBoundedAndTyped: a body over 1 MiB is 413 before it is
// read, and one that is not JSON is 415, both in SCIM's error schema and
// creating nothing.
func TestBodiesAreBoundedAndTyped(t *testing.T) {
	t.Parallel()
	h := setup(t)
	huge := []byte(`{"schemas":["` + userSchema + `"],"userName":"big@example.com","displayName":"` + strings.Repeat("x", 1<<20) + `"}`)
	big := h.do(t, http.MethodPost, "/Users", huge)
	if big.Status != http.StatusRequestEntityTooLarge || big.Body["status"] != "413" {
		t.Fatalf("large body: %d %s", big.Status, big.Raw)
	}
	plain := h.env.Anonymous().Do(apitest.Request{Method: http.MethodPost, Path: scimBase + "/Users",
		Body:   []byte(`{"schemas":["` + userSchema + `"],"userName":"plain@example.com"}`),
		Header: map[string]string{"Authorization": "Bearer " + h.token, "Content-Type": "text/plain"}})
	if plain.Status != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain: %d %s", plain.Status, plain.Body)
	}
	json := h.env.Anonymous().Do(apitest.Request{Method: http.MethodPost, Path: scimBase + "/Users",
		Body:   []byte(`{"schemas":["` + userSchema + `"],"userName":"json@example.com"}`),
		Header: map[string]string{"Authorization": "Bearer " + h.token, "Content-Type": "application/json; charset=utf-8"}})
	if json.Status != http.StatusCreated {
		t.Fatalf("application/json: %d %s", json.Status, json.Body)
	}
	if n := h.count(t, `SELECT count(*) FROM scim_users`); n != 1 {
		t.Fatalf("%d provisioned", n)
	}
}

// TestDeleteEndsMembershipAndDeactivates: DELETE removes the membership and
// deactivates the account as active=false does; the resource is gone and
// the address stays taken (no re-link).
func TestDeleteEndsMembershipAndDeactivates(t *testing.T) {
	t.Parallel()
	h := setup(t)
	id, email := h.createUser(t, nil)
	group := h.do(t, http.MethodPost, "/Groups", map[string]any{"schemas": []string{groupSchema}, "displayName": "Platform",
		"members": []any{map[string]any{"value": id}}}).must(t, http.StatusCreated)
	if got := memberValues(group.Body); len(got) != 1 || got[0] != id {
		t.Fatalf("group members: %s", group.Raw)
	}
	_, _ = signIn(t, h, id, email)
	h.do(t, http.MethodDelete, "/Users/"+id, nil).must(t, http.StatusNoContent)
	h.do(t, http.MethodGet, "/Users/"+id, nil).must(t, http.StatusNotFound)
	if n := h.count(t, `SELECT count(*) FROM memberships WHERE user_id = $1`, id) +
		h.count(t, `SELECT count(*) FROM sessions WHERE user_id = $1`, id) +
		h.count(t, `SELECT count(*) FROM users WHERE id = $1 AND banned_at IS NULL`, id); n != 0 {
		t.Fatalf("%d of membership, sessions, active account left", n)
	}
	h.do(t, http.MethodPost, "/Users", map[string]any{"schemas": []string{userSchema}, "userName": email}).must(t, http.StatusConflict)
	if got := memberValues(h.do(t, http.MethodGet, "/Groups/"+group.id(t), nil).must(t, http.StatusOK).Body); len(got) != 0 {
		t.Fatalf("deleted user still a member: %v", got)
	}
}
