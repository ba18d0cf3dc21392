package tfe_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

func projectDoc(attrs map[string]any) map[string]any {
	return map[string]any{"data": map[string]any{"type": "projects", "attributes": attrs}}
}

// TestProjectsThroughTheRemoteBackendAPI walks go-tfe's project calls:
// create reads back identically, the list (with the Default Project every
// organization has) filters by name and by
// substring and pages, update renames and describes, HCP's name rule
// is HCP's 422, a project holding a workspace cannot be deleted, an empty
// one can (then it is gone), another organization's project is the
// ordinary 404 and a reader may read but not change projects.
func TestProjectsThroughTheRemoteBackendAPI(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Projects")
	base := "/api/v2/organizations/" + u.org + "/projects"

	created := u.call(t, http.MethodPost, base, projectDoc(map[string]any{"name": "infra", "description": "qux"})).
		MustStatus(t, http.StatusCreated)
	proj := decode(t, created)
	if proj.Data.Type != "projects" || proj.Data.Attributes["name"] != "infra" || proj.Data.Attributes["description"] != "qux" {
		t.Fatalf("created: %+v", proj.Data)
	}
	if org, _ := proj.Data.Relationships["organization"].Data.(map[string]any); org["id"] != u.org {
		t.Fatalf("organization relationship: %+v", proj.Data.Relationships)
	}
	read := u.call(t, http.MethodGet, "/api/v2/projects/"+proj.Data.ID, nil).MustStatus(t, http.StatusOK)
	if string(read.Body) != string(created.Body) {
		t.Fatalf("read differs from create:\n%s\n%s", read.Body, created.Body)
	}
	if r := u.call(t, http.MethodPost, base, projectDoc(map[string]any{"name": "infra"})); r.Status != http.StatusConflict {
		t.Fatalf("duplicate name = %d %s", r.Status, r.Body)
	}
	r := u.call(t, http.MethodPost, base, projectDoc(map[string]any{"name": "! / nope"}))
	if d := decode(t, r); r.Status != http.StatusUnprocessableEntity || len(d.Errors) != 1 || d.Errors[0].Title != "invalid attribute" ||
		d.Errors[0].Detail != "Name may only contain letters, numbers, spaces, `-`, and `_`." {
		t.Fatalf("invalid name = %d %s", r.Status, r.Body)
	}
	u.call(t, http.MethodPost, base, projectDoc(map[string]any{"name": "apps"})).MustStatus(t, http.StatusCreated)

	var list listDocument
	u.call(t, http.MethodGet, base, nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	// Default Project came with the organization.
	if !slices.Equal(listNames(list), []string{"apps", "Default Project", "infra"}) || list.Meta.Pagination.TotalCount != 3 {
		t.Fatalf("list: %+v", list)
	}
	u.call(t, http.MethodGet, base+"?filter[names]=infra", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != proj.Data.ID {
		t.Fatalf("filter[names]: %+v", list)
	}
	u.call(t, http.MethodGet, base+"?q=NFR&page[number]=2&page[size]=1", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 0 || list.Meta.Pagination.CurrentPage != 2 || list.Meta.Pagination.TotalCount != 1 {
		t.Fatalf("q, page 2: %+v", list)
	}

	updated := decode(t, u.call(t, http.MethodPatch, "/api/v2/projects/"+proj.Data.ID,
		projectDoc(map[string]any{"name": "new project name", "description": "updated"})).MustStatus(t, http.StatusOK))
	if updated.Data.Attributes["name"] != "new project name" || updated.Data.Attributes["description"] != "updated" {
		t.Fatalf("updated: %v", updated.Data.Attributes)
	}

	// A workspace created in the project names it, and keeps it from
	// being deleted.
	ws := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces", map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"name": "in-project"},
		"relationships": map[string]any{"project": map[string]any{"data": map[string]string{"type": "projects", "id": proj.Data.ID}}},
	}}).MustStatus(t, http.StatusCreated))
	if rel, _ := ws.Data.Relationships["project"].Data.(map[string]any); rel["id"] != proj.Data.ID || rel["type"] != "projects" {
		t.Fatalf("workspace project: %+v", ws.Data.Relationships)
	}
	if r := u.call(t, http.MethodDelete, "/api/v2/projects/"+proj.Data.ID, nil); r.Status != http.StatusConflict {
		t.Fatalf("delete of a project holding a workspace = %d %s", r.Status, r.Body)
	}

	// A reader reads projects and may not change them; another
	// organization finds them missing.
	_, readerToken := joinWithToken(t, env, u, "Reader", "reader")
	callWith(t, env, readerToken, http.MethodGet, "/api/v2/projects/"+proj.Data.ID, nil).MustStatus(t, http.StatusOK)
	if r := callWith(t, env, readerToken, http.MethodPatch, "/api/v2/projects/"+proj.Data.ID,
		projectDoc(map[string]any{"name": "mine"})); r.Status != http.StatusForbidden {
		t.Fatalf("reader update = %d %s", r.Status, r.Body)
	}
	if r := callWith(t, env, readerToken, http.MethodPost, base, projectDoc(map[string]any{"name": "mine"})); r.Status != http.StatusForbidden {
		t.Fatalf("reader create = %d %s", r.Status, r.Body)
	}
	other := newCloudUser(t, env, "Elsewhere")
	for _, m := range []string{http.MethodGet, http.MethodPatch, http.MethodDelete} {
		r := other.call(t, m, "/api/v2/projects/"+proj.Data.ID, projectDoc(map[string]any{"name": "taken"}))
		missing := other.call(t, m, "/api/v2/projects/prj_missing", projectDoc(map[string]any{"name": "taken"}))
		if r.Status != http.StatusNotFound || missing.Status != http.StatusNotFound {
			t.Fatalf("%s of another organization's project = %d %s, missing = %d", m, r.Status, r.Body, missing.Status)
		}
	}
	if r := other.call(t, http.MethodGet, base, nil); r.Status != http.StatusNotFound {
		t.Fatalf("another organization's project list = %d %s", r.Status, r.Body)
	}

	u.call(t, http.MethodGet, base+"?filter[names]=apps", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	u.call(t, http.MethodDelete, "/api/v2/projects/"+list.Data[0].ID, nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, "/api/v2/projects/"+list.Data[0].ID, nil).MustStatus(t, http.StatusNotFound)
	u.call(t, http.MethodDelete, "/api/v2/projects/"+list.Data[0].ID, nil).MustStatus(t, http.StatusNotFound)
}
