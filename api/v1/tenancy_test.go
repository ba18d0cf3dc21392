package v1_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/dbtest"
)

var usSettings = map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}

type ws struct {
	ID                string `json:"id"`
	Name              string `json:"name"`
	Slug              string `json:"slug"`
	CloudName         string `json:"cloud_name"`
	ProjectID         string `json:"project_id"`
	ExecutionSettings struct {
		Version     int    `json:"version"`
		ToolVersion string `json:"tool_version"`
		Region      string `json:"region"`
	} `json:"execution_settings"`
}

func newProject(t *testing.T, u *apitest.User, name string) string {
	t.Helper()
	var p struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": name}).MustStatus(t, http.StatusCreated).Data(t, &p)
	return p.ID
}

func newWorkspace(t *testing.T, u *apitest.User, projectID, name string) ws {
	t.Helper()
	var w ws
	u.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": projectID, "name": name, "execution_settings": usSettings}).
		MustStatus(t, http.StatusCreated).Data(t, &w)
	return w
}

func TestSignUpToVariableThroughHTTP(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.SignUp("Flow")
	// Sign in again with the password: a second, independent session.
	c := env.Anonymous()
	var signedIn struct{ Token string }
	c.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-in/email",
		Body: map[string]string{"email": u.Email, "password": u.Password}}).MustStatus(t, http.StatusOK).Data(t, &signedIn)
	u.Token = signedIn.Token
	var org struct{ ID, Slug string }
	u.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/create",
		Body: map[string]string{"name": "Flow Inc", "slug": "flow-inc"}}).MustStatus(t, http.StatusOK).Data(t, &org)
	proj := newProject(t, u, "Platform")
	w := newWorkspace(t, u, proj, "Networking: Prod (EU)")
	if w.Slug != "networking-prod-eu" || w.CloudName != "Networking-Prod-EU" || w.ExecutionSettings.Version != 1 {
		t.Fatalf("derived names %+v", w)
	}
	var v struct {
		ID    string
		Value *string
	}
	u.Mutate(http.MethodPost, "/v1/workspaces/"+w.ID+"/variables", map[string]any{"key": "instance_count", "value": "3", "sensitive": false, "hcl": true}).
		MustStatus(t, http.StatusCreated).Data(t, &v)
	var vars []struct {
		Key   string  `json:"key"`
		Value *string `json:"value"`
	}
	u.Get("/v1/workspaces/"+w.ID+"/variables").MustStatus(t, http.StatusOK).Data(t, &vars)
	if len(vars) != 1 || vars[0].Key != "instance_count" || vars[0].Value == nil || *vars[0].Value != "3" {
		t.Fatalf("variables %+v", vars)
	}
	var got ws
	u.Get("/v1/workspaces/"+w.ID).MustStatus(t, http.StatusOK).Data(t, &got)
	if got.ID != w.ID || got.ProjectID != proj {
		t.Fatalf("read back %+v", got)
	}
}

