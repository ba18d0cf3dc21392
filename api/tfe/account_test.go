package tfe_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/launch"
)

// accountToken creates an account-wide user token for u and returns its
// ID and plaintext.
func accountToken(t *testing.T, u *apitest.User) (string, string) {
	t.Helper()
	var tok struct {
		ID, Token, Scope string
		OrganizationID   string `json:"organization_id"`
	}
	u.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "everywhere", "scope": "account"}).
		MustStatus(t, http.StatusCreated).Data(t, &tok)
	if tok.Scope != "account" || tok.OrganizationID != "" {
		t.Fatalf("account-wide token: scope %q organization %q", tok.Scope, tok.OrganizationID)
	}
	return tok.ID, tok.Token
}

func organizationNames(t *testing.T, env *apitest.Env, token string) []string {
	t.Helper()
	var list listDocument
	callWith(t, env, token, http.MethodGet, "/api/v2/organizations", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	var names []string
	for _, o := range list.Data {
		names = append(names, o.Attributes["name"].(string))
	}
	slices.Sort(names)
	return names
}

// TestAccountWideTokens: a person's account-wide token acts in exactly the
// organizations the person is a member of, each time as that membership
// (its role, live), creates organizations the person then owns, reads the
// account, and meets another tenant's organization and workspaces exactly
// as missing ones; an organization-bound token still cannot create
// organizations, and a revoked account token is refused.
func TestAccountWideTokens(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	alice := newCloudUser(t, env, "AliceAccount")
	bob := newCloudUser(t, env, "BobAccount")
	bobWorkspace := bob.newWorkspace(t, "bobs")
	tokenID, token := accountToken(t, alice.User)
	aliceOrganization := alice.OrganizationID
	call := func(method, path string, body any) *apitest.Response {
		t.Helper()
		return callWith(t, env, token, method, path, body)
	}

	if got := organizationNames(t, env, token); !slices.Equal(got, []string{alice.org}) {
		t.Fatalf("organizations before = %v, want only %s", got, alice.org)
	}
	account := decode(t, call(http.MethodGet, "/api/v2/account/details", nil).MustStatus(t, http.StatusOK))
	if account.Data.ID != alice.ID || account.Data.Attributes["email"] != alice.Email {
		t.Fatalf("account details: %+v", account.Data)
	}

	// A new organization is the person's own: owner, in it at once.
	created := fmt.Sprintf("acct-%d", time.Now().UnixNano())
	org := decode(t, call(http.MethodPost, "/api/v2/organizations", map[string]any{"data": map[string]any{
		"type": "organizations", "attributes": map[string]any{"name": created, "email": "ops@example.com", "allow-force-delete-workspaces": true}}}).
		MustStatus(t, http.StatusCreated))
	perms, _ := org.Data.Attributes["permissions"].(map[string]any)
	if org.Data.Attributes["allow-force-delete-workspaces"] != true || perms["can-destroy"] != true || perms["can-update"] != true {
		t.Fatalf("created organization: %v", org.Data.Attributes)
	}
	if got := organizationNames(t, env, token); !slices.Contains(got, created) || len(got) != 2 {
		t.Fatalf("organizations after create = %v", got)
	}
	var members listDocument
	call(http.MethodGet, "/api/v2/organizations/"+created+"/organization-memberships", nil).MustStatus(t, http.StatusOK).JSON(t, &members)
	if len(members.Data) != 1 || members.Data[0].Attributes["email"] != alice.Email {
		t.Fatalf("memberships of the new organization: %+v", members.Data)
	}
	call(http.MethodPost, "/api/v2/organizations/"+created+"/workspaces", map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"name": "first"}}}).MustStatus(t, http.StatusCreated)

	// Another tenant's organization and workspace answer exactly as missing
	// ones do.
	for _, path := range []string{"/api/v2/organizations/" + bob.org, "/api/v2/workspaces/" + bobWorkspace,
		"/api/v2/organizations/" + bob.org + "/workspaces/bobs"} {
		missing := strings.Replace(strings.Replace(path, bob.org, "no-such-org", 1), bobWorkspace, "ws-nosuchworkspace0000000000", 1)
		got, want := call(http.MethodGet, path, nil), call(http.MethodGet, missing, nil)
		if got.Status != http.StatusNotFound || withoutRequestID(got.Body) != withoutRequestID(want.Body) {
			t.Fatalf("%s as a stranger = %d %s, a missing one = %d %s", path, got.Status, got.Body, want.Status, want.Body)
		}
	}

	// As a reader of bob's organization the token reads it and cannot
	// write; once the membership goes, so does everything it reached.
	env.Join(bob.User, alice.User, "reader")
	call(http.MethodGet, "/api/v2/workspaces/"+bobWorkspace, nil).MustStatus(t, http.StatusOK)
	if r := call(http.MethodPost, "/api/v2/organizations/"+bob.org+"/workspaces", map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"name": "intruder"}}}); r.Status != http.StatusForbidden && r.Status != http.StatusNotFound {
		t.Fatalf("a reader creating a workspace = %d %s", r.Status, r.Body)
	}
	if r := call(http.MethodDelete, "/api/v2/organizations/"+bob.org, nil); r.Status != http.StatusForbidden {
		t.Fatalf("a reader deleting the organization = %d %s", r.Status, r.Body)
	}
	var bobMembers listDocument
	bob.call(t, http.MethodGet, "/api/v2/organizations/"+bob.org+"/organization-memberships", nil).MustStatus(t, http.StatusOK).JSON(t, &bobMembers)
	for _, m := range bobMembers.Data {
		if m.Attributes["email"] == alice.Email {
			bob.call(t, http.MethodDelete, "/api/v2/organization-memberships/"+m.ID, nil).MustStatus(t, http.StatusNoContent)
		}
	}
	call(http.MethodGet, "/api/v2/workspaces/"+bobWorkspace, nil).MustStatus(t, http.StatusNotFound)
	if got := organizationNames(t, env, token); slices.Contains(got, bob.org) {
		t.Fatalf("organizations after leaving bob's = %v", got)
	}

	// An organization-bound token stays in its organization.
	if r := alice.call(t, http.MethodPost, "/api/v2/organizations", map[string]any{"data": map[string]any{
		"type": "organizations", "attributes": map[string]any{"name": created + "-2", "email": "x@example.com"}}}); r.Status != http.StatusForbidden {
		t.Fatalf("an organization-bound token creating an organization = %d %s", r.Status, r.Body)
	}
	if got := organizationNames(t, env, alice.token); !slices.Equal(got, []string{alice.org}) {
		t.Fatalf("an organization-bound token lists %v", got)
	}

	// The owner deletes the organization it created; a revoked token is
	// refused everywhere.
	call(http.MethodDelete, "/api/v2/organizations/"+created, nil).MustStatus(t, http.StatusNoContent)
	// (Joining bob's organization made it alice's active one, and it is
	// gone: she switches back to her own to manage her tokens.)
	alice.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/set-active", Body: map[string]string{"organization_id": aliceOrganization}}).
		MustStatus(t, http.StatusOK)
	var listed []struct{ ID, Scope string }
	alice.Get("/v1/user-tokens").MustStatus(t, http.StatusOK).Data(t, &listed)
	if !slices.ContainsFunc(listed, func(l struct{ ID, Scope string }) bool { return l.ID == tokenID && l.Scope == "account" }) {
		t.Fatalf("the account-wide token is not among %+v", listed)
	}
	alice.Mutate(http.MethodDelete, "/v1/user-tokens/"+tokenID, nil).MustStatus(t, http.StatusOK)
	call(http.MethodGet, "/api/v2/organizations", nil).MustStatus(t, http.StatusUnauthorized)
}

