package tfe_test

import (
	"net/http"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// TestForceCancelAndOrganizationRuns: a run offers force-cancel only after
// a cancel and its cool-off, a decision's comment is kept with it, and the
// organization run list filters as go-tfe sends it, inside the tenant.
func TestForceCancelAndOrganizationRuns(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Forcer")
	other := newCloudUser(t, env, "Elsewhere")
	ws := u.uploadedWorkspace(t, "forced")
	u.newRun(t, ws)
	// The second run waits behind the first, which holds the workspace.
	pending := u.newRun(t, ws)

	byName := decode(t, u.call(t, http.MethodGet, "/api/v2/organizations/"+u.org+"/workspaces/forced", nil).MustStatus(t, http.StatusOK)).Data
	if byName.Attributes["run-count"] != 2.0 {
		t.Fatalf("workspace read by name: run-count %v", byName.Attributes["run-count"])
	}
	list := func(u *cloudUser, query string) (int, []string) {
		t.Helper()
		var d struct {
			Data []struct{ ID string } `json:"data"`
		}
		r := u.call(t, http.MethodGet, "/api/v2/organizations/"+u.org+"/runs"+query, nil)
		if r.Status != http.StatusOK {
			return r.Status, nil
		}
		r.JSON(t, &d)
		var ids []string
		for _, x := range d.Data {
			ids = append(ids, x.ID)
		}
		return r.Status, ids
	}
	for query, want := range map[string]int{
		"":                                  2,
		"?filter[status]=pending":           1,
		"?filter[status]=applied,planned":   0,
		"?filter[status]=no-such-status":    0,
		"?filter[workspace_names]=FORCED":   2,
		"?filter[workspace_names]=other":    0,
		"?filter[operation]=plan_and_apply": 2,
		"?filter[operation]=save_plan":      0,
		"?filter[source]=tfe-api":           2,
		"?filter[source]=tfe-ui":            0,
		"?search[commit]=abc":               0,
		"?page[number]=999&page[size]=100":  0,
	} {
		if st, ids := list(u, query); st != http.StatusOK || len(ids) != want {
			t.Errorf("organization runs%s = %d %v, want %d runs", query, st, ids, want)
		}
	}
	if st, ids := list(u, "?filter[status]=pending"); len(ids) != 1 || ids[0] != pending {
		t.Fatalf("pending runs = %d %v, want %s", st, ids, pending)
	}
	// Another tenant sees neither the list nor the run.
	if r := other.call(t, http.MethodGet, "/api/v2/organizations/"+u.org+"/runs", nil); r.Status != http.StatusNotFound {
		t.Fatalf("another tenant's organization runs = %d", r.Status)
	}
	if r := other.call(t, http.MethodPost, "/api/v2/runs/"+pending+"/actions/force-cancel", nil); r.Status != http.StatusNotFound {
		t.Fatalf("another tenant's force-cancel = %d", r.Status)
	}

	read := func() document {
		t.Helper()
		return decode(t, u.call(t, http.MethodGet, "/api/v2/runs/"+pending, nil).MustStatus(t, http.StatusOK))
	}
	r := read().Data
	actions, perms := r.Attributes["actions"].(map[string]any), r.Attributes["permissions"].(map[string]any)
	if actions["is-force-cancelable"] != false || perms["can-force-cancel"] != true || r.Attributes["force-cancel-available-at"] != nil {
		t.Fatalf("run before a cancel: actions %v, permissions %v, available %v", actions, perms, r.Attributes["force-cancel-available-at"])
	}
	// No force-cancel without a cancel first.
	if r := u.call(t, http.MethodPost, "/api/v2/runs/"+pending+"/actions/force-cancel", nil); r.Status != http.StatusConflict {
		t.Fatalf("force-cancel before a cancel = %d %s", r.Status, r.Body)
	}
	u.call(t, http.MethodPost, "/api/v2/runs/"+pending+"/actions/cancel", map[string]any{"comment": "not today"}).MustStatus(t, http.StatusAccepted)
	r = read().Data
	if r.Attributes["status"] != "canceled" || r.Attributes["canceled-at"] == nil || r.Attributes["force-cancel-available-at"] == nil {
		t.Fatalf("canceled run: %v", r.Attributes)
	}
	if comments, _ := r.Relationships["comments"].Data.([]any); len(comments) != 1 {
		t.Fatalf("the cancel's comment: %v", r.Relationships["comments"])
	}
	// A run that already ended has nothing left to kill.
	if r.Attributes["actions"].(map[string]any)["is-force-cancelable"] != false {
		t.Fatalf("an ended run is force-cancelable: %v", r.Attributes["actions"])
	}
	if r := u.call(t, http.MethodPost, "/api/v2/runs/"+pending+"/actions/force-cancel", nil); r.Status != http.StatusConflict {
		t.Fatalf("force-cancel of an ended run = %d %s", r.Status, r.Body)
	}
}
