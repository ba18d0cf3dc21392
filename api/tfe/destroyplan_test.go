package tfe_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// A workspace asking for destroy plans is refused with the reason and the
// fix, on create and on update; false or absent is accepted. Storing false
// silently would leave the tfe provider (allow_destroy_plan defaults to
// true) planning the same change forever.
func TestAllowDestroyPlanIsRefusedNotDropped(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Destroyless")
	base := "/api/v2/organizations/" + u.org + "/workspaces"
	doc := func(attrs map[string]any) map[string]any {
		return map[string]any{"data": map[string]any{"type": "workspaces", "attributes": attrs}}
	}
	refused := func(what string, r *apitest.Response) {
		t.Helper()
		d := decode(t, r)
		if r.Status != http.StatusUnprocessableEntity || len(d.Errors) != 1 ||
			!strings.Contains(d.Errors[0].Detail, "never runs destroy plans") || !strings.Contains(d.Errors[0].Detail, "to false") {
			t.Fatalf("%s = %d %s", what, r.Status, r.Body)
		}
	}

	refused("create", u.call(t, http.MethodPost, base, doc(map[string]any{"name": "wants-destroy", "allow-destroy-plan": true})))
	if r := u.call(t, http.MethodGet, base+"/wants-destroy", nil); r.Status != http.StatusNotFound {
		t.Fatalf("a refused create left a workspace: %d", r.Status)
	}
	ws := decode(t, u.call(t, http.MethodPost, base, doc(map[string]any{"name": "no-destroy", "allow-destroy-plan": false})).
		MustStatus(t, http.StatusCreated)).Data
	if ws.Attributes["allow-destroy-plan"] != false {
		t.Fatalf("created %v", ws.Attributes)
	}
	u.call(t, http.MethodPost, base, doc(map[string]any{"name": "unsaid"})).MustStatus(t, http.StatusCreated)

	refused("update", u.call(t, http.MethodPatch, "/api/v2/workspaces/"+ws.ID, doc(map[string]any{"allow-destroy-plan": true, "terraform-version": "1.10.6"})))
	u.call(t, http.MethodPatch, "/api/v2/workspaces/"+ws.ID, doc(map[string]any{"allow-destroy-plan": false})).MustStatus(t, http.StatusOK)
}

// Safe delete removes a workspace only while it is unlocked and its current
// state manages no resources, answering 409s go-tfe tells apart otherwise.
func TestSafeDeleteKeepsWorkspacesThatManageResources(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Careful")
	base := "/api/v2/organizations/" + u.org + "/workspaces"
	create := func(name string) string {
		return decode(t, u.call(t, http.MethodPost, base, map[string]any{"data": map[string]any{"type": "workspaces",
			"attributes": map[string]any{"name": name}}}).MustStatus(t, http.StatusCreated)).Data.ID
	}
	conflict := func(what, path, detail string) {
		t.Helper()
		r := u.call(t, http.MethodPost, path, nil)
		if d := decode(t, r); r.Status != http.StatusConflict || len(d.Errors) != 1 || !strings.Contains(d.Errors[0].Detail, detail) {
			t.Fatalf("%s = %d %s", what, r.Status, r.Body)
		}
	}

	managing := create("managing")
	u.publishState(t, managing, 1, []byte(`{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"lin-1","outputs":{},`+
		`"resources":[{"mode":"managed","type":"terraform_data","name":"x","provider":"provider[\"terraform.io/builtin/terraform\"]",`+
		`"instances":[{"schema_version":0,"attributes":{"id":"1"}}]}],"check_results":null}`))
	conflict("managing resources", "/api/v2/workspaces/"+managing+"/actions/safe-delete", "still managing resources")
	u.call(t, http.MethodGet, "/api/v2/workspaces/"+managing, nil).MustStatus(t, http.StatusOK)

	locked := create("locked")
	u.call(t, http.MethodPost, "/api/v2/workspaces/"+locked+"/actions/lock", nil).MustStatus(t, http.StatusOK)
	conflict("locked", base+"/locked/actions/safe-delete", "locked")
	u.call(t, http.MethodPost, "/api/v2/workspaces/"+locked+"/actions/unlock", nil).MustStatus(t, http.StatusOK)
	u.call(t, http.MethodPost, base+"/locked/actions/safe-delete", nil).MustStatus(t, http.StatusNoContent)
	if r := u.call(t, http.MethodGet, "/api/v2/workspaces/"+locked, nil); r.Status != http.StatusNotFound {
		t.Fatalf("safe-deleted workspace = %d", r.Status)
	}

	// Empty state is safe: nothing is under management.
	empty := create("empty")
	u.publishState(t, empty, 1, []byte(`{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"lin-1","outputs":{},"resources":[],"check_results":null}`))
	u.call(t, http.MethodPost, "/api/v2/workspaces/"+empty+"/actions/safe-delete", nil).MustStatus(t, http.StatusNoContent)
	if r := u.call(t, http.MethodPost, "/api/v2/workspaces/"+empty+"/actions/safe-delete", nil); r.Status != http.StatusNotFound {
		t.Fatalf("second safe delete = %d", r.Status)
	}
}