func TestAuthenticationAndTenancyMatrix(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	a := env.WithOrganization("Alice")
	b := env.WithOrganization("Bob")
	aProj := newProject(t, a, "A")
	bProj := newProject(t, b, "B")
	bWS := newWorkspace(t, b, bProj, "bob-ws")
	var bVar struct{ ID string }
	b.Mutate(http.MethodPost, "/v1/workspaces/"+bWS.ID+"/variables", map[string]any{"key": "k", "value": "v", "sensitive": false}).
		MustStatus(t, http.StatusCreated).Data(t, &bVar)
	var bSA struct{ ID string }
	b.Mutate(http.MethodPost, "/v1/service-accounts", map[string]string{"name": "ci"}).MustStatus(t, http.StatusCreated).Data(t, &bSA)

	anon := env.Anonymous()
	bogus := env.Anonymous()
	bogus.Token = "not-a-session"
	noOrg := env.SignUp("Orgless")
	reader := env.SignUp("Reader")
	env.Join(a, reader, "reader")

	type call struct {
		who    *apitest.Client
		req    apitest.Request
		status int
		code   string
	}
	key := map[string]string{"Idempotency-Key": "matrix"}
	withAuth := func(kind string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + kind + "_abcdefghijklmnopqrstuvwxyz", "Idempotency-Key": "matrix"}
	}
	calls := []call{
		{anon, apitest.Request{Method: http.MethodGet, Path: "/v1/workspaces"}, 401, "UNAUTHENTICATED"},
		{bogus, apitest.Request{Method: http.MethodGet, Path: "/v1/workspaces"}, 401, "UNAUTHENTICATED"},
		// Service-account and run tokens are not /v1 credentials, even
		// next to a valid session cookie.
		{a.Client, apitest.Request{Method: http.MethodGet, Path: "/v1/workspaces", Header: withAuth("sst")}, 401, "UNAUTHENTICATED"},
		{a.Client, apitest.Request{Method: http.MethodGet, Path: "/v1/workspaces", Header: withAuth("rat")}, 401, "UNAUTHENTICATED"},
		{noOrg.Client, apitest.Request{Method: http.MethodGet, Path: "/v1/workspaces"}, 403, "FORBIDDEN"},
		{reader.Client, apitest.Request{Method: http.MethodPost, Path: "/v1/projects", Body: map[string]string{"name": "r"}, Header: key}, 403, "FORBIDDEN"},
		{reader.Client, apitest.Request{Method: http.MethodGet, Path: "/v1/audit-events"}, 403, "FORBIDDEN"},
		{reader.Client, apitest.Request{Method: http.MethodGet, Path: "/v1/projects/" + aProj}, 200, ""},
		// Another tenant's resources look exactly like missing ones.
		{a.Client, apitest.Request{Method: http.MethodGet, Path: "/v1/workspaces/" + bWS.ID}, 404, "NOT_FOUND"},
		{a.Client, apitest.Request{Method: http.MethodGet, Path: "/v1/workspaces/ws_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, 404, "NOT_FOUND"},
		{a.Client, apitest.Request{Method: http.MethodGet, Path: "/v1/projects/" + bProj}, 404, "NOT_FOUND"},
		{a.Client, apitest.Request{Method: http.MethodGet, Path: "/v1/workspaces/" + bWS.ID + "/variables"}, 404, "NOT_FOUND"},
		{a.Client, apitest.Request{Method: http.MethodPatch, Path: "/v1/workspaces/" + bWS.ID,
			Body: map[string]any{"execution_settings": usSettings, "name": "stolen"}, Header: key}, 404, "NOT_FOUND"},
		{a.Client, apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + bWS.ID + "/variables",
			Body: map[string]any{"key": "x", "value": "y", "sensitive": false}, Header: map[string]string{"Idempotency-Key": "m2"}}, 404, "NOT_FOUND"},
		{a.Client, apitest.Request{Method: http.MethodPut, Path: "/v1/workspace-variables/" + bVar.ID,
			Body: map[string]any{"value": "z", "sensitive": false}, Header: map[string]string{"Idempotency-Key": "m3"}}, 404, "NOT_FOUND"},
		{a.Client, apitest.Request{Method: http.MethodDelete, Path: "/v1/workspace-variables/" + bVar.ID,
			Header: map[string]string{"Idempotency-Key": "m4"}}, 404, "NOT_FOUND"},
		{a.Client, apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces",
			Body: map[string]any{"project_id": bProj, "name": "intruder", "execution_settings": usSettings}, Header: map[string]string{"Idempotency-Key": "m5"}}, 404, "NOT_FOUND"},
		{a.Client, apitest.Request{Method: http.MethodPost, Path: "/v1/service-accounts/" + bSA.ID + "/tokens",
			Body: map[string]any{"permissions": []string{"run:read"}, "expires_at": time.Now().Add(time.Hour)}, Header: map[string]string{"Idempotency-Key": "m6"}}, 404, "NOT_FOUND"},
	}
	for _, c := range calls {
		resp := c.who.Do(c.req)
		if resp.Status != c.status || resp.Code() != c.code {
			t.Errorf("%s %s = %d %s, want %d %s", c.req.Method, c.req.Path, resp.Status, resp.Body, c.status, c.code)
		}
	}
	// Nothing of Bob's changed.
	var after ws
	b.Get("/v1/workspaces/"+bWS.ID).MustStatus(t, http.StatusOK).Data(t, &after)
	if after.Name != "bob-ws" {
		t.Fatalf("cross-tenant write took effect: %+v", after)
	}
	if n := countRows(t, env, `SELECT count(*) FROM workspace_variables WHERE workspace_id = $1`, bWS.ID); n != 1 {
		t.Fatalf("cross-tenant variable writes took effect: %d variables", n)
	}
}

