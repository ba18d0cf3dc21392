package tfe_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

type listDocument struct {
	Data []struct {
		ID            string         `json:"id"`
		Attributes    map[string]any `json:"attributes"`
		Relationships map[string]struct {
			Data any `json:"data"`
		} `json:"relationships"`
	} `json:"data"`
	Included []struct {
		ID         string         `json:"id"`
		Type       string         `json:"type"`
		Attributes map[string]any `json:"attributes"`
	} `json:"included"`
	Meta struct {
		Pagination struct {
			CurrentPage int `json:"current-page"`
			TotalCount  int `json:"total-count"`
		} `json:"pagination"`
	} `json:"meta"`
}

func teamDoc(attrs map[string]any) map[string]any {
	return map[string]any{"data": map[string]any{"type": "teams", "attributes": attrs}}
}

// joinWithToken brings a user into owner's organization with a role and
// returns its user API token there.
func joinWithToken(t *testing.T, env *apitest.Env, owner *cloudUser, name, role string) (*apitest.User, string) {
	t.Helper()
	u := env.SignUp(name)
	env.Join(owner.User, u, role)
	var tok struct{ Token string }
	u.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "cli"}).MustStatus(t, http.StatusCreated).Data(t, &tok)
	return u, tok.Token
}

// TestTeamsThroughTheRemoteBackendAPI walks go-tfe's team calls: the
// owners team exists from the start, a created team reads back exactly as
// created, organization access merges flag by flag, members are added by
// username (the user ID) and by membership ID, and a writer can neither
// create teams nor see a secret team it is not in.
func TestTeamsThroughTheRemoteBackendAPI(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Teams")
	base := "/api/v2/organizations/" + u.org + "/teams"

	ent := decode(t, u.call(t, http.MethodGet, "/api/v2/organizations/"+u.org+"/entitlement-set", nil).MustStatus(t, http.StatusOK))
	if ent.Data.Attributes["teams"] != true {
		t.Fatalf("entitlements: %v", ent.Data.Attributes)
	}
	account := decode(t, u.call(t, http.MethodGet, "/api/v2/account/details", nil).MustStatus(t, http.StatusOK))
	if account.Data.ID != u.ID || account.Data.Attributes["username"] != u.ID || account.Data.Attributes["email"] != u.Email {
		t.Fatalf("account details: %+v", account.Data)
	}

	created := u.call(t, http.MethodPost, base, teamDoc(map[string]any{"name": "platform", "sso-team-id": "grp-1",
		"organization-access": map[string]bool{"manage-policies": true, "manage-modules": true}})).MustStatus(t, http.StatusCreated)
	team := decode(t, created)
	if team.Data.Attributes["visibility"] != "secret" || team.Data.Attributes["sso-team-id"] != "grp-1" ||
		team.Data.Attributes["users-count"] != float64(0) {
		t.Fatalf("created: %v", team.Data.Attributes)
	}
	read := u.call(t, http.MethodGet, "/api/v2/teams/"+team.Data.ID, nil).MustStatus(t, http.StatusOK)
	if string(read.Body) != string(created.Body) {
		t.Fatalf("read differs from create:\n%s\n%s", read.Body, created.Body)
	}
	if r := u.call(t, http.MethodPost, base, teamDoc(map[string]any{"name": "platform"})); r.Status != http.StatusConflict {
		t.Fatalf("duplicate name = %d %s", r.Status, r.Body)
	}

	var list listDocument
	u.call(t, http.MethodGet, base, nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 2 || list.Meta.Pagination.TotalCount != 2 {
		t.Fatalf("list: %+v", list)
	}
	u.call(t, http.MethodGet, base+"?filter[names]=owners", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].Attributes["name"] != "owners" {
		t.Fatalf("filtered: %+v", list)
	}
	u.call(t, http.MethodGet, base+"?q=latfo&page[number]=999", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 0 || list.Meta.Pagination.CurrentPage != 999 || list.Meta.Pagination.TotalCount != 1 {
		t.Fatalf("page 999: %+v", list)
	}

	updated := decode(t, u.call(t, http.MethodPatch, "/api/v2/teams/"+team.Data.ID, teamDoc(map[string]any{
		"name": "foo bar", "visibility": "organization", "organization-access": map[string]bool{"manage-workspaces": true}})).
		MustStatus(t, http.StatusOK))
	flags := updated.Data.Attributes["organization-access"].(map[string]any)
	if updated.Data.Attributes["name"] != "foo bar" || flags["manage-policies"] != true || flags["manage-workspaces"] != true ||
		flags["manage-modules"] != true || flags["manage-vcs-settings"] != false {
		t.Fatalf("merge: %v", updated.Data.Attributes)
	}

	// Members: by username, listed through include=users; by membership ID.
	member, memberToken := joinWithToken(t, env, u, "Member", "member")
	secret := decode(t, u.call(t, http.MethodPost, base, teamDoc(map[string]any{"name": "secret"})).MustStatus(t, http.StatusCreated)).Data.ID
	if r := callWith(t, env, memberToken, http.MethodGet, "/api/v2/teams/"+secret, nil); r.Status != http.StatusNotFound {
		t.Fatalf("secret team seen by a non-member = %d %s", r.Status, r.Body)
	}
	u.call(t, http.MethodPost, "/api/v2/teams/"+secret+"/relationships/users",
		map[string]any{"data": []map[string]string{{"type": "users", "id": member.ID}}}).MustStatus(t, http.StatusNoContent)
	var withUsers listDocument
	var one struct {
		Data struct {
			Relationships map[string]struct {
				Data []struct{ ID string } `json:"data"`
			} `json:"relationships"`
		} `json:"data"`
		Included []struct {
			ID         string         `json:"id"`
			Type       string         `json:"type"`
			Attributes map[string]any `json:"attributes"`
		} `json:"included"`
	}
	callWith(t, env, memberToken, http.MethodGet, "/api/v2/teams/"+secret+"?include=users", nil).MustStatus(t, http.StatusOK).JSON(t, &one)
	if users := one.Data.Relationships["users"].Data; len(users) != 1 || users[0].ID != member.ID ||
		len(one.Included) != 1 || one.Included[0].Attributes["username"] != member.ID {
		t.Fatalf("members: %+v", one)
	}
	if r := u.call(t, http.MethodGet, "/api/v2/teams/"+secret+"?include=users,bogus", nil); r.Status != http.StatusBadRequest ||
		!strings.Contains(string(r.Body), "include parameter") {
		t.Fatalf("bad include = %d %s", r.Status, r.Body)
	}
	ou := one.Data.Relationships["organization-memberships"].Data[0].ID
	u.call(t, http.MethodDelete, "/api/v2/teams/"+secret+"/relationships/organization-memberships",
		map[string]any{"data": []map[string]string{{"type": "organization-memberships", "id": ou}}}).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, base+"?filter[names]=secret&include=users", nil).MustStatus(t, http.StatusOK).JSON(t, &withUsers)
	if len(withUsers.Data) != 1 || len(withUsers.Included) != 0 || withUsers.Data[0].Attributes["users-count"] != float64(0) {
		t.Fatalf("after removal: %+v", withUsers)
	}

	// A writer does not manage teams.
	_, writerToken := joinWithToken(t, env, u, "Writer", "writer")
	if r := callWith(t, env, writerToken, http.MethodPost, base, teamDoc(map[string]any{"name": "mine"})); r.Status != http.StatusForbidden {
		t.Fatalf("writer create = %d %s", r.Status, r.Body)
	}
	// Another organization's team is not found.
	other := newCloudUser(t, env, "Other")
	if r := other.call(t, http.MethodGet, "/api/v2/teams/"+team.Data.ID, nil); r.Status != http.StatusNotFound {
		t.Fatalf("other tenant = %d %s", r.Status, r.Body)
	}

	// The owners team stays.
	var owners listDocument
	u.call(t, http.MethodGet, base+"?filter[names]=owners", nil).MustStatus(t, http.StatusOK).JSON(t, &owners)
	if r := u.call(t, http.MethodDelete, "/api/v2/teams/"+owners.Data[0].ID, nil); r.Status != http.StatusConflict {
		t.Fatalf("delete owners = %d %s", r.Status, r.Body)
	}
	u.call(t, http.MethodDelete, "/api/v2/teams/"+team.Data.ID, nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, "/api/v2/teams/"+team.Data.ID, nil).MustStatus(t, http.StatusNotFound)
}

// TestTeamWorkspaceAccessThroughTheRemoteBackendAPI: a grant's fixed level
// reports its implied attributes, which are read-only (HCP's 422 text), a
// duplicate is refused, custom attributes change, and another
// organization's workspace is not found.
func TestTeamWorkspaceAccessThroughTheRemoteBackendAPI(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Grants")
	teamID := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/teams",
		teamDoc(map[string]any{"name": "ops"})).MustStatus(t, http.StatusCreated)).Data.ID
	ws := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces", map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"name": "app"}}}).MustStatus(t, http.StatusCreated)).Data.ID
	grant := func(token, workspaceID string, attrs map[string]any) *apitest.Response {
		return callWith(t, env, token, http.MethodPost, "/api/v2/team-workspaces", map[string]any{"data": map[string]any{
			"type": "team-workspaces", "attributes": attrs,
			"relationships": map[string]any{
				"team":      map[string]any{"data": map[string]string{"type": "teams", "id": teamID}},
				"workspace": map[string]any{"data": map[string]string{"type": "workspaces", "id": workspaceID}},
			}}})
	}
	r := grant(u.token, ws, map[string]any{"access": "read", "runs": "apply"})
	d := decode(t, r)
	if r.Status != http.StatusUnprocessableEntity || len(d.Errors) != 1 || d.Errors[0].Title != "invalid attribute" ||
		d.Errors[0].Detail != "Runs is read-only when access level is 'read'; use the 'custom' access level to set this attribute." {
		t.Fatalf("read-only attribute = %d %s", r.Status, r.Body)
	}
	created := decode(t, grant(u.token, ws, map[string]any{"access": "admin"}).MustStatus(t, http.StatusCreated))
	a := created.Data.Attributes
	if a["runs"] != "apply" || a["variables"] != "write" || a["state-versions"] != "write" || a["sentinel-mocks"] != "read" ||
		a["workspace-locking"] != true || created.Data.Relationships["workspace"].Data == nil {
		t.Fatalf("admin grant: %+v", created.Data)
	}
	if r := grant(u.token, ws, map[string]any{"access": "read"}); r.Status != http.StatusConflict {
		t.Fatalf("duplicate grant = %d %s", r.Status, r.Body)
	}
	var list listDocument
	u.call(t, http.MethodGet, "/api/v2/team-workspaces?filter[workspace][id]="+ws, nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != created.Data.ID {
		t.Fatalf("list: %+v", list)
	}
	custom := decode(t, u.call(t, http.MethodPatch, "/api/v2/team-workspaces/"+created.Data.ID, map[string]any{"data": map[string]any{
		"type": "team-workspaces", "attributes": map[string]any{"access": "custom", "runs": "plan"}}}).MustStatus(t, http.StatusOK))
	if custom.Data.Attributes["access"] != "custom" || custom.Data.Attributes["runs"] != "plan" {
		t.Fatalf("custom: %v", custom.Data.Attributes)
	}

	// A writer may not grant; another organization's workspace is not found.
	_, writerToken := joinWithToken(t, env, u, "Writer", "writer")
	if r := grant(writerToken, ws, map[string]any{"access": "read"}); r.Status != http.StatusForbidden {
		t.Fatalf("writer grant = %d %s", r.Status, r.Body)
	}
	other := newCloudUser(t, env, "Other")
	foreign := decode(t, other.call(t, http.MethodPost, "/api/v2/organizations/"+other.org+"/workspaces", map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"name": "theirs"}}}).MustStatus(t, http.StatusCreated)).Data.ID
	if r := grant(u.token, foreign, map[string]any{"access": "read"}); r.Status != http.StatusNotFound {
		t.Fatalf("foreign workspace = %d %s", r.Status, r.Body)
	}
	if r := other.call(t, http.MethodGet, "/api/v2/team-workspaces/"+created.Data.ID, nil); r.Status != http.StatusNotFound {
		t.Fatalf("foreign grant read = %d %s", r.Status, r.Body)
	}

	u.call(t, http.MethodDelete, "/api/v2/team-workspaces/"+created.Data.ID, nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodDelete, "/api/v2/team-workspaces/"+created.Data.ID, nil).MustStatus(t, http.StatusNotFound)
}

