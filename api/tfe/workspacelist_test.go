package tfe_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

func tagsDoc(tags ...map[string]any) map[string]any {
	return map[string]any{"data": tags}
}

func tagNamed(name string) map[string]any {
	return map[string]any{"type": "tags", "attributes": map[string]any{"name": name}}
}

func listNames(l listDocument) []string {
	var names []string
	for _, d := range l.Data {
		names = append(names, d.Attributes["name"].(string))
	}
	return names
}

// TestWorkspaceListAndTags walks go-tfe's Workspaces.List, AddTags,
// RemoveTags and ListTags: the list pages and counts, searches by part of
// the name, by '*' pattern, by tags held and not held, filters by project,
// sorts by name either way and includes the organization; tags are
// created by name, bound by ID across workspaces, listed by name, shown
// as tag-names and removed (a tag the workspace lacks is no error).
// Another organization's workspaces and tags are missing, and a reader
// lists but does not tag.
func TestWorkspaceListAndTags(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Listing")
	base := "/api/v2/organizations/" + u.org + "/workspaces"
	appProd, appDev, dbProd := u.newWorkspace(t, "app-prod"), u.newWorkspace(t, "app-dev"), u.newWorkspace(t, "db-prod")
	tags := func(id string) string { return "/api/v2/workspaces/" + id + "/relationships/tags" }
	list := func(query string) listDocument {
		t.Helper()
		var l listDocument
		u.call(t, http.MethodGet, base+query, nil).MustStatus(t, http.StatusOK).JSON(t, &l)
		return l
	}

	if l := list(""); !slices.Equal(listNames(l), []string{"app-dev", "app-prod", "db-prod"}) || l.Meta.Pagination.TotalCount != 3 {
		t.Fatalf("list: %v %+v", listNames(l), l.Meta)
	}
	if l := list("?page[number]=999&page[size]=100"); len(l.Data) != 0 || l.Meta.Pagination.CurrentPage != 999 || l.Meta.Pagination.TotalCount != 3 {
		t.Fatalf("page 999: %+v", l)
	}
	if names := listNames(list("?sort=-name")); !slices.Equal(names, []string{"db-prod", "app-prod", "app-dev"}) {
		t.Fatalf("sort=-name: %v", names)
	}
	if names := listNames(list("?search[name]=APP")); !slices.Equal(names, []string{"app-dev", "app-prod"}) {
		t.Fatalf("search[name]: %v", names)
	}
	if names := listNames(list("?search[wildcard-name]=*-prod")); !slices.Equal(names, []string{"app-prod", "db-prod"}) {
		t.Fatalf("wildcard *-prod: %v", names)
	}
	if names := listNames(list("?search[wildcard-name]=*-stage")); len(names) != 0 {
		t.Fatalf("wildcard without a match: %v", names)
	}

	u.call(t, http.MethodPost, tags(appProd), tagsDoc(tagNamed("team-a"), tagNamed("prod"))).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodPost, tags(dbProd), tagsDoc(tagNamed("prod"))).MustStatus(t, http.StatusNoContent)
	var held listDocument
	u.call(t, http.MethodGet, tags(appProd), nil).MustStatus(t, http.StatusOK).JSON(t, &held)
	if !slices.Equal(listNames(held), []string{"prod", "team-a"}) {
		t.Fatalf("tags of app-prod: %v", listNames(held))
	}
	// The tag app-prod holds is bound to app-dev by its ID.
	byID := map[string]any{"type": "tags", "id": held.Data[1].ID}
	u.call(t, http.MethodPost, tags(appDev), tagsDoc(byID)).MustStatus(t, http.StatusNoContent)
	if ws := decode(t, u.call(t, http.MethodGet, "/api/v2/workspaces/"+appDev, nil).MustStatus(t, http.StatusOK)); !slices.Equal(
		anyStrings(ws.Data.Attributes["tag-names"]), []string{"team-a"}) {
		t.Fatalf("tag-names of app-dev: %v", ws.Data.Attributes["tag-names"])
	}
	if names := listNames(list("?search[tags]=prod,team-a")); !slices.Equal(names, []string{"app-prod"}) {
		t.Fatalf("search[tags]: %v", names)
	}
	if names := listNames(list("?search[exclude-tags]=prod")); !slices.Equal(names, []string{"app-dev"}) {
		t.Fatalf("search[exclude-tags]: %v", names)
	}
	u.call(t, http.MethodDelete, tags(appProd), tagsDoc(tagNamed("team-a"), tagNamed("never-added"))).MustStatus(t, http.StatusNoContent)
	if names := listNames(list("?search[tags]=team-a")); !slices.Equal(names, []string{"app-dev"}) {
		t.Fatalf("after removing team-a from app-prod: %v", names)
	}
	if r := u.call(t, http.MethodPost, tags(appProd), tagsDoc()); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("no tags = %d %s", r.Status, r.Body)
	}
	if r := u.call(t, http.MethodPost, tags(appProd), tagsDoc(tagNamed("no spaces"))); r.Status != http.StatusBadRequest {
		t.Fatalf("invalid tag name = %d %s", r.Status, r.Body)
	}

	proj := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/projects", projectDoc(map[string]any{"name": "apps"})).
		MustStatus(t, http.StatusCreated)).Data.ID
	inProject := decode(t, u.call(t, http.MethodPost, base, map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"name": "in-apps"},
		"relationships": map[string]any{"project": map[string]any{"data": map[string]string{"type": "projects", "id": proj}}},
	}}).MustStatus(t, http.StatusCreated)).Data.ID
	if l := list("?filter[project][id]=" + proj); len(l.Data) != 1 || l.Data[0].ID != inProject {
		t.Fatalf("filter[project][id]: %+v", l)
	}
	if l := list("?include=organization"); len(l.Included) != 1 || l.Included[0].Type != "organizations" || l.Included[0].ID != u.org {
		t.Fatalf("include=organization: %+v", l.Included)
	}

	// Another organization finds neither the list nor the tags; its tag
	// IDs are missing here too.
	other := newCloudUser(t, env, "Elsewhere")
	if r := other.call(t, http.MethodGet, base, nil); r.Status != http.StatusNotFound {
		t.Fatalf("another organization's list = %d", r.Status)
	}
	if r := other.call(t, http.MethodGet, tags(appProd), nil); r.Status != http.StatusNotFound {
		t.Fatalf("another organization's tags = %d", r.Status)
	}
	mine := other.newWorkspace(t, "mine")
	if r := other.call(t, http.MethodPost, tags(mine), tagsDoc(byID)); r.Status != http.StatusNotFound {
		t.Fatalf("another organization's tag ID = %d %s", r.Status, r.Body)
	}

	// A reader lists, and may not tag.
	_, readerToken := joinWithToken(t, env, u, "Reader", "reader")
	var seen listDocument
	callWith(t, env, readerToken, http.MethodGet, base, nil).MustStatus(t, http.StatusOK).JSON(t, &seen)
	if seen.Meta.Pagination.TotalCount != 4 {
		t.Fatalf("reader's list: %+v", seen.Meta)
	}
	if r := callWith(t, env, readerToken, http.MethodPost, tags(appDev), tagsDoc(tagNamed("x"))); r.Status != http.StatusForbidden {
		t.Fatalf("reader tagging = %d", r.Status)
	}
}

func anyStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// managingState is a state (serial 1) whose one managed resource makes its
// workspace one that manages resources.
var managingState = []byte(`{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"lin-1","outputs":{},` +
	`"resources":[{"mode":"managed","type":"terraform_data","name":"x","provider":"provider[\"terraform.io/builtin/terraform\"]",` +
	`"instances":[{"schema_version":0,"attributes":{"id":"1"}}]}],"check_results":null}`)

// TestWorkspaceSafeDelete: go-tfe's safe-delete refuses a locked workspace
// and one whose current state manages resources, each with HCP's 409
// words, and deletes an unlocked one managing none.
func TestWorkspaceSafeDelete(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "SafeDelete")
	managing := u.newWorkspace(t, "managing")
	u.publishState(t, managing, 1, managingState)
	r := u.call(t, http.MethodPost, "/api/v2/workspaces/"+managing+"/actions/safe-delete", nil)
	if d := decode(t, r); r.Status != http.StatusConflict || !strings.Contains(d.Errors[0].Detail, "still managing resources") {
		t.Fatalf("safe delete of a workspace managing resources = %d %s", r.Status, r.Body)
	}

	locked := u.newWorkspace(t, "locked")
	u.call(t, http.MethodPost, "/api/v2/workspaces/"+locked+"/actions/lock", nil).MustStatus(t, http.StatusOK)
	r = u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces/locked/actions/safe-delete", nil)
	if d := decode(t, r); r.Status != http.StatusConflict || !strings.Contains(d.Errors[0].Detail, "locked") {
		t.Fatalf("safe delete of a locked workspace = %d %s", r.Status, r.Body)
	}

	u.call(t, http.MethodPost, "/api/v2/workspaces/"+locked+"/actions/unlock", nil).MustStatus(t, http.StatusOK)
	u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces/locked/actions/safe-delete", nil).
		MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, "/api/v2/workspaces/"+locked, nil).MustStatus(t, http.StatusNotFound)
	u.call(t, http.MethodGet, "/api/v2/workspaces/"+managing, nil).MustStatus(t, http.StatusOK)
}

