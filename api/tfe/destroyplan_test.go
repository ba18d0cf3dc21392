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
