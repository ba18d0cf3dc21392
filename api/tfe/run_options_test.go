package tfe_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// TestRunOptionsOverTheProtocol: the run options HCP Terraform clients
// send are kept and echoed in the run resource; a refused one answers a
// bounded 422 that points at its attribute and carries the request ID, and
// persists nothing; auto-apply and destroy stay refused as before.
func TestRunOptionsOverTheProtocol(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Options")
	ws := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces", map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"name": "options", "terraform-version": "1.10.6"}}}).MustStatus(t, http.StatusCreated)).Data
	cv := decode(t, u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/configuration-versions", map[string]any{"data": map[string]any{
		"type": "configuration-versions", "attributes": map[string]any{}}}).MustStatus(t, http.StatusCreated)).Data
	if resp := putUpload(t, cv.Attributes["upload-url"].(string), devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "x" {}`})); resp.StatusCode != http.StatusOK {
		t.Fatalf("upload = %d", resp.StatusCode)
	}
	create := func(attrs map[string]any) *apitest.Response {
		return u.call(t, http.MethodPost, "/api/v2/runs", map[string]any{"data": map[string]any{"type": "runs", "attributes": attrs,
			"relationships": map[string]any{"workspace": map[string]any{"data": map[string]string{"type": "workspaces", "id": ws.ID}}}}})
	}
	runCount := func() int {
		var n int
		if err := env.DB.Get(&n, `SELECT count(*) FROM runs WHERE workspace_id = $1`, ws.ID); err != nil {
			t.Fatal(err)
		}
		return n
	}

	plain := decode(t, create(map[string]any{}).MustStatus(t, http.StatusCreated)).Data.Attributes
	if plain["refresh"] != true || plain["refresh-only"] != false || plain["allow-empty-apply"] != false || plain["save-plan"] != false ||
		plain["target-addrs"] != nil || plain["replace-addrs"] != nil || plain["variables"] != nil || plain["terraform-version"] != "1.10.6" {
		t.Fatalf("a run without options: %v", plain)
	}

	full := decode(t, create(map[string]any{"message": "yo", "refresh": false, "allow-empty-apply": true,
		"target-addrs": []string{"terraform_data.x"}, "replace-addrs": []string{`module.m.terraform_data.y["k"]`},
		"variables": []map[string]string{{"key": "greeting", "value": `"Hello, World!"`}, {"key": "count_", "value": "2"}}}).
		MustStatus(t, http.StatusCreated)).Data
	got, _ := json.Marshal(map[string]any{"refresh": full.Attributes["refresh"], "allow": full.Attributes["allow-empty-apply"],
		"targets": full.Attributes["target-addrs"], "replaces": full.Attributes["replace-addrs"], "variables": full.Attributes["variables"]})
	want := `{"allow":true,"refresh":false,"replaces":["module.m.terraform_data.y[\"k\"]"],"targets":["terraform_data.x"],` +
		`"variables":[{"key":"greeting","value":"\"Hello, World!\""},{"key":"count_","value":"2"}]}`
	if string(got) != want {
		t.Fatalf("run options echoed as\n%s\nwant\n%s", got, want)
	}
	read := decode(t, u.call(t, http.MethodGet, "/api/v2/runs/"+full.ID, nil).MustStatus(t, http.StatusOK)).Data
	if again, _ := json.Marshal(read.Attributes["variables"]); !strings.Contains(string(again), `"count_"`) {
		t.Fatalf("read run shows variables %s", again)
	}

	saved := decode(t, create(map[string]any{"save-plan": true}).MustStatus(t, http.StatusCreated)).Data.Attributes
	if saved["save-plan"] != true || saved["status"] != "plan_queued" {
		t.Fatalf("saved plan: save-plan %v, status %v", saved["save-plan"], saved["status"])
	}
	pinned := decode(t, create(map[string]any{"plan-only": true, "terraform-version": "1.10.6"}).MustStatus(t, http.StatusCreated)).Data.Attributes
	if pinned["plan-only"] != true || pinned["terraform-version"] != "1.10.6" {
		t.Fatalf("plan-only run with a tool version: %v", pinned)
	}

	before := runCount()
	for _, tc := range []struct {
		attrs   map[string]any
		pointer string
		detail  string
	}{
		{map[string]any{"target-addrs": []string{"terraform_data.x", "terraform_data.x -destroy"}}, "/data/attributes/target-addrs", "address 2"},
		{map[string]any{"replace-addrs": []string{""}}, "/data/attributes/replace-addrs", "is empty"},
		{map[string]any{"refresh-only": true, "refresh": false}, "/data/attributes/refresh-only", "refresh-only"},
		{map[string]any{"variables": []map[string]string{{"key": "k", "value": "1"}, {"key": "k", "value": "2"}}}, "/data/attributes/variables", "twice"},
		{map[string]any{"terraform-version": "1.10.6"}, "/data/attributes/terraform-version", "plan-only"},
		{map[string]any{"plan-only": true, "terraform-version": "1.0.0"}, "/data/attributes/terraform-version", "1.10.6"},
		{map[string]any{"plan-only": true, "save-plan": true}, "/data/attributes/save-plan", "plan_and_apply"},
	} {
		resp := create(tc.attrs)
		var doc struct {
			Errors []struct {
				Status string `json:"status"`
				Code   string `json:"code"`
				Detail string `json:"detail"`
				Source struct {
					Pointer string `json:"pointer"`
				} `json:"source"`
				Meta map[string]string `json:"meta"`
			} `json:"errors"`
		}
		resp.JSON(t, &doc)
		if resp.Status != http.StatusUnprocessableEntity || len(doc.Errors) != 1 || doc.Errors[0].Status != "422" ||
			doc.Errors[0].Source.Pointer != tc.pointer || !strings.Contains(doc.Errors[0].Detail, tc.detail) ||
			doc.Errors[0].Meta["request_id"] == "" || doc.Errors[0].Meta["request_id"] != resp.Header.Get("X-Request-Id") {
			t.Errorf("%v: %d %s", tc.attrs, resp.Status, resp.Body)
		}
		if strings.Contains(doc.Errors[0].Detail, "-destroy") {
			t.Errorf("the error repeats the value sent: %s", doc.Errors[0].Detail)
		}
	}
	if resp := create(map[string]any{"auto-apply": true}); resp.Status != http.StatusUnprocessableEntity ||
		!strings.Contains(string(resp.Body), "invalid_document") {
		t.Errorf("auto-apply: %d %s", resp.Status, resp.Body)
	}
	if resp := create(map[string]any{"is-destroy": true, "target-addrs": []string{"terraform_data.x"}}); resp.Status < 400 ||
		!strings.Contains(string(resp.Body), "destroy") {
		t.Errorf("destroy: %d %s", resp.Status, resp.Body)
	}
	if n := runCount(); n != before {
		t.Fatalf("refused run documents persisted %d runs", n-before)
	}
}
