package tfe_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// TestWorkspaceVariablesThroughTheRemoteBackendAPI walks go-tfe's
// Variables calls: create (a UUID key, no value, an env category), list
// with paging, read, HCP's partial updates (rename, a plain value turned
// sensitive without sending it, a category change, an empty patch that
// still gets a new version-id), the workspace's vars relationship,
// refusals (a runner-owned env name, HCP's 512-character description, a
// sensitive value made plain without a value) and delete. Another
// organization's user reads the variable as missing.
func TestWorkspaceVariablesThroughTheRemoteBackendAPI(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Variables")
	ws := u.newWorkspace(t, "vars")
	base := "/api/v2/workspaces/" + ws + "/vars"

	created := decode(t, u.call(t, http.MethodPost, base, varDoc(map[string]any{
		"key": "0b9f6c1e-uuid-key", "value": "plain", "category": "terraform", "description": "d"})).MustStatus(t, http.StatusCreated))
	if a := created.Data.Attributes; created.Data.Type != "vars" || a["key"] != "0b9f6c1e-uuid-key" || a["value"] != "plain" ||
		a["category"] != "terraform" || a["hcl"] != false || a["sensitive"] != false || a["version-id"] == "" {
		t.Fatalf("created: %+v", created.Data)
	}
	if conf, _ := created.Data.Relationships["configurable"].Data.(map[string]any); conf["id"] != ws || conf["type"] != "workspaces" {
		t.Fatalf("configurable: %+v", created.Data.Relationships)
	}
	empty := decode(t, u.call(t, http.MethodPost, base, varDoc(map[string]any{"key": "EMPTY", "category": "env"})).MustStatus(t, http.StatusCreated))
	if a := empty.Data.Attributes; a["value"] != "" || a["category"] != "env" {
		t.Fatalf("created without a value: %+v", a)
	}
	// The same key in the other category is another variable.
	u.call(t, http.MethodPost, base, varDoc(map[string]any{"key": "EMPTY", "category": "terraform", "value": "x"})).MustStatus(t, http.StatusCreated)
	u.call(t, http.MethodPost, base, varDoc(map[string]any{"key": "EMPTY", "category": "env"})).MustStatus(t, http.StatusConflict)

	for name, attrs := range map[string]map[string]any{
		"a runner-owned env name":   {"key": "TF_CLI_CONFIG_FILE", "category": "env", "value": "/tmp/x"},
		"a description over 512":    {"key": "long", "category": "terraform", "description": strings.Repeat("d", 513)},
		"an unknown category":       {"key": "k", "category": "policy-set"},
		"an HCL env variable":       {"key": "K", "category": "env", "hcl": true},
		"a key that starts with -":  {"key": "-k", "category": "terraform"},
		"invalid HCL in an HCL var": {"key": "h", "category": "terraform", "hcl": true, "value": "{"},
	} {
		if resp := u.call(t, http.MethodPost, base, varDoc(attrs)); resp.Status != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %s", name, resp.Status, resp.Body)
		}
	}

	list := u.call(t, http.MethodGet, base, nil).MustStatus(t, http.StatusOK)
	if !strings.Contains(string(list.Body), created.Data.ID) || !strings.Contains(string(list.Body), `"total-count":3`) {
		t.Fatalf("list: %s", list.Body)
	}
	beyond := u.call(t, http.MethodGet, base+"?page%5Bnumber%5D=999&page%5Bsize%5D=100", nil).MustStatus(t, http.StatusOK)
	if !strings.Contains(string(beyond.Body), `"data":[]`) || !strings.Contains(string(beyond.Body), `"current-page":999`) {
		t.Fatalf("a page beyond the last: %s", beyond.Body)
	}
	read := decode(t, u.call(t, http.MethodGet, base+"/"+created.Data.ID, nil).MustStatus(t, http.StatusOK))
	if read.Data.Attributes["version-id"] != created.Data.Attributes["version-id"] {
		t.Fatalf("read %+v, created %+v", read.Data.Attributes, created.Data.Attributes)
	}
	wsDoc := decode(t, u.call(t, http.MethodGet, "/api/v2/workspaces/"+ws, nil).MustStatus(t, http.StatusOK))
	if ids := relIDs(t, wsDoc, "vars"); len(ids) != 3 {
		t.Fatalf("the workspace's vars: %v", ids)
	}

	patch := func(attrs map[string]any, status int) document {
		t.Helper()
		return decode(t, u.call(t, http.MethodPatch, base+"/"+created.Data.ID, varDoc(attrs)).MustStatus(t, status))
	}
	renamed := patch(map[string]any{"key": "renamed", "hcl": true, "value": `"v"`}, http.StatusOK)
	if a := renamed.Data.Attributes; a["key"] != "renamed" || a["hcl"] != true || a["value"] != `"v"` || a["description"] != "d" ||
		a["version-id"] == created.Data.Attributes["version-id"] {
		t.Fatalf("renamed: %+v", a)
	}
	sealed := patch(map[string]any{"sensitive": true}, http.StatusOK)
	if a := sealed.Data.Attributes; a["sensitive"] != true || a["value"] != "" || a["key"] != "renamed" {
		t.Fatalf("made sensitive: %+v", a)
	}
	if strings.Contains(string(u.call(t, http.MethodGet, base, nil).Body), `\"v\"`) {
		t.Fatal("a sensitive value was read back")
	}
	patch(map[string]any{"sensitive": false}, http.StatusUnprocessableEntity)
	env2 := patch(map[string]any{"category": "env", "hcl": false, "value": "e"}, http.StatusOK)
	if a := env2.Data.Attributes; a["category"] != "env" || a["sensitive"] != true {
		t.Fatalf("category: %+v", a)
	}
	unchanged := patch(map[string]any{}, http.StatusOK)
	if a := unchanged.Data.Attributes; a["key"] != "renamed" || a["category"] != "env" || a["version-id"] == env2.Data.Attributes["version-id"] {
		t.Fatalf("an empty patch: %+v (before %+v)", a, env2.Data.Attributes)
	}

	// all-vars: what a new run gets, the workspace's value winning over a
	// set's of the same category and key.
	set := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/varsets",
		varsetDoc(map[string]any{"name": "shared"}, nil)).MustStatus(t, http.StatusCreated)).Data.ID
	lost := decode(t, u.call(t, http.MethodPost, "/api/v2/varsets/"+set+"/relationships/vars",
		varDoc(map[string]any{"key": "EMPTY", "category": "terraform", "value": "from-set"})).MustStatus(t, http.StatusCreated)).Data.ID
	won := decode(t, u.call(t, http.MethodPost, "/api/v2/varsets/"+set+"/relationships/vars",
		varDoc(map[string]any{"key": "only_in_set", "category": "terraform", "value": "set-value"})).MustStatus(t, http.StatusCreated)).Data.ID
	u.call(t, http.MethodPost, "/api/v2/varsets/"+set+"/relationships/workspaces", refs("workspaces", ws)).MustStatus(t, http.StatusNoContent)
	all := string(u.call(t, http.MethodGet, "/api/v2/workspaces/"+ws+"/all-vars", nil).MustStatus(t, http.StatusOK).Body)
	if !strings.Contains(all, won) || strings.Contains(all, lost) || !strings.Contains(all, created.Data.ID) ||
		!strings.Contains(all, `"total-count":4`) || strings.Contains(all, "from-set") {
		t.Fatalf("all-vars: %s", all)
	}

	// Another organization's user: the same 404 as a missing variable.
	other := newCloudUser(t, env, "Elsewhere")
	otherWS := other.newWorkspace(t, "vars")
	for _, path := range []string{base + "/" + created.Data.ID, "/api/v2/workspaces/" + otherWS + "/vars/" + created.Data.ID} {
		other.call(t, http.MethodGet, path, nil).MustStatus(t, http.StatusNotFound)
		other.call(t, http.MethodPatch, path, varDoc(map[string]any{"value": "x"})).MustStatus(t, http.StatusNotFound)
		other.call(t, http.MethodDelete, path, nil).MustStatus(t, http.StatusNotFound)
	}

	u.call(t, http.MethodDelete, base+"/"+created.Data.ID, nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, base+"/"+created.Data.ID, nil).MustStatus(t, http.StatusNotFound)
	u.call(t, http.MethodDelete, base+"/"+created.Data.ID, nil).MustStatus(t, http.StatusNotFound)
}