// TestTeamProjectAccessThroughTheRemoteBackendAPI: custom project and
// workspace attributes round-trip; an invalid value is refused.
func TestTeamProjectAccessThroughTheRemoteBackendAPI(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Projects")
	teamID := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/teams",
		teamDoc(map[string]any{"name": "ops"})).MustStatus(t, http.StatusCreated)).Data.ID
	var project struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "infra"}).MustStatus(t, http.StatusCreated).Data(t, &project)
	projects := []struct{ ID string }{project}
	doc := func(typ string, attrs map[string]any) map[string]any {
		return map[string]any{"data": map[string]any{"type": typ, "attributes": attrs, "relationships": map[string]any{
			"team":    map[string]any{"data": map[string]string{"type": "teams", "id": teamID}},
			"project": map[string]any{"data": map[string]string{"type": "projects", "id": projects[0].ID}},
		}}}
	}
	if r := u.call(t, http.MethodPost, "/api/v2/team-projects", doc("team-projects", map[string]any{"access": "custom",
		"project-access": map[string]string{"teams": "everything"}})); r.Status < 400 || r.Status >= 500 {
		t.Fatalf("invalid teams value = %d %s", r.Status, r.Body)
	}
	created := decode(t, u.call(t, http.MethodPost, "/api/v2/team-projects", doc("team-projects", map[string]any{"access": "custom",
		"project-access":   map[string]string{"settings": "update", "teams": "manage", "variable-sets": "write"},
		"workspace-access": map[string]any{"runs": "apply", "state-versions": "write", "create": true, "locking": true, "move": true}})).
		MustStatus(t, http.StatusCreated))
	pa := created.Data.Attributes["project-access"].(map[string]any)
	wa := created.Data.Attributes["workspace-access"].(map[string]any)
	if pa["settings"] != "update" || pa["teams"] != "manage" || pa["variable-sets"] != "write" || wa["runs"] != "apply" ||
		wa["state-versions"] != "write" || wa["create"] != true || wa["move"] != true || wa["delete"] != false {
		t.Fatalf("custom project grant: %v", created.Data.Attributes)
	}
	read := decode(t, u.call(t, http.MethodGet, "/api/v2/team-projects/"+created.Data.ID, nil).MustStatus(t, http.StatusOK))
	if read.Data.Attributes["workspace-access"].(map[string]any)["locking"] != true {
		t.Fatalf("read: %v", read.Data.Attributes)
	}
	if r := u.call(t, http.MethodPost, "/api/v2/team-projects", doc("team-projects", map[string]any{"access": "read"})); r.Status != http.StatusConflict {
		t.Fatalf("duplicate = %d %s", r.Status, r.Body)
	}
	var list listDocument
	u.call(t, http.MethodGet, "/api/v2/team-projects?filter[project][id]="+projects[0].ID, nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 {
		t.Fatalf("list: %+v", list)
	}
	u.call(t, http.MethodDelete, "/api/v2/team-projects/"+created.Data.ID, nil).MustStatus(t, http.StatusNoContent)
}