func TestRevokedSessionAndRemovedMemberLoseAccessAtOnce(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := env.WithOrganization("Owner")
	member := env.SignUp("Member")
	env.Join(owner, member, "writer")
	member.Get("/v1/projects").MustStatus(t, http.StatusOK)

	var members []struct {
		UserID string `json:"user_id"`
	}
	owner.Get("/api/auth/organization/list-members").MustStatus(t, http.StatusOK).Data(t, &members)
	if len(members) != 2 {
		t.Fatalf("members %+v", members)
	}
	owner.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/remove-member",
		Body: map[string]string{"user_id": member.ID}}).MustStatus(t, http.StatusOK)
	if resp := member.Get("/v1/projects"); resp.Status != http.StatusForbidden {
		t.Fatalf("removed member still reads: %d %s", resp.Status, resp.Body)
	}
	// The last owner cannot leave the organization ownerless.
	if resp := owner.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/update-member-role",
		Body: map[string]string{"user_id": owner.ID, "role": "admin"}}); resp.Status != http.StatusConflict || resp.Code() != "LAST_OWNER" {
		t.Fatalf("demoting the last owner = %d %s", resp.Status, resp.Body)
	}

	owner.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-out"}).MustStatus(t, http.StatusOK)
	if resp := owner.Get("/v1/projects"); resp.Status != http.StatusUnauthorized {
		t.Fatalf("signed-out session still works: %d %s", resp.Status, resp.Body)
	}
	if resp := owner.Get("/api/auth/get-session"); resp.Status != http.StatusUnauthorized {
		t.Fatalf("signed-out session still resolves: %d", resp.Status)
	}
}

func TestDuplicateWorkspaceNamesUnderConcurrencyYieldOneWorkspace(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Dup")
	proj := newProject(t, u, "P")
	const racers = 8
	var wg sync.WaitGroup
	statuses := make([]*apitest.Response, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Same name up to case, each request with its own key.
			name := "Shared"
			if i%2 == 1 {
				name = "shared"
			}
			statuses[i] = u.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": proj, "name": name, "execution_settings": usSettings})
		}()
	}
	wg.Wait()
	created := 0
	for _, r := range statuses {
		switch {
		case r.Status == http.StatusCreated:
			created++
		case r.Status == http.StatusConflict && r.Code() == "WORKSPACE_NAME_TAKEN":
		default:
			t.Fatalf("unexpected %d %s", r.Status, r.Body)
		}
	}
	if created != 1 || countRows(t, env, `SELECT count(*) FROM workspaces WHERE organization_id = $1`, u.OrganizationID) != 1 {
		t.Fatalf("%d creations succeeded, want exactly 1", created)
	}
}

