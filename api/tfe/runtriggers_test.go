package tfe_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// TestRunTriggersThroughTheRemoteBackendAPI walks go-tfe's run-trigger
// calls: a list needs its type filter (422 without it), pages with
// totals, includes the workspaces asked for; create reads back
// identically; the workspace itself, a duplicate and a cycle are 422 (the
// cycle named); delete is 204, then the trigger is the ordinary 404.
func TestRunTriggersThroughTheRemoteBackendAPI(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Triggers")
	workspace := func(name string) string {
		return decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces", map[string]any{"data": map[string]any{
			"type": "workspaces", "attributes": map[string]any{"name": name}}}).MustStatus(t, http.StatusCreated)).Data.ID
	}
	dest, first, second := workspace("dest"), workspace("first"), workspace("second")
	create := func(workspaceID, sourceID string) *apitest.Response {
		return u.call(t, http.MethodPost, "/api/v2/workspaces/"+workspaceID+"/run-triggers", map[string]any{"data": map[string]any{
			"type": "run-triggers", "relationships": map[string]any{
				"sourceable": map[string]any{"data": map[string]string{"type": "workspaces", "id": sourceID}}}}})
	}
	created := create(dest, first).MustStatus(t, http.StatusCreated)
	rt := decode(t, created)
	if rt.Data.Type != "run-triggers" || rt.Data.Attributes["sourceable-name"] != "first" || rt.Data.Attributes["workspace-name"] != "dest" {
		t.Fatalf("created: %+v", rt.Data)
	}
	if src, _ := rt.Data.Relationships["sourceable"].Data.(map[string]any); src["id"] != first || src["type"] != "workspaces" {
		t.Fatalf("sourceable: %+v", rt.Data.Relationships)
	}
	if read := u.call(t, http.MethodGet, "/api/v2/run-triggers/"+rt.Data.ID, nil).MustStatus(t, http.StatusOK); string(read.Body) != string(created.Body) {
		t.Fatalf("read differs from create:\n%s\n%s", read.Body, created.Body)
	}
	create(dest, second).MustStatus(t, http.StatusCreated)
	for name, tc := range map[string]struct{ workspace, source, detail string }{
		"self":      {dest, dest, "its own run trigger source"},
		"duplicate": {dest, first, "already has this source"},
		"cycle":     {first, dest, "The run trigger would create a cycle: dest → first → dest."},
	} {
		r := create(tc.workspace, tc.source)
		if d := decode(t, r); r.Status != http.StatusUnprocessableEntity || len(d.Errors) != 1 || !strings.Contains(d.Errors[0].Detail, tc.detail) {
			t.Fatalf("%s: %d %s", name, r.Status, r.Body)
		}
	}

	base := "/api/v2/workspaces/" + dest + "/run-triggers"
	if r := u.call(t, http.MethodGet, base, nil); r.Status != http.StatusUnprocessableEntity ||
		!strings.Contains(string(r.Body), "filter[run-trigger][type]") {
		t.Fatalf("list without its filter: %d %s", r.Status, r.Body)
	}
	var list listDocument
	u.call(t, http.MethodGet, base+"?filter[run-trigger][type]=inbound&include=sourceable", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 2 || list.Meta.Pagination.TotalCount != 2 || len(list.Included) != 2 || list.Included[0].Type != "workspaces" {
		t.Fatalf("inbound with sourceable: %+v", list)
	}
	u.call(t, http.MethodGet, base+"?filter[run-trigger][type]=inbound&page[number]=999&page[size]=100", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 0 || list.Meta.Pagination.CurrentPage != 999 || list.Meta.Pagination.TotalCount != 2 {
		t.Fatalf("page 999: %+v", list)
	}
	u.call(t, http.MethodGet, "/api/v2/workspaces/"+first+"/run-triggers?filter[run-trigger][type]=outbound", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != rt.Data.ID {
		t.Fatalf("first's outbound: %+v", list)
	}

	u.call(t, http.MethodDelete, "/api/v2/run-triggers/"+rt.Data.ID, nil).MustStatus(t, http.StatusNoContent)
	for _, r := range []*apitest.Response{u.call(t, http.MethodGet, "/api/v2/run-triggers/"+rt.Data.ID, nil),
		u.call(t, http.MethodDelete, "/api/v2/run-triggers/"+rt.Data.ID, nil)} {
		if r.Status != http.StatusNotFound {
			t.Fatalf("after delete: %d %s", r.Status, r.Body)
		}
	}
}
