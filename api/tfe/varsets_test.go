package tfe_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

func varsetDoc(attrs map[string]any, rels map[string]any) map[string]any {
	data := map[string]any{"type": "varsets", "attributes": attrs}
	if rels != nil {
		data["relationships"] = rels
	}
	return map[string]any{"data": data}
}

func varDoc(attrs map[string]any) map[string]any {
	return map[string]any{"data": map[string]any{"type": "vars", "attributes": attrs}}
}

func refs(typ string, ids ...string) map[string]any {
	data := make([]map[string]string, 0, len(ids))
	for _, id := range ids {
		data = append(data, map[string]string{"type": typ, "id": id})
	}
	return map[string]any{"data": data}
}

// relIDs are the identifiers of a to-many relationship of d.
func relIDs(t *testing.T, d document, name string) []string {
	t.Helper()
	rel, ok := d.Data.Relationships[name]
	if !ok {
		t.Fatalf("no %s relationship: %+v", name, d.Data.Relationships)
	}
	list, _ := rel.Data.([]any)
	ids := make([]string, 0, len(list))
	for _, item := range list {
		ids = append(ids, item.(map[string]any)["id"].(string))
	}
	slices.Sort(ids)
	return ids
}

// newWorkspace creates a workspace through /api/v2 and returns its ID.
func (u *cloudUser) newWorkspace(t *testing.T, name string) string {
	t.Helper()
	return decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces", map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"name": name}}}).MustStatus(t, http.StatusCreated)).Data.ID
}