// TestForceDeleteIsForOwnersUnlessAllowed: with allow-force-delete-workspaces
// off (the default), a workspace admin who is no owner cannot delete a
// workspace that manages resources (409, naming the setting) but can one
// that manages none; once an owner turns the setting on, the admin can.
func TestForceDeleteIsForOwnersUnlessAllowed(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := newCloudUser(t, env, "ForceOwner")
	_, adminToken := joinWithToken(t, env, owner, "ForceAdmin", "admin")
	managing := owner.newWorkspace(t, "managing")
	owner.publishState(t, managing, 1, managingState)
	empty := owner.newWorkspace(t, "empty")

	org := decode(t, owner.call(t, http.MethodGet, "/api/v2/organizations/"+owner.org, nil).MustStatus(t, http.StatusOK))
	if org.Data.Attributes["allow-force-delete-workspaces"] != false {
		t.Fatalf("default allow-force-delete-workspaces = %v", org.Data.Attributes["allow-force-delete-workspaces"])
	}
	r := callWith(t, env, adminToken, http.MethodDelete, "/api/v2/workspaces/"+managing, nil)
	if d := decode(t, r); r.Status != http.StatusConflict || !strings.Contains(d.Errors[0].Detail, "allow-force-delete-workspaces") {
		t.Fatalf("an admin deleting a workspace that manages resources = %d %s", r.Status, r.Body)
	}
	callWith(t, env, adminToken, http.MethodDelete, "/api/v2/workspaces/"+empty, nil).MustStatus(t, http.StatusNoContent)

	// Only a member manager changes the setting.
	setting := map[string]any{"data": map[string]any{"type": "organizations", "attributes": map[string]any{"allow-force-delete-workspaces": true}}}
	updated := decode(t, owner.call(t, http.MethodPatch, "/api/v2/organizations/"+owner.org, setting).MustStatus(t, http.StatusOK))
	if updated.Data.Attributes["allow-force-delete-workspaces"] != true {
		t.Fatalf("updated: %v", updated.Data.Attributes)
	}
	callWith(t, env, adminToken, http.MethodDelete, "/api/v2/workspaces/"+managing, nil).MustStatus(t, http.StatusNoContent)
	owner.call(t, http.MethodGet, "/api/v2/workspaces/"+managing, nil).MustStatus(t, http.StatusNotFound)
}