func TestRenameKeepsSlugAndCloudNameAndSettingsAreVersioned(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Renamer")
	proj := newProject(t, u, "P")
	w := newWorkspace(t, u, proj, "app")
	other := newWorkspace(t, u, proj, "App!")
	if other.Slug != "app-2" || other.CloudName != "App-2" {
		t.Fatalf("colliding derivations %+v", other)
	}
	var renamed ws
	u.Mutate(http.MethodPatch, "/v1/workspaces/"+w.ID, map[string]any{"name": "application", "execution_settings": usSettings}).
		MustStatus(t, http.StatusOK).Data(t, &renamed)
	if renamed.Name != "application" || renamed.Slug != w.Slug || renamed.CloudName != w.CloudName || renamed.ExecutionSettings.Version != 1 {
		t.Fatalf("rename changed more than the name: %+v", renamed)
	}
	eu := map[string]string{"tool_version": "1.10.6", "region": "eu", "platform": "linux_amd64"}
	var moved ws
	u.Mutate(http.MethodPatch, "/v1/workspaces/"+w.ID, map[string]any{"execution_settings": eu}).MustStatus(t, http.StatusOK).Data(t, &moved)
	if moved.ExecutionSettings.Version != 2 || moved.ExecutionSettings.Region != "eu" || moved.Name != "application" {
		t.Fatalf("settings change %+v", moved)
	}
	if resp := u.Mutate(http.MethodPatch, "/v1/workspaces/"+w.ID, map[string]any{"name": "APP!", "execution_settings": eu}); resp.Code() != "WORKSPACE_NAME_TAKEN" {
		t.Fatalf("rename onto a taken name = %d %s", resp.Status, resp.Body)
	}
	for _, bad := range []map[string]string{
		{"tool_version": "1.10", "region": "us", "platform": "linux_amd64"},
		{"tool_version": "9.9.9", "region": "us", "platform": "linux_amd64"},
		{"tool_version": "1.10.6", "region": "mars", "platform": "linux_amd64"},
		{"tool_version": "1.10.6", "region": "us", "platform": "windows"},
	} {
		// An unlisted tool version is 422 naming the settings that list them.
		if resp := u.Mutate(http.MethodPatch, "/v1/workspaces/"+w.ID, map[string]any{"execution_settings": bad}); resp.Status != http.StatusBadRequest &&
			resp.Code() != "WORKSPACE_TOOL_VERSION_UNLISTED" {
			t.Errorf("settings %v accepted: %d", bad, resp.Status)
		}
	}
	if n := countRows(t, env, `SELECT count(*) FROM workspace_settings_versions WHERE workspace_id = $1`, w.ID); n != 2 {
		t.Fatalf("%d settings versions, want 2", n)
	}
	long := strings.Repeat("Very Long Name ", 13)
	lw := newWorkspace(t, u, proj, long)
	if len(lw.Slug) > 90 || len(lw.CloudName) > 90 || lw.Slug != strings.ToLower(lw.Slug) {
		t.Fatalf("long name derivations %q %q", lw.Slug, lw.CloudName)
	}
}

func TestSensitiveValuesNeverLeaveTheServer(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Secretive")
	w := newWorkspace(t, u, newProject(t, u, "P"), "vault")
	const canary = "canary-3f9a1c7e-do-not-leak"
	var responses []*apitest.Response
	record := func(r *apitest.Response) *apitest.Response { responses = append(responses, r); return r }

	var v struct {
		ID           string  `json:"id"`
		Value        *string `json:"value"`
		ValueVersion int     `json:"value_version"`
		ValueDigest  string  `json:"value_digest"`
	}
	record(u.Mutate(http.MethodPost, "/v1/workspaces/"+w.ID+"/variables",
		map[string]any{"key": "db_password", "value": canary, "sensitive": true, "description": "prod"})).
		MustStatus(t, http.StatusCreated).Data(t, &v)
	if v.Value != nil {
		t.Fatal("sensitive value returned on create")
	}
	record(u.Get("/v1/workspaces/" + w.ID + "/variables"))
	// Replace without a value keeps value, version and digest.
	var kept struct {
		ValueVersion int    `json:"value_version"`
		ValueDigest  string `json:"value_digest"`
	}
	record(u.Mutate(http.MethodPut, "/v1/workspace-variables/"+v.ID, map[string]any{"sensitive": true, "description": "still prod"})).
		MustStatus(t, http.StatusOK).Data(t, &kept)
	if kept.ValueVersion != v.ValueVersion || kept.ValueDigest != v.ValueDigest {
		t.Fatalf("replace without value changed version or digest: %+v vs %+v", kept, v)
	}
	// Changing sensitivity without a value is refused.
	resp := record(u.Mutate(http.MethodPut, "/v1/workspace-variables/"+v.ID, map[string]any{"sensitive": false}))
	if resp.Status != http.StatusBadRequest || resp.Code() != "WORKSPACE_VARIABLE_VALUE_REQUIRED" {
		t.Fatalf("sensitivity change without value = %d %s", resp.Status, resp.Body)
	}
	record(u.Mutate(http.MethodPut, "/v1/workspace-variables/"+v.ID, map[string]any{"sensitive": true, "value": canary + "-2"})).
		MustStatus(t, http.StatusOK).Data(t, &kept)
	if kept.ValueVersion != 2 || kept.ValueDigest == v.ValueDigest {
		t.Fatalf("new value did not advance version and digest: %+v", kept)
	}
	record(u.Get("/v1/audit-events"))
	record(u.Mutate(http.MethodDelete, "/v1/workspace-variables/"+v.ID, nil)).MustStatus(t, http.StatusOK)

	for _, r := range responses {
		if strings.Contains(string(r.Body), canary) {
			t.Fatalf("a response carries the sensitive value: %s", r.Body)
		}
	}
	if strings.Contains(env.Logs.String(), canary) {
		t.Fatal("the logs carry the sensitive value")
	}
	var stored int
	if err := env.DB.Get(&stored, `SELECT count(*) FROM workspace_variables WHERE value LIKE '%canary%' OR position($1::bytea in sealed_value) > 0`,
		[]byte(canary)); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Fatal("the sensitive value is stored in clear")
	}
}