// TestVariableSetsThroughTheRemoteBackendAPI walks go-tfe's varset calls:
// create echoes its attributes and reads back identically, names are
// unique per organization, the list filters and pages, a set applies to
// and is removed from workspaces and projects (and lists under them), a
// PATCH with a workspaces relationship replaces the list, includes render
// the scope, and stacks and project-owned sets are refused as not
// modelled.
func TestVariableSetsThroughTheRemoteBackendAPI(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Varsets")
	base := "/api/v2/organizations/" + u.org + "/varsets"

	created := u.call(t, http.MethodPost, base, varsetDoc(map[string]any{"name": "defaults", "description": "shared",
		"global": false, "priority": true}, nil)).MustStatus(t, http.StatusCreated)
	set := decode(t, created)
	if a := set.Data.Attributes; set.Data.Type != "varsets" || a["name"] != "defaults" || a["description"] != "shared" ||
		a["global"] != false || a["priority"] != true || !strings.HasPrefix(set.Data.ID, "varset_") {
		t.Fatalf("created: %+v", set.Data)
	}
	if parent, _ := set.Data.Relationships["parent"].Data.(map[string]any); parent["type"] != "organizations" || parent["id"] != u.org {
		t.Fatalf("parent: %+v", set.Data.Relationships["parent"])
	}
	read := u.call(t, http.MethodGet, "/api/v2/varsets/"+set.Data.ID, nil).MustStatus(t, http.StatusOK)
	if string(read.Body) != string(created.Body) {
		t.Fatalf("read differs from create:\n%s\n%s", read.Body, created.Body)
	}
	if r := u.call(t, http.MethodPost, base, varsetDoc(map[string]any{"name": "DEFAULTS", "global": false}, nil)); r.Status < 400 {
		t.Fatalf("a name taken in another case = %d %s", r.Status, r.Body)
	}
	r := u.call(t, http.MethodPost, base, varsetDoc(map[string]any{"name": "long", "global": false,
		"description": strings.Repeat("d", 513)}, nil))
	if d := decode(t, r); r.Status != http.StatusUnprocessableEntity || len(d.Errors) != 1 || !strings.Contains(d.Errors[0].Detail, "512") ||
		d.Errors[0].Meta["request_id"] == "" {
		t.Fatalf("513-character description = %d %s", r.Status, r.Body)
	}
	projectID := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/projects",
		projectDoc(map[string]any{"name": "apps"})).MustStatus(t, http.StatusCreated)).Data.ID
	r = u.call(t, http.MethodPost, base, varsetDoc(map[string]any{"name": "owned", "global": false},
		map[string]any{"parent": map[string]any{"data": map[string]string{"type": "projects", "id": projectID}}}))
	if d := decode(t, r); r.Status != http.StatusUnprocessableEntity || !strings.Contains(d.Errors[0].Detail, "not modelled") {
		t.Fatalf("a project-owned set = %d %s", r.Status, r.Body)
	}
	second := decode(t, u.call(t, http.MethodPost, base, varsetDoc(map[string]any{"name": "apps-only", "global": false},
		map[string]any{"parent": map[string]any{"data": map[string]string{"type": "organizations", "id": u.org}}})).
		MustStatus(t, http.StatusCreated)).Data.ID

	var list listDocument
	u.call(t, http.MethodGet, base, nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 2 || list.Meta.Pagination.TotalCount != 2 || list.Data[0].ID != second {
		t.Fatalf("list: %+v", list)
	}
	u.call(t, http.MethodGet, base+"?q=FAULT", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != set.Data.ID {
		t.Fatalf("q: %+v", list)
	}
	u.call(t, http.MethodGet, base+"?page[number]=999&page[size]=100", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 0 || list.Meta.Pagination.CurrentPage != 999 || list.Meta.Pagination.TotalCount != 2 {
		t.Fatalf("page 999: %+v", list)
	}

	// Apply to two workspaces and a project; remove one workspace.
	ws1, ws2 := u.newWorkspace(t, "one"), u.newWorkspace(t, "two")
	vsPath := "/api/v2/varsets/" + set.Data.ID
	u.call(t, http.MethodPost, vsPath+"/relationships/workspaces", refs("workspaces", ws1, ws2)).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodPost, vsPath+"/relationships/projects", refs("projects", projectID)).MustStatus(t, http.StatusNoContent)
	got := decode(t, u.call(t, http.MethodGet, vsPath, nil).MustStatus(t, http.StatusOK))
	if w := relIDs(t, got, "workspaces"); !slices.Equal(w, sorted(ws1, ws2)) || !slices.Equal(relIDs(t, got, "projects"), []string{projectID}) ||
		got.Data.Attributes["workspace-count"] != float64(2) {
		t.Fatalf("after applying: %+v", got.Data)
	}
	u.call(t, http.MethodDelete, vsPath+"/relationships/workspaces", refs("workspaces", ws1)).MustStatus(t, http.StatusNoContent)
	if w := relIDs(t, decode(t, u.call(t, http.MethodGet, vsPath, nil)), "workspaces"); !slices.Equal(w, []string{ws2}) {
		t.Fatalf("after removing %s: %v", ws1, w)
	}
	u.call(t, http.MethodGet, "/api/v2/workspaces/"+ws2+"/varsets", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != set.Data.ID || list.Meta.Pagination.TotalCount != 1 {
		t.Fatalf("workspace varsets: %+v", list)
	}
	u.call(t, http.MethodGet, "/api/v2/workspaces/"+ws1+"/varsets", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("varsets of the removed workspace: %+v", list)
	}
	u.call(t, http.MethodGet, "/api/v2/projects/"+projectID+"/varsets?page[number]=999", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 0 || list.Meta.Pagination.TotalCount != 1 {
		t.Fatalf("project varsets, page 999: %+v", list)
	}

	// go-tfe's UpdateWorkspaces: global false and a workspaces
	// relationship replace the list, which include=workspaces renders.
	var withIncluded struct {
		Data     struct{ ID string }
		Included []struct {
			ID, Type   string
			Attributes map[string]any
		}
	}
	u.call(t, http.MethodPatch, vsPath+"?include=workspaces", varsetDoc(map[string]any{"global": false},
		map[string]any{"workspaces": refs("workspaces", ws1)})).MustStatus(t, http.StatusOK).JSON(t, &withIncluded)
	if len(withIncluded.Included) != 1 || withIncluded.Included[0].ID != ws1 || withIncluded.Included[0].Attributes["name"] != "one" {
		t.Fatalf("included workspaces: %+v", withIncluded)
	}
	got = decode(t, u.call(t, http.MethodGet, vsPath, nil))
	if !slices.Equal(relIDs(t, got, "workspaces"), []string{ws1}) || !slices.Equal(relIDs(t, got, "projects"), []string{projectID}) {
		t.Fatalf("after replacing the workspaces (the projects are kept): %+v", got.Data.Relationships)
	}
	updated := decode(t, u.call(t, http.MethodPatch, vsPath, varsetDoc(map[string]any{"name": "renamed", "priority": false},
		map[string]any{"workspaces": refs("workspaces")})).MustStatus(t, http.StatusOK))
	if updated.Data.Attributes["name"] != "renamed" || updated.Data.Attributes["priority"] != false || len(relIDs(t, updated, "workspaces")) != 0 {
		t.Fatalf("updated: %+v", updated.Data)
	}
	if r := u.call(t, http.MethodGet, vsPath+"?include=teams", nil); r.Status < 400 {
		t.Fatalf("include=teams = %d", r.Status)
	}

	// Stacks are not modelled.
	for _, m := range []string{http.MethodPost, http.MethodDelete} {
		r := u.call(t, m, vsPath+"/relationships/stacks", refs("stacks", "st-abc"))
		if d := decode(t, r); r.Status != http.StatusUnprocessableEntity || !strings.Contains(d.Errors[0].Detail, "Stacks are not modelled") {
			t.Fatalf("%s stacks = %d %s", m, r.Status, r.Body)
		}
	}
	if r := u.call(t, http.MethodPatch, vsPath, varsetDoc(map[string]any{"global": false},
		map[string]any{"stacks": refs("stacks", "st-abc")})); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("PATCH with stacks = %d %s", r.Status, r.Body)
	}

	u.call(t, http.MethodDelete, vsPath, nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, vsPath, nil).MustStatus(t, http.StatusNotFound)
	u.call(t, http.MethodDelete, vsPath, nil).MustStatus(t, http.StatusNotFound)
}

func sorted(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

// TestVariableSetVariablesThroughTheRemoteBackendAPI walks go-tfe's set
// variable calls: a value reads back, a missing value reads "", a
// sensitive value never reads back, version-id changes on every update
// (even one that changes nothing), a value becomes sensitive without
// being sent again, env keys the runner owns and env HCL are refused, and
// a deleted variable is gone.
func TestVariableSetVariablesThroughTheRemoteBackendAPI(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "SetVars")
	setID := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/varsets",
		varsetDoc(map[string]any{"name": "vars", "global": true}, nil)).MustStatus(t, http.StatusCreated)).Data.ID
	vars := "/api/v2/varsets/" + setID + "/relationships/vars"

	plain := decode(t, u.call(t, http.MethodPost, vars, varDoc(map[string]any{"key": "region", "value": "eu-west-1",
		"description": "where", "category": "terraform", "hcl": false, "sensitive": false})).MustStatus(t, http.StatusCreated))
	if a := plain.Data.Attributes; plain.Data.Type != "vars" || a["key"] != "region" || a["value"] != "eu-west-1" || a["description"] != "where" ||
		a["category"] != "terraform" || a["version-id"] == "" {
		t.Fatalf("created: %+v", plain.Data)
	}
	if rel, _ := plain.Data.Relationships["varset"].Data.(map[string]any); rel["id"] != setID || rel["type"] != "varsets" {
		t.Fatalf("varset relationship: %+v", plain.Data.Relationships)
	}
	empty := decode(t, u.call(t, http.MethodPost, vars, varDoc(map[string]any{"key": "no_value", "category": "terraform"})).
		MustStatus(t, http.StatusCreated))
	if empty.Data.Attributes["value"] != "" {
		t.Fatalf("a variable created without a value: %+v", empty.Data.Attributes)
	}
	const secret = "s3cr3t-set-value"
	hidden := decode(t, u.call(t, http.MethodPost, vars, varDoc(map[string]any{"key": "TOKEN", "value": secret, "category": "env",
		"sensitive": true})).MustStatus(t, http.StatusCreated))
	if hidden.Data.Attributes["value"] != "" || hidden.Data.Attributes["sensitive"] != true {
		t.Fatalf("a sensitive variable: %+v", hidden.Data.Attributes)
	}
	for _, bad := range []map[string]any{
		{"key": "PATH", "value": "/tmp", "category": "env"},
		{"key": "TF_CLI_ARGS_plan", "value": "-destroy", "category": "env"},
		{"key": "j", "value": "{}", "category": "env", "hcl": true},
		{"key": "x", "value": "y", "category": "shell"},
		{"key": "region", "value": "again", "category": "terraform"},
	} {
		if r := u.call(t, http.MethodPost, vars, varDoc(bad)); r.Status < 400 || r.Status >= 500 {
			t.Fatalf("%v = %d %s", bad, r.Status, r.Body)
		}
	}

	var list listDocument
	u.call(t, http.MethodGet, vars, nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 3 || list.Meta.Pagination.TotalCount != 3 {
		t.Fatalf("list: %+v", list)
	}
	one := u.call(t, http.MethodGet, vars+"/"+plain.Data.ID, nil).MustStatus(t, http.StatusOK)
	if d := decode(t, one); d.Data.Attributes["version-id"] != plain.Data.Attributes["version-id"] || d.Data.Attributes["value"] != "eu-west-1" {
		t.Fatalf("read: %+v", d.Data)
	}

	// An update that changes nothing still gets a new version-id, as
	// go-tfe expects; an absent attribute is kept.
	same := decode(t, u.call(t, http.MethodPatch, vars+"/"+plain.Data.ID, varDoc(map[string]any{"key": "region", "value": "eu-west-1"})).
		MustStatus(t, http.StatusOK))
	if same.Data.Attributes["version-id"] == plain.Data.Attributes["version-id"] || same.Data.Attributes["description"] != "where" {
		t.Fatalf("unchanged update: %+v", same.Data.Attributes)
	}
	renamed := decode(t, u.call(t, http.MethodPatch, vars+"/"+plain.Data.ID, varDoc(map[string]any{"key": "zone", "hcl": true})).
		MustStatus(t, http.StatusOK))
	if a := renamed.Data.Attributes; a["key"] != "zone" || a["hcl"] != true || a["value"] != "eu-west-1" || a["version-id"] == same.Data.Attributes["version-id"] {
		t.Fatalf("renamed: %+v", a)
	}
	sealed := decode(t, u.call(t, http.MethodPatch, vars+"/"+plain.Data.ID, varDoc(map[string]any{"sensitive": true})).
		MustStatus(t, http.StatusOK))
	if a := sealed.Data.Attributes; a["sensitive"] != true || a["value"] != "" || a["key"] != "zone" {
		t.Fatalf("made sensitive: %+v", a)
	}
	if r := u.call(t, http.MethodGet, "/api/v2/varsets/"+setID+"?include=vars", nil); strings.Contains(string(r.Body), secret) ||
		strings.Contains(string(r.Body), "eu-west-1") || !strings.Contains(string(r.Body), `"key":"TOKEN"`) {
		t.Fatalf("set with its variables: %s", r.Body)
	}

	u.call(t, http.MethodDelete, vars+"/"+empty.Data.ID, nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, vars+"/"+empty.Data.ID, nil).MustStatus(t, http.StatusNotFound)
	u.call(t, http.MethodDelete, vars+"/"+empty.Data.ID, nil).MustStatus(t, http.StatusNotFound)
	u.call(t, http.MethodGet, vars+"/nonexisting", nil).MustStatus(t, http.StatusNotFound)
}

// TestVariableSetsStayInsideTheirOrganization: another organization's set,
// its variables and its scope routes answer exactly like missing ones; a
// set cannot be applied to another organization's workspace; a reader
// reads sets but changes none.
func TestVariableSetsStayInsideTheirOrganization(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Owner")
	setID := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/varsets",
		varsetDoc(map[string]any{"name": "mine", "global": false}, nil)).MustStatus(t, http.StatusCreated)).Data.ID
	varID := decode(t, u.call(t, http.MethodPost, "/api/v2/varsets/"+setID+"/relationships/vars",
		varDoc(map[string]any{"key": "k", "value": "v", "category": "terraform"})).MustStatus(t, http.StatusCreated)).Data.ID

	other := newCloudUser(t, env, "Other")
	otherWS := other.newWorkspace(t, "theirs")
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/api/v2/varsets/%s"}, {http.MethodPatch, "/api/v2/varsets/%s"}, {http.MethodDelete, "/api/v2/varsets/%s"},
		{http.MethodGet, "/api/v2/varsets/%s/relationships/vars"}, {http.MethodPost, "/api/v2/varsets/%s/relationships/workspaces"},
		{http.MethodGet, "/api/v2/varsets/%s/relationships/vars/" + varID},
	} {
		body := map[string]any{"data": []map[string]string{{"type": "workspaces", "id": otherWS}}}
		theirs := other.call(t, c.method, strings.Replace(c.path, "%s", setID, 1), body)
		missing := other.call(t, c.method, strings.Replace(c.path, "%s", "varset_missing", 1), body)
		if theirs.Status != http.StatusNotFound || missing.Status != http.StatusNotFound ||
			decode(t, theirs).Errors[0].Title != decode(t, missing).Errors[0].Title {
			t.Fatalf("%s %s of another organization = %d %s, missing = %d %s", c.method, c.path, theirs.Status, theirs.Body, missing.Status, missing.Body)
		}
	}
	if r := u.call(t, http.MethodPost, "/api/v2/varsets/"+setID+"/relationships/workspaces", refs("workspaces", otherWS)); r.Status != http.StatusNotFound {
		t.Fatalf("applying to another organization's workspace = %d %s", r.Status, r.Body)
	}
	if r := other.call(t, http.MethodGet, "/api/v2/organizations/"+u.org+"/varsets", nil); r.Status != http.StatusNotFound {
		t.Fatalf("another organization's list = %d %s", r.Status, r.Body)
	}

	_, readerToken := joinWithToken(t, env, u, "Reader", "reader")
	callWith(t, env, readerToken, http.MethodGet, "/api/v2/varsets/"+setID, nil).MustStatus(t, http.StatusOK)
	callWith(t, env, readerToken, http.MethodGet, "/api/v2/varsets/"+setID+"/relationships/vars", nil).MustStatus(t, http.StatusOK)
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/api/v2/organizations/" + u.org + "/varsets", varsetDoc(map[string]any{"name": "theirs", "global": false}, nil)},
		{http.MethodPatch, "/api/v2/varsets/" + setID, varsetDoc(map[string]any{"name": "taken"}, nil)},
		{http.MethodPost, "/api/v2/varsets/" + setID + "/relationships/vars", varDoc(map[string]any{"key": "x", "category": "terraform"})},
		{http.MethodDelete, "/api/v2/varsets/" + setID, nil},
	} {
		if r := callWith(t, env, readerToken, c.method, c.path, c.body); r.Status != http.StatusForbidden {
			t.Fatalf("reader %s %s = %d %s", c.method, c.path, r.Status, r.Body)
		}
	}
}
