package v1_test

import (
	"net/http"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// TestRunsNameTheirWorkspaces: a page of runs and a run's review carry
// each run's workspace name as it is now, read with the page, so a
// dashboard of an organization with thousands of workspaces names every
// row without listing them.
func TestRunsNameTheirWorkspaces(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := env.WithOrganization("Names")
	var project struct{ ID string }
	owner.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "names"}).MustStatus(t, http.StatusCreated).Data(t, &project)
	settings := map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}
	runIn := map[string]string{}
	for _, name := range []string{"alpha", "beta"} {
		var ws, cv, created struct{ ID string }
		owner.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": project.ID, "name": name,
			"execution_settings": settings}).MustStatus(t, http.StatusCreated).Data(t, &ws)
		gzipUpload(owner, "/v1/workspaces/"+ws.ID+"/configuration-versions", configArchive).MustStatus(t, http.StatusCreated).Data(t, &cv)
		owner.Mutate(http.MethodPost, "/v1/runs", map[string]string{"workspace_id": ws.ID, "configuration_version_id": cv.ID,
			"kind": "plan_only"}).MustStatus(t, http.StatusCreated).Data(t, &created)
		runIn[created.ID] = ws.ID
		if name == "beta" {
			owner.Mutate(http.MethodPatch, "/v1/workspaces/"+ws.ID, map[string]any{"name": "gamma",
				"execution_settings": settings}).MustStatus(t, http.StatusOK)
		}
	}
	want := map[string]string{}
	for runID, wsID := range runIn {
		var w struct{ Name string }
		owner.Get("/v1/workspaces/"+wsID).MustStatus(t, http.StatusOK).Data(t, &w)
		want[runID] = w.Name
	}

	var list []struct {
		ID            string `json:"id"`
		WorkspaceName string `json:"workspace_name"`
	}
	owner.Get("/v1/runs?limit=10").MustStatus(t, http.StatusOK).Data(t, &list)
	if len(list) != 2 {
		t.Fatalf("%d runs listed, want 2", len(list))
	}
	for _, r := range list {
		if r.WorkspaceName != want[r.ID] {
			t.Errorf("run %s lists workspace %q, want %q", r.ID, r.WorkspaceName, want[r.ID])
		}
		var review struct {
			WorkspaceName string `json:"workspace_name"`
		}
		owner.Get("/v1/runs/"+r.ID).MustStatus(t, http.StatusOK).Data(t, &review)
		if review.WorkspaceName != want[r.ID] {
			t.Errorf("run %s's review names workspace %q, want %q", r.ID, review.WorkspaceName, want[r.ID])
		}
	}
	if want[list[0].ID] != "gamma" && want[list[1].ID] != "gamma" {
		t.Errorf("the renamed workspace is not named by its new name: %v", want)
	}
}
