package tfe_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// TestRunSemanticsClientsRelyOn walks what HCP Terraform clients expect of
// runs: provisional and current configuration versions, a run without a
// version, the run's workspace lock, readable status timestamps, includes,
// comments and run events.
func TestRunSemanticsClientsRelyOn(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Runner")
	ws := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces", map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"name": "runs", "terraform-version": "1.10.6"}}}).MustStatus(t, http.StatusCreated)).Data
	archive := devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "x" {}`})
	newVersion := func(provisional bool) string {
		t.Helper()
		cv := decode(t, u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/configuration-versions", map[string]any{"data": map[string]any{
			"type": "configuration-versions", "attributes": map[string]any{"provisional": provisional}}}).MustStatus(t, http.StatusCreated)).Data
		if cv.Attributes["provisional"] != provisional {
			t.Fatalf("provisional %v created as %v", provisional, cv.Attributes["provisional"])
		}
		if resp := putUpload(t, cv.Attributes["upload-url"].(string), archive); resp.StatusCode != http.StatusOK {
			t.Fatalf("upload = %d", resp.StatusCode)
		}
		read := decode(t, u.call(t, http.MethodGet, "/api/v2/configuration-versions/"+cv.ID, nil).MustStatus(t, http.StatusOK)).Data
		if _, ok := read.Attributes["upload-url"]; ok || read.Attributes["status"] != "uploaded" {
			t.Fatalf("uploaded version still offers an upload: %v", read.Attributes)
		}
		return cv.ID
	}
	first := newVersion(false)
	newVersion(true)
	readWS := func() map[string]any {
		t.Helper()
		var d struct {
			Data struct {
				Attributes map[string]any `json:"attributes"`
				// One-object relationships; "vars" holds a list.
				Relationships map[string]struct {
					Data any `json:"data"`
				} `json:"relationships"`
			} `json:"data"`
		}
		u.call(t, http.MethodGet, "/api/v2/workspaces/"+ws.ID, nil).MustStatus(t, http.StatusOK).JSON(t, &d)
		out := map[string]any{"run-count": d.Data.Attributes["run-count"]}
		for _, rel := range []string{"current-configuration-version", "latest-run", "locked-by"} {
			if ref, ok := d.Data.Relationships[rel].Data.(map[string]any); ok {
				out[rel] = fmt.Sprint(ref["type"]) + "/" + fmt.Sprint(ref["id"])
			}
		}
		return out
	}
	if got := readWS(); got["current-configuration-version"] != "configuration-versions/"+first || got["run-count"] != 0.0 {
		t.Fatalf("workspace before any run: %v", got)
	}

	// A run without a configuration version runs the current one.
	created := decode(t, u.call(t, http.MethodPost, "/api/v2/runs", map[string]any{"data": map[string]any{"type": "runs",
		"relationships": map[string]any{"workspace": map[string]any{"data": map[string]string{"type": "workspaces", "id": ws.ID}}}}}).
		MustStatus(t, http.StatusCreated)).Data
	if cv := created.Relationships["configuration-version"].Data.(map[string]any); cv["id"] != first {
		t.Fatalf("run without a version runs %v, want %s", cv, first)
	}
	if events, _ := created.Relationships["run-events"].Data.([]any); len(events) == 0 {
		t.Fatalf("created run names no run events: %v", created.Relationships["run-events"])
	}
	if got := readWS(); got["locked-by"] != "runs/"+created.ID || got["latest-run"] != "runs/"+created.ID || got["run-count"] != 1.0 {
		t.Fatalf("workspace with a run: %v", got)
	}
	unlock := u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/actions/unlock", nil)
	if d := decode(t, unlock); unlock.Status != http.StatusConflict || !strings.Contains(d.Errors[0].Detail, "is locked by Run") {
		t.Fatalf("unlock of the run's lock = %d %s", unlock.Status, unlock.Body)
	}

	// Status timestamps are hyphenated; includes are honoured.
	read := u.call(t, http.MethodGet, "/api/v2/runs/"+created.ID+"?include=created_by,workspace,plan,apply,configuration_version,unknown", nil).
		MustStatus(t, http.StatusOK)
	var full struct {
		Data struct {
			Attributes struct {
				StatusTimestamps map[string]string `json:"status-timestamps"`
			} `json:"attributes"`
		} `json:"data"`
		Included []struct {
			ID         string         `json:"id"`
			Type       string         `json:"type"`
			Attributes map[string]any `json:"attributes"`
		} `json:"included"`
	}
	if err := json.Unmarshal(read.Body, &full); err != nil {
		t.Fatal(err)
	}
	for key := range full.Data.Attributes.StatusTimestamps {
		if strings.Contains(key, "_") || !strings.HasSuffix(key, "-at") {
			t.Fatalf("unreadable status timestamp %q", key)
		}
	}
	if _, ok := full.Data.Attributes.StatusTimestamps["plan-queueable-at"]; !ok {
		t.Fatalf("no plan-queueable-at: %v", full.Data.Attributes.StatusTimestamps)
	}
	if _, ok := full.Data.Attributes.StatusTimestamps["plan-queued-at"]; !ok {
		t.Fatalf("no plan-queued-at: %v", full.Data.Attributes.StatusTimestamps)
	}
	types := map[string]bool{}
	for _, inc := range full.Included {
		types[inc.Type] = true
		if inc.Type == "plans" {
			if _, ok := inc.Attributes["status-timestamps"].(map[string]any)["queued-at"]; !ok {
				t.Fatalf("plan without queued-at: %v", inc.Attributes)
			}
		}
	}
	for _, typ := range []string{"users", "workspaces", "plans", "applies", "configuration-versions"} {
		if !types[typ] {
			t.Fatalf("include lacks %s: %s", typ, read.Body)
		}
	}

	// Comments, and the run's history with them.
	comment := decode(t, u.call(t, http.MethodPost, "/api/v2/runs/"+created.ID+"/comments", map[string]any{"data": map[string]any{
		"type": "comments", "attributes": map[string]any{"body": "looks right"}}}).MustStatus(t, http.StatusCreated)).Data
	if r := u.call(t, http.MethodPost, "/api/v2/runs/"+created.ID+"/comments", map[string]any{"data": map[string]any{
		"type": "comments", "attributes": map[string]any{"body": " "}}}); r.Status != http.StatusUnprocessableEntity && r.Status != http.StatusBadRequest {
		t.Fatalf("empty comment = %d %s", r.Status, r.Body)
	}
	var list struct {
		Data []struct {
			ID         string         `json:"id"`
			Attributes map[string]any `json:"attributes"`
		} `json:"data"`
	}
	u.call(t, http.MethodGet, "/api/v2/runs/"+created.ID+"/comments", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != comment.ID || list.Data[0].Attributes["body"] != "looks right" {
		t.Fatalf("comments: %+v", list.Data)
	}
	u.call(t, http.MethodGet, "/api/v2/runs/"+created.ID+"/run-events?include=actor,comment", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	var actions []string
	for _, e := range list.Data {
		actions = append(actions, e.Attributes["action"].(string))
	}
	if strings.Join(actions, ",") != "pending,plan_queued,commented" {
		t.Fatalf("run events: %v", actions)
	}

	// Another organization sees none of it.
	other := newCloudUser(t, env, "Elsewhere")
	for _, path := range []string{"/api/v2/runs/" + created.ID + "/comments", "/api/v2/comments/" + comment.ID,
		"/api/v2/runs/" + created.ID + "/run-events", "/api/v2/workspaces/" + ws.ID + "/configuration-versions",
		"/api/v2/configuration-versions/" + first + "/download"} {
		if r := other.call(t, http.MethodGet, path, nil); r.Status != http.StatusNotFound {
			t.Fatalf("%s from another organization = %d", path, r.Status)
		}
	}
	if r := u.call(t, http.MethodGet, "/api/v2/configuration-versions/"+first+"/download", nil); r.Status != http.StatusOK || len(r.Body) != len(archive) {
		t.Fatalf("download = %d, %d bytes", r.Status, len(r.Body))
	}
	if r := u.call(t, http.MethodPost, "/api/v2/configuration-versions/"+first+"/actions/archive", nil); r.Status != http.StatusConflict {
		t.Fatalf("archiving the current version = %d %s", r.Status, r.Body)
	}

	// A workspace whose run has a history and comments can still be deleted
	// once the run ended.
	u.call(t, http.MethodPost, "/api/v2/runs/"+created.ID+"/actions/cancel", nil).MustStatus(t, http.StatusAccepted)
	if got := readWS(); got["locked-by"] != nil {
		t.Fatalf("canceled run still holds the lock: %v", got)
	}
	if r := u.call(t, http.MethodDelete, "/api/v2/workspaces/"+ws.ID, nil); r.Status != http.StatusNoContent && r.Status != http.StatusOK {
		t.Fatalf("deleting the workspace = %d %s", r.Status, r.Body)
	}
}