func TestSensitiveVariablesFailClosedWithoutMasterKey(t *testing.T) {
	t.Parallel()
	conn, url := dbtest.NewURL(t)
	env := apitest.Start(t, conn, url, func(s *apitest.Settings) { s.Config.MasterKey = "" })
	u := env.WithOrganization("Keyless")
	w := newWorkspace(t, u, newProject(t, u, "P"), "w")
	resp := u.Mutate(http.MethodPost, "/v1/workspaces/"+w.ID+"/variables", map[string]any{"key": "s", "value": "x", "sensitive": true})
	if resp.Status != http.StatusServiceUnavailable {
		t.Fatalf("sensitive variable without master key = %d %s", resp.Status, resp.Body)
	}
	u.Mutate(http.MethodPost, "/v1/workspaces/"+w.ID+"/variables", map[string]any{"key": "p", "value": "x", "sensitive": false}).
		MustStatus(t, http.StatusCreated)
}

func TestVariableValidation(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Validator")
	w := newWorkspace(t, u, newProject(t, u, "P"), "w")
	path := "/v1/workspaces/" + w.ID + "/variables"
	for name, tc := range map[string]struct {
		body   map[string]any
		status int
		code   string
	}{
		"invalid hcl":       {map[string]any{"key": "a", "value": "{ unclosed", "sensitive": false, "hcl": true}, 400, "WORKSPACE_VARIABLE_HCL_INVALID"},
		"bad key":           {map[string]any{"key": "has space", "value": "x", "sensitive": false}, 400, "VALIDATION_FAILED"},
		"value over 64 KiB": {map[string]any{"key": "big", "value": strings.Repeat("é", 32769), "sensitive": false}, 400, "VALIDATION_FAILED"},
		"unknown field":     {map[string]any{"key": "a", "value": "x", "sensitive": false, "category": "env"}, 400, "VALIDATION_FAILED"},
		"envelope too big":  {map[string]any{"key": "a", "value": "x", "sensitive": false, "description": strings.Repeat("d", 140000)}, 413, "PAYLOAD_TOO_LARGE"},
		"valid hcl":         {map[string]any{"key": "tags", "value": `{ team = "core" }`, "sensitive": false, "hcl": true}, 201, ""},
	} {
		resp := u.Mutate(http.MethodPost, path, tc.body)
		if resp.Status != tc.status || resp.Code() != tc.code {
			t.Errorf("%s: %d %s, want %d %s", name, resp.Status, resp.Body, tc.status, tc.code)
		}
	}
	u.Mutate(http.MethodPost, path, map[string]any{"key": "dup", "value": "1", "sensitive": false}).MustStatus(t, http.StatusCreated)
	if resp := u.Mutate(http.MethodPost, path, map[string]any{"key": "dup", "value": "2", "sensitive": false}); resp.Code() != "WORKSPACE_VARIABLE_KEY_TAKEN" {
		t.Fatalf("duplicate key = %d %s", resp.Status, resp.Body)
	}
}