// TestOperatorOrganizations: an organization the operator creates keeps
// its e-mail and default execution mode and comes with its Default
// Project (so does one a person creates); the operator lists every
// organization by name or e-mail, a tenant only its own; an update
// changes the e-mail; deleting an organization deletes its workspaces.
func TestOperatorOrganizations(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	op := func(method, path string, body any) *apitest.Response {
		return callWith(t, env, apitest.OperatorToken, method, path, body)
	}
	created := decode(t, op(http.MethodPost, "/api/v2/organizations", map[string]any{"data": map[string]any{"type": "organizations",
		"attributes": map[string]any{"name": "acme-ops", "email": "ops@acme.example", "default-execution-mode": "local"}}}).
		MustStatus(t, http.StatusCreated))
	if a := created.Data.Attributes; a["email"] != "ops@acme.example" || a["default-execution-mode"] != "local" {
		t.Fatalf("created: %v", a)
	}
	read := op(http.MethodGet, "/api/v2/organizations/acme-ops?include=default-project", nil).MustStatus(t, http.StatusOK)
	var withProject struct {
		Data struct {
			Relationships map[string]struct {
				Data struct{ ID string } `json:"data"`
			} `json:"relationships"`
		} `json:"data"`
		Included []struct {
			ID         string         `json:"id"`
			Attributes map[string]any `json:"attributes"`
		} `json:"included"`
	}
	read.JSON(t, &withProject)
	if len(withProject.Included) != 1 || withProject.Included[0].Attributes["name"] != "Default Project" ||
		withProject.Data.Relationships["default-project"].Data.ID != withProject.Included[0].ID {
		t.Fatalf("include=default-project: %s", read.Body)
	}
	// A workspace created without a project lands in it.
	ws := decode(t, op(http.MethodPost, "/api/v2/organizations/acme-ops/workspaces", map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"name": "w"}}}).MustStatus(t, http.StatusCreated))
	if rel, _ := ws.Data.Relationships["project"].Data.(map[string]any); rel["id"] != withProject.Included[0].ID {
		t.Fatalf("workspace project: %+v", ws.Data.Relationships)
	}

	u := newCloudUser(t, env, "Person")
	var projects listDocument
	u.call(t, http.MethodGet, "/api/v2/organizations/"+u.org+"/projects", nil).MustStatus(t, http.StatusOK).JSON(t, &projects)
	if !slices.Equal(listNames(projects), []string{"Default Project"}) {
		t.Fatalf("a person's new organization's projects: %v", listNames(projects))
	}

	var orgs listDocument
	op(http.MethodGet, "/api/v2/organizations?q=ACME.example", nil).MustStatus(t, http.StatusOK).JSON(t, &orgs)
	if len(orgs.Data) != 1 || orgs.Data[0].ID != "acme-ops" {
		t.Fatalf("operator list by e-mail: %+v", orgs)
	}
	op(http.MethodGet, "/api/v2/organizations", nil).MustStatus(t, http.StatusOK).JSON(t, &orgs)
	if orgs.Meta.Pagination.TotalCount != 2 {
		t.Fatalf("operator list: %+v", orgs)
	}
	u.call(t, http.MethodGet, "/api/v2/organizations", nil).MustStatus(t, http.StatusOK).JSON(t, &orgs)
	if len(orgs.Data) != 1 || orgs.Data[0].ID != u.org {
		t.Fatalf("tenant list: %+v", orgs)
	}

	updated := decode(t, op(http.MethodPatch, "/api/v2/organizations/acme-ops", map[string]any{"data": map[string]any{
		"type": "organizations", "attributes": map[string]any{"email": "new@acme.example"}}}).MustStatus(t, http.StatusOK))
	if updated.Data.Attributes["email"] != "new@acme.example" || updated.Data.Attributes["default-execution-mode"] != "local" {
		t.Fatalf("updated: %v", updated.Data.Attributes)
	}

	op(http.MethodDelete, "/api/v2/organizations/acme-ops", nil).MustStatus(t, http.StatusNoContent)
	op(http.MethodGet, "/api/v2/workspaces/"+ws.Data.ID, nil).MustStatus(t, http.StatusNotFound)
	op(http.MethodGet, "/api/v2/organizations/acme-ops", nil).MustStatus(t, http.StatusNotFound)
}

