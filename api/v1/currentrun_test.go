package v1_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// TestWorkspaceCurrentRunCancelAndDecisionActor follows one run through a
// workspace's current run and its cancel (SPEC §2 Workspace, §2 Run
// decision, §3 Run): while the run waits it is the workspace's current run
// on /v1 (read and list) and the /api/v2 current-run relationship; a
// cancel of the queued run ends it canceled with a decision naming the
// person who canceled; the workspace then has no current run. Once that
// person leaves the organization the decision keeps their ID and its
// actor_name reads null.
func TestWorkspaceCurrentRunCancelAndDecisionActor(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := env.WithOrganization("Owner")
	canceler := env.SignUp("Canceler")
	env.Join(owner, canceler, "admin")
	token := userToken(t, owner)

	var ws struct {
		ID         string `json:"id"`
		CurrentRun *struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"current_run"`
	}
	var project struct{ ID string }
	owner.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "current"}).MustStatus(t, http.StatusCreated).Data(t, &project)
	owner.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": project.ID, "name": "current",
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).
		MustStatus(t, http.StatusCreated).Data(t, &ws)
	if ws.CurrentRun != nil {
		t.Fatalf("a new workspace has current run %+v", ws.CurrentRun)
	}
	var cv, created struct{ ID, Status string }
	gzipUpload(owner, "/v1/workspaces/"+ws.ID+"/configuration-versions", configArchive).MustStatus(t, http.StatusCreated).Data(t, &cv)
	owner.Mutate(http.MethodPost, "/v1/runs", map[string]string{"workspace_id": ws.ID, "configuration_version_id": cv.ID,
		"kind": "plan_and_apply"}).MustStatus(t, http.StatusCreated).Data(t, &created)

	currentRun := func(want string) {
		t.Helper()
		owner.Get("/v1/workspaces/"+ws.ID).MustStatus(t, http.StatusOK).Data(t, &ws)
		got := ""
		if ws.CurrentRun != nil {
			got = ws.CurrentRun.ID
		}
		var list struct {
			Data []struct {
				ID         string `json:"id"`
				CurrentRun *struct {
					ID string `json:"id"`
				} `json:"current_run"`
			} `json:"data"`
		}
		owner.Get("/v1/workspaces?project_id="+project.ID).MustStatus(t, http.StatusOK).JSON(t, &list)
		listed := "missing"
		for _, w := range list.Data {
			if w.ID == ws.ID {
				listed = ""
				if w.CurrentRun != nil {
					listed = w.CurrentRun.ID
				}
			}
		}
		var doc struct {
			Data struct {
				Relationships map[string]struct {
					Data json.RawMessage `json:"data"`
				} `json:"relationships"`
			} `json:"data"`
		}
		cloud(env, token, http.MethodGet, "/api/v2/workspaces/"+ws.ID, nil).MustStatus(t, http.StatusOK).JSON(t, &doc)
		compat := "missing"
		if rel, ok := doc.Data.Relationships["current-run"]; ok {
			var ref *struct{ ID, Type string }
			if err := json.Unmarshal(rel.Data, &ref); err != nil {
				t.Fatalf("current-run relationship %s: %v", rel.Data, err)
			}
			compat = ""
			if ref != nil && ref.Type == "runs" {
				compat = ref.ID
			}
		}
		if got != want || listed != want || compat != want {
			t.Fatalf("current run: /v1 read %q, /v1 list %q, /api/v2 current-run %q; want %q", got, listed, compat, want)
		}
	}
	currentRun(created.ID)
	if ws.CurrentRun.Status != created.Status {
		t.Fatalf("current run status %q, run is %q", ws.CurrentRun.Status, created.Status)
	}

	type decided struct {
		Status   string `json:"status"`
		Decision *struct {
			Action    string  `json:"action"`
			ActorID   string  `json:"actor_id"`
			ActorName *string `json:"actor_name"`
		} `json:"decision"`
	}
	var canceled decided
	canceler.Mutate(http.MethodPost, "/v1/runs/"+created.ID+"/actions/cancel", nil).MustStatus(t, http.StatusOK).Data(t, &canceled)
	if canceled.Status != "canceled" || canceled.Decision == nil || canceled.Decision.Action != "canceled" ||
		canceled.Decision.ActorID != canceler.ID || canceled.Decision.ActorName == nil || *canceled.Decision.ActorName != "Canceler" {
		t.Fatalf("canceled run %+v decision %+v", canceled, canceled.Decision)
	}
	currentRun("")

	owner.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/remove-member",
		Body: map[string]string{"user_id": canceler.ID}}).MustStatus(t, http.StatusOK)
	var after decided
	owner.Get("/v1/runs/"+created.ID).MustStatus(t, http.StatusOK).Data(t, &after)
	if after.Decision == nil || after.Decision.ActorID != canceler.ID || after.Decision.ActorName != nil {
		t.Fatalf("decision of a departed member %+v", after.Decision)
	}
}
