package tfe_test

import (
	"net/http"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// TestOrganizationDefaultExecutionMode walks the CLI's path: an
// organization defaults to remote execution (HCP Terraform's default), so
// a workspace the CLI creates runs managed plans; an admin switches the
// default to local through go-tfe's organization update, later workspaces
// take it, an explicit mode still wins, and a writer cannot change it.
func TestOrganizationDefaultExecutionMode(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Modes")
	base := "/api/v2/organizations/" + u.org
	create := func(name string, attrs map[string]any) document {
		t.Helper()
		attrs["name"] = name
		return decode(t, u.call(t, http.MethodPost, base+"/workspaces",
			map[string]any{"data": map[string]any{"type": "workspaces", "attributes": attrs}}).MustStatus(t, http.StatusCreated))
	}

	org := decode(t, u.call(t, http.MethodGet, base, nil).MustStatus(t, http.StatusOK))
	if org.Data.Attributes["default-execution-mode"] != "remote" {
		t.Fatalf("new organization default = %v", org.Data.Attributes["default-execution-mode"])
	}
	if ws := create("cli", map[string]any{}).Data; ws.Attributes["execution-mode"] != "remote" || ws.Attributes["operations"] != true {
		t.Fatalf("CLI-created workspace: %v", ws.Attributes)
	}

	update := func(token string, attrs map[string]any) *apitest.Response {
		return callWith(t, env, token, http.MethodPatch, base,
			map[string]any{"data": map[string]any{"type": "organizations", "attributes": attrs}})
	}
	if r := update(u.token, map[string]any{"default-execution-mode": "agent"}); r.Status != http.StatusBadRequest {
		t.Fatalf("unknown mode = %d %s", r.Status, r.Body)
	}
	if r := update(u.token, map[string]any{"name": "renamed"}); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("rename = %d %s", r.Status, r.Body)
	}
	updated := decode(t, update(u.token, map[string]any{"default-execution-mode": "local"}).MustStatus(t, http.StatusOK))
	if updated.Data.Attributes["default-execution-mode"] != "local" {
		t.Fatalf("updated: %v", updated.Data.Attributes)
	}
	if ws := create("later", map[string]any{}).Data; ws.Attributes["execution-mode"] != "local" || ws.Attributes["operations"] != false {
		t.Fatalf("workspace after the switch: %v", ws.Attributes)
	}
	if ws := create("explicit", map[string]any{"execution-mode": "remote"}).Data; ws.Attributes["execution-mode"] != "remote" {
		t.Fatalf("explicit mode: %v", ws.Attributes)
	}
	// /v1 reads the same setting and creates workspaces the same way.
	var view struct {
		DefaultExecutionMode string `json:"default_execution_mode"`
	}
	u.Get("/v1/organization").MustStatus(t, http.StatusOK).Data(t, &view)
	if view.DefaultExecutionMode != "local" {
		t.Fatalf("/v1 organization: %+v", view)
	}

	// A writer may create workspaces but not change organization settings.
	w := newCloudUser(t, env, "Writer")
	env.Join(u.User, w.User, "writer")
	var tok struct{ Token string }
	w.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "cli"}).MustStatus(t, http.StatusCreated).Data(t, &tok)
	if r := update(tok.Token, map[string]any{"default-execution-mode": "remote"}); r.Status != http.StatusForbidden {
		t.Fatalf("writer update = %d %s", r.Status, r.Body)
	}
	if r := w.Mutate(http.MethodPatch, "/v1/organization", map[string]string{"default_execution_mode": "remote"}); r.Status != http.StatusForbidden {
		t.Fatalf("writer /v1 update = %d %s", r.Status, r.Body)
	}
	u.Mutate(http.MethodPatch, "/v1/organization", map[string]string{"default_execution_mode": "remote"}).MustStatus(t, http.StatusOK)
	var ws struct {
		ExecutionMode string `json:"execution_mode"`
	}
	var projects []struct{ ID string }
	u.Get("/v1/projects").MustStatus(t, http.StatusOK).Data(t, &projects)
	u.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": projects[0].ID, "name": "native",
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).
		MustStatus(t, http.StatusCreated).Data(t, &ws)
	if ws.ExecutionMode != "remote" {
		t.Fatalf("/v1 workspace without a mode: %+v", ws)
	}
}