// TestUnreachableWorkspaceAnswersAsMissing: a member whose team reads
// outputs in workspace A reads them there, and gets, for workspace B, exactly the answer a missing
// workspace gets, whatever the operation: outputs (a permission it holds
// in A) and force-unlock and update (permissions it holds nowhere) alike.
func TestUnreachableWorkspaceAnswersAsMissing(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Reach")
	member, memberToken := joinWithToken(t, env, u, "Member", "member")
	newWorkspace := func(name string) string {
		return decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces", map[string]any{"data": map[string]any{
			"type": "workspaces", "attributes": map[string]any{"name": name}}}).MustStatus(t, http.StatusCreated)).Data.ID
	}
	a, b := newWorkspace("a"), newWorkspace("b")
	teamID := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/teams",
		teamDoc(map[string]any{"name": "a-team"})).MustStatus(t, http.StatusCreated)).Data.ID
	u.call(t, http.MethodPost, "/api/v2/teams/"+teamID+"/relationships/users", map[string]any{"data": []map[string]string{
		{"type": "users", "id": member.ID}}}).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodPost, "/api/v2/team-workspaces", map[string]any{"data": map[string]any{
		"type": "team-workspaces", "attributes": map[string]any{"access": "custom", "state-versions": "read-outputs"},
		"relationships": map[string]any{
			"team":      map[string]any{"data": map[string]string{"type": "teams", "id": teamID}},
			"workspace": map[string]any{"data": map[string]string{"type": "workspaces", "id": a}},
		}}}).MustStatus(t, http.StatusCreated)

	missing := b[:len(b)-1] + map[bool]string{true: "b", false: "a"}[strings.HasSuffix(b, "a")]
	for _, op := range []struct{ method, path string }{
		{http.MethodGet, "/current-state-version-outputs"},
		{http.MethodPost, "/actions/force-unlock"},
		{http.MethodPatch, ""},
		{http.MethodGet, ""},
	} {
		body := map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"description": "x"}}}
		got := callWith(t, env, memberToken, op.method, "/api/v2/workspaces/"+b+op.path, body)
		want := callWith(t, env, memberToken, op.method, "/api/v2/workspaces/"+missing+op.path, body)
		if got.Status != http.StatusNotFound || want.Status != http.StatusNotFound {
			t.Errorf("%s %s: unreachable %d, missing %d, want both 404", op.method, op.path, got.Status, want.Status)
		}
	}
	// read-outputs reads the current outputs and nothing of the state.
	callWith(t, env, memberToken, http.MethodGet, "/api/v2/workspaces/"+a+"/current-state-version-outputs", nil).MustStatus(t, http.StatusOK)
	callWith(t, env, memberToken, http.MethodGet, "/api/v2/workspaces/"+a+"/current-state-version", nil).MustStatus(t, http.StatusForbidden)
}