// TestWorkspaceRefusesWhatCairnNeverRuns: a workspace create or update
// asking for auto-apply of triggered runs, health assessments or an
// auto-destroy is refused with 422 and changes nothing; their off values
// are accepted.
func TestWorkspaceRefusesWhatCairnNeverRuns(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Refusals")
	base := "/api/v2/organizations/" + u.org + "/workspaces"
	doc := func(attrs map[string]any) map[string]any {
		return map[string]any{"data": map[string]any{"type": "workspaces", "attributes": attrs}}
	}
	for _, attrs := range []map[string]any{
		{"auto-apply-run-trigger": true}, {"assessments-enabled": true},
		{"auto-destroy-at": "2030-01-01T00:00:00Z"}, {"auto-destroy-activity-duration": "14d"},
	} {
		attrs["name"] = "refused"
		r := u.call(t, http.MethodPost, base, doc(attrs))
		if d := decode(t, r); r.Status != http.StatusUnprocessableEntity || d.Errors[0].Detail == "" {
			t.Fatalf("create with %v = %d %s", attrs, r.Status, r.Body)
		}
		delete(attrs, "name")
		id := u.newWorkspace(t, "kept")
		if r := u.call(t, http.MethodPatch, "/api/v2/workspaces/"+id, doc(attrs)); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("update with %v = %d %s", attrs, r.Status, r.Body)
		}
		u.call(t, http.MethodDelete, "/api/v2/workspaces/"+id, nil).MustStatus(t, http.StatusNoContent)
	}
	u.call(t, http.MethodGet, base+"/refused", nil).MustStatus(t, http.StatusNotFound)
	u.call(t, http.MethodPost, base, doc(map[string]any{"name": "off", "assessments-enabled": false, "auto-apply-run-trigger": false,
		"auto-destroy-at": nil})).MustStatus(t, http.StatusCreated)
}