func TestServiceAccountTokens(t *testing.T) {
	t.Parallel()
	env, admin, proj, w, sa := serviceAccountFixture(t)
	tokens := "/v1/service-accounts/" + sa + "/tokens"

	var issued struct {
		ID          string   `json:"id"`
		Token       string   `json:"token"`
		Permissions []string `json:"permissions"`
		WorkspaceID *string  `json:"workspace_id"`
	}
	admin.Mutate(http.MethodPost, tokens, map[string]any{"permissions": []string{"state:write", "state:read", "workspace:read"},
		"project_id": proj, "workspace_id": w.ID, "expires_at": time.Now().Add(30 * 24 * time.Hour)}).
		MustStatus(t, http.StatusCreated).Data(t, &issued)
	if !strings.HasPrefix(issued.Token, "sst_") || issued.WorkspaceID == nil || *issued.WorkspaceID != w.ID {
		t.Fatalf("issued %+v", issued)
	}
	principal, err := env.Server.V1Services().ServiceAccounts.Authenticate(context.Background(), issued.Token)
	if err != nil || principal.OrganizationID != admin.OrganizationID || principal.WorkspaceID != w.ID {
		t.Fatalf("token authenticates as %+v (%v)", principal, err)
	}
	// That no token is stored in clear anywhere is checked end to end on a
	// dump of the whole database (e2e TestNoBearerSecretAtRestInClear).
	// The token is no /v1 credential.
	resp := env.Anonymous().Do(apitest.Request{Method: http.MethodGet, Path: "/v1/workspaces", Header: map[string]string{"Authorization": "Bearer " + issued.Token}})
	if resp.Status != http.StatusUnauthorized {
		t.Fatalf("sst_ token on /v1 = %d", resp.Status)
	}

	writer := env.SignUp("Writer")
	env.Join(admin, writer, "writer")
	for name, tc := range map[string]struct {
		who    *apitest.User
		body   map[string]any
		status int
	}{
		"beyond a year":           {admin, map[string]any{"permissions": []string{"run:read"}, "expires_at": time.Now().Add(366 * 24 * time.Hour)}, 400},
		"in the past":             {admin, map[string]any{"permissions": []string{"run:read"}, "expires_at": time.Now().Add(-time.Hour)}, 400},
		"unknown permission":      {admin, map[string]any{"permissions": []string{"root"}, "expires_at": time.Now().Add(time.Hour)}, 400},
		"no permissions":          {admin, map[string]any{"permissions": []string{}, "expires_at": time.Now().Add(time.Hour)}, 400},
		"foreign workspace":       {admin, map[string]any{"permissions": []string{"run:read"}, "workspace_id": "ws_aaaaaaaaaaaaaaaaaaaaaaaaaa", "expires_at": time.Now().Add(time.Hour)}, 404},
		"writer cannot issue":     {writer, map[string]any{"permissions": []string{"run:read"}, "expires_at": time.Now().Add(time.Hour)}, 403},
		"mcp scope not grantable": {admin, map[string]any{"permissions": []string{"mcp:tools"}, "expires_at": time.Now().Add(time.Hour)}, 400},
	} {
		if resp := tc.who.Mutate(http.MethodPost, tokens, tc.body); resp.Status != tc.status {
			t.Errorf("%s: %d %s, want %d", name, resp.Status, resp.Body, tc.status)
		}
	}

	admin.Mutate(http.MethodDelete, tokens+"/"+issued.ID, nil).MustStatus(t, http.StatusOK)
	if _, err := env.Server.V1Services().ServiceAccounts.Authenticate(context.Background(), issued.Token); err == nil {
		t.Fatal("revoked token still authenticates")
	}
}

func TestAuditEventsListMutationsNewestFirst(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Auditor")
	proj := newProject(t, u, "P")
	newWorkspace(t, u, proj, "w")
	var events []struct {
		Action    string `json:"action"`
		RequestID string `json:"request_id"`
		Actor     struct{ Type, ID string }
	}
	u.Get("/v1/audit-events").MustStatus(t, http.StatusOK).Data(t, &events)
	want := []string{"workspace.created", "project.created", "organization.created"}
	if len(events) != len(want) {
		t.Fatalf("events %+v", events)
	}
	for i, e := range events {
		if e.Action != want[i] || e.Actor.ID != u.ID || !strings.HasPrefix(e.RequestID, "req_") {
			t.Fatalf("event %d = %+v, want %s by %s", i, e, want[i], u.ID)
		}
	}
	other := env.WithOrganization("Other")
	var otherEvents []any
	other.Get("/v1/audit-events").MustStatus(t, http.StatusOK).Data(t, &otherEvents)
	if len(otherEvents) != 1 {
		t.Fatalf("another organization sees %d events", len(otherEvents))
	}
}