// TestWorkspacePermissionsIncludeTeamGrants: what a workspace reports the
// caller may do in it (the CLI refuses to plan or apply on these before it
// asks for a run), and its current state and latest run, follow the
// caller's access in that workspace, team grants included: a member whose
// team has plan may queue runs and read state there, not apply or lock.
func TestWorkspacePermissionsIncludeTeamGrants(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Shown")
	ws := u.uploadedWorkspace(t, "app")
	sv := u.publishState(t, ws, 1, []byte(`{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"lin-1","outputs":{},"resources":[],"check_results":null}`))
	runID := u.newRun(t, ws)
	teamID := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/teams",
		teamDoc(map[string]any{"name": "payments"})).MustStatus(t, http.StatusCreated)).Data.ID
	member, token := joinWithToken(t, env, u, "Member", "member")
	u.call(t, http.MethodPost, "/api/v2/teams/"+teamID+"/relationships/users", map[string]any{"data": []map[string]string{
		{"type": "users", "id": member.ID}}}).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodPost, "/api/v2/team-workspaces", map[string]any{"data": map[string]any{
		"type": "team-workspaces", "attributes": map[string]any{"access": "plan"},
		"relationships": map[string]any{
			"team":      map[string]any{"data": map[string]string{"type": "teams", "id": teamID}},
			"workspace": map[string]any{"data": map[string]string{"type": "workspaces", "id": ws}},
		}}}).MustStatus(t, http.StatusCreated)

	read := decode(t, callWith(t, env, token, http.MethodGet, "/api/v2/workspaces/"+ws, nil).MustStatus(t, http.StatusOK))
	perms, _ := read.Data.Attributes["permissions"].(map[string]any)
	for name, want := range map[string]bool{"can-read-settings": true, "can-queue-run": true, "can-read-state-versions": true,
		"can-queue-apply": false, "can-update": false, "can-lock": false, "can-update-variable": false} {
		if perms[name] != want {
			t.Errorf("%s = %v, want %v (permissions %v)", name, perms[name], want, perms)
		}
	}
	idOf := func(rel string) any {
		d, _ := read.Data.Relationships[rel].Data.(map[string]any)
		return d["id"]
	}
	if idOf("current-state-version") != sv || idOf("latest-run") != runID {
		t.Errorf("current state %v, latest run %v; want %s and %s", idOf("current-state-version"), idOf("latest-run"), sv, runID)
	}
}