// TestAnAdminCannotLiftTheOwnersOnlyDelete: allow-force-delete-workspaces
// keeps deleting a workspace that manages resources to owners. A non-owner
// admin must therefore not be able to turn the setting on and then delete
// the workspace: that makes the owners-only rule a no-op.
func TestAnAdminCannotLiftTheOwnersOnlyDelete(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := newCloudUser(t, env, "LiftOwner")
	_, adminToken := joinWithToken(t, env, owner, "LiftAdmin", "admin")
	managing := owner.newWorkspace(t, "managing")
	owner.publishState(t, managing, 1, managingState)
	callWith(t, env, adminToken, http.MethodDelete, "/api/v2/workspaces/"+managing, nil).MustStatus(t, http.StatusConflict)

	setting := map[string]any{"data": map[string]any{"type": "organizations", "attributes": map[string]any{"allow-force-delete-workspaces": true}}}
	r := callWith(t, env, adminToken, http.MethodPatch, "/api/v2/organizations/"+owner.org, setting)
	del := callWith(t, env, adminToken, http.MethodDelete, "/api/v2/workspaces/"+managing, nil)
	if r.Status != http.StatusForbidden || del.Status != http.StatusConflict {
		t.Fatalf("a non-owner admin set allow-force-delete-workspaces = %d %s, then deleted the managing workspace = %d",
			r.Status, r.Body, del.Status)
	}
}

// TestAccountWideTokensPassLaunchControl: with the public gate closed, an
// organization-bound token's GET /organizations and /account/details are
// refused by launch admission (organization-wide subjects never pass); an
// account-wide token's must be too, not answered.
func TestAccountWideTokensPassLaunchControl(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "GateAccount")
	_, account := accountToken(t, u.User)
	applyControl(t, env, "close", 1, launch.Default())
	for _, path := range []string{"/api/v2/organizations", "/api/v2/account/details"} {
		bound := u.call(t, http.MethodGet, path, nil)
		wide := callWith(t, env, account, http.MethodGet, path, nil)
		if bound.Status == http.StatusOK || wide.Status != bound.Status {
			t.Errorf("gate closed: %s as an organization-bound token = %d, as an account-wide one = %d %s",
				path, bound.Status, wide.Status, wide.Body)
		}
	}
}

// TestAnEmptyOrganizationListIsAnArray: a list that matches nothing is
// "data": [] (JSON:API), as it was before the change, not "data": null.
func TestAnEmptyOrganizationListIsAnArray(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "EmptyList")
	_, account := accountToken(t, u.User)
	r := callWith(t, env, account, http.MethodGet, "/api/v2/organizations?q=no-such-organization-zz", nil).MustStatus(t, http.StatusOK)
	if !strings.Contains(string(r.Body), `"data":[]`) {
		t.Fatalf("an empty organization list = %s", r.Body)
	}
}

// TestAnUncountableStateIsNotEmpty: OpenTofu's client-side state
// encryption stores no readable resources; such a state counts as managing
// resources, so neither a non-owner admin's delete nor a safe-delete lets
// the workspace go.
func TestAnUncountableStateIsNotEmpty(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := newCloudUser(t, env, "EncOwner")
	_, adminToken := joinWithToken(t, env, owner, "EncAdmin", "admin")
	managing := owner.newWorkspace(t, "encrypted")
	owner.publishState(t, managing, 1, []byte(`{"serial":1,"lineage":"lin-1","meta":{"key_provider.pbkdf2.main":"e30="},`+
		`"encrypted_data":"Zm9vYmFyYmF6","encryption_version":"v0"}`))
	if r := callWith(t, env, adminToken, http.MethodDelete, "/api/v2/workspaces/"+managing, nil); r.Status != http.StatusConflict {
		t.Fatalf("a non-owner admin deleting a workspace with an encrypted state = %d %s", r.Status, r.Body)
	}
	if r := owner.call(t, http.MethodPost, "/api/v2/workspaces/"+managing+"/actions/safe-delete", nil); r.Status != http.StatusConflict {
		t.Fatalf("safe-deleting a workspace with an encrypted state = %d %s", r.Status, r.Body)
	}
	owner.call(t, http.MethodDelete, "/api/v2/workspaces/"+managing, nil).MustStatus(t, http.StatusNoContent)
}