// TestReadOutputsGrantReadsOnlyOutputs: a member whose team has custom
// access with state-versions read-outputs reads the current outputs on
// /api/v2 (also as a workspace's included outputs) and a version's outputs
// on /v1, the sensitive one without its value, and is refused the state
// version itself and its body.
func TestReadOutputsGrantReadsOnlyOutputs(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Outputs")
	ws := u.uploadedWorkspace(t, "app")
	sv := u.publishState(t, ws, 1, []byte(`{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"lin-1",`+
		`"outputs":{"region":{"value":"eu-west-1","type":"string"},"secret":{"value":"s3cr3t","type":"string","sensitive":true}},`+
		`"resources":[],"check_results":null}`))
	teamID := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/teams",
		teamDoc(map[string]any{"name": "readers"})).MustStatus(t, http.StatusCreated)).Data.ID
	member, token := joinWithToken(t, env, u, "Member", "member")
	u.call(t, http.MethodPost, "/api/v2/teams/"+teamID+"/relationships/users", map[string]any{"data": []map[string]string{
		{"type": "users", "id": member.ID}}}).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodPost, "/api/v2/team-workspaces", map[string]any{"data": map[string]any{
		"type": "team-workspaces", "attributes": map[string]any{"access": "custom", "state-versions": "read-outputs"},
		"relationships": map[string]any{
			"team":      map[string]any{"data": map[string]string{"type": "teams", "id": teamID}},
			"workspace": map[string]any{"data": map[string]string{"type": "workspaces", "id": ws}},
		}}}).MustStatus(t, http.StatusCreated)

	outputs := func(what string, r *apitest.Response) {
		t.Helper()
		r.MustStatus(t, http.StatusOK)
		body := string(r.Body)
		if strings.Contains(body, "s3cr3t") || !strings.Contains(body, "eu-west-1") || !strings.Contains(body, "secret") {
			t.Errorf("%s: %s", what, body)
		}
	}
	outputs("/api/v2 current outputs", callWith(t, env, token, http.MethodGet, "/api/v2/workspaces/"+ws+"/current-state-version-outputs", nil))
	outputs("/api/v2 workspace with its outputs", callWith(t, env, token, http.MethodGet, "/api/v2/workspaces/"+ws+"?include=outputs", nil))
	outputs("/api/v2 version outputs", callWith(t, env, token, http.MethodGet, "/api/v2/state-versions/"+sv+"/outputs", nil))
	outputs("/v1 version outputs", member.Get("/v1/state-versions/"+sv+"/outputs"))

	for _, path := range []string{"/api/v2/state-versions/" + sv + "/download", "/api/v2/state-versions/" + sv,
		"/api/v2/workspaces/" + ws + "/current-state-version"} {
		callWith(t, env, token, http.MethodGet, path, nil).MustStatus(t, http.StatusForbidden)
	}
	member.Get("/v1/state-versions/"+sv).MustStatus(t, http.StatusForbidden)
	member.Get("/v1/workspaces/"+ws+"/state-versions").MustStatus(t, http.StatusForbidden)
}
