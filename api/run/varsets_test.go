package run_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/workspace"
)

// varset creates a variable set over /v1 with one variable per entry and
// applies it: global, or to the projects and workspaces given.
func (h *harness) varset(name string, priority, global bool, projects, workspaces []string, vars ...map[string]any) string {
	h.t.Helper()
	var s struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/variable-sets", map[string]any{"name": name, "priority": priority}).
		MustStatus(h.t, http.StatusCreated).Data(h.t, &s)
	h.owner.Mutate(http.MethodPut, "/v1/variable-sets/"+s.ID+"/scope", map[string]any{"global": global,
		"project_ids": projects, "workspace_ids": workspaces}).MustStatus(h.t, http.StatusOK)
	for _, v := range vars {
		if _, ok := v["sensitive"]; !ok {
			v["sensitive"] = false
		}
		h.owner.Mutate(http.MethodPost, "/v1/variable-sets/"+s.ID+"/variables", v).MustStatus(h.t, http.StatusCreated)
	}
	return s.ID
}

func (h *harness) projectOf(workspaceID string) string {
	h.t.Helper()
	var w struct {
		ProjectID string `json:"project_id"`
	}
	h.owner.Get("/v1/workspaces/"+workspaceID).MustStatus(h.t, http.StatusOK).Data(h.t, &w)
	return w.ProjectID
}

func inputsByKey(t *testing.T, h *harness, r run.Run) map[string]workspace.ResolvedVariable {
	t.Helper()
	inputs, err := h.runs.RunInputs(h.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]workspace.ResolvedVariable{}
	for _, v := range inputs {
		out[v.Category+"/"+v.Key] = v
	}
	return out
}

// TestRunsPinTheEffectiveVariables: a run pins the winner of each key
// (project set under the workspace variable, priority global set over
// both and over a run variable, env values beside terraform ones), a later
// edit of a set never reaches it, the next run's input digest changes with
// a set's value, scope and priority, and an untrusted run pins no
// sensitive set value.
func TestRunsPinTheEffectiveVariables(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("effective")
	prj := h.projectOf(ws)
	h.variable(ws, "region", "us-east-1", false, false)
	projectSet := h.varset("project-defaults", false, false, []string{prj}, nil,
		map[string]any{"key": "region", "value": "eu-west-1"},
		map[string]any{"key": "size", "value": "small"},
		map[string]any{"key": "DB_PASSWORD", "value": "set-secret-91c4", "category": "env", "sensitive": true})
	first := h.createRun(ws)
	got := inputsByKey(t, h, first)
	if got["terraform/region"].Value != "us-east-1" || got["terraform/size"].Value != "small" ||
		got["env/DB_PASSWORD"].Value != "set-secret-91c4" || !got["env/DB_PASSWORD"].Sensitive || len(got) != 3 {
		t.Fatalf("first run's inputs %+v", got)
	}

	// A priority global set wins over the workspace variable and a run
	// variable of the same key.
	h.varset("pinned-region", true, true, nil, nil, map[string]any{"key": "region", "value": "ap-south-1"})
	var created struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/runs", map[string]any{"workspace_id": ws, "configuration_version_id": h.uploadConfiguration(ws),
		"kind": "plan_and_apply", "message": "with -var", "variables": []map[string]string{{"key": "region", "value": `"from-the-cli"`}}}).
		MustStatus(t, http.StatusCreated).Data(t, &created)
	second := h.read(created.ID)
	if v := inputsByKey(t, h, second)["terraform/region"]; v.Value != "ap-south-1" || !v.Priority {
		t.Fatalf("second run's region %+v, want the priority set's", v)
	}
	if bytes.Equal(second.InputSnapshotDigest, first.InputSnapshotDigest) {
		t.Fatal("a new priority set left the input digest unchanged")
	}

	// Editing the project set reaches neither existing run; the next run
	// gets the new value and a new digest.
	var vars struct {
		Variables []struct{ ID, Key string } `json:"variables"`
	}
	h.owner.Get("/v1/variable-sets/"+projectSet).MustStatus(t, http.StatusOK).Data(t, &vars)
	for _, v := range vars.Variables {
		if v.Key == "size" {
			h.owner.Mutate(http.MethodPatch, "/v1/variable-sets/"+projectSet+"/variables/"+v.ID,
				map[string]any{"value": "large", "sensitive": false}).MustStatus(t, http.StatusOK)
		}
	}
	if v := inputsByKey(t, h, first)["terraform/size"]; v.Value != "small" {
		t.Fatalf("an existing run sees the edited value: %+v", v)
	}
	third := h.createRun(ws)
	if v := inputsByKey(t, h, third)["terraform/size"]; v.Value != "large" {
		t.Fatalf("a new run's size %+v", v)
	}
	if bytes.Equal(third.InputSnapshotDigest, second.InputSnapshotDigest) {
		t.Fatal("a set value change left the input digest unchanged")
	}
	// The same inputs give the same digest; a scope change (project to
	// workspace, same values) and a priority change give another.
	same := h.createRun(ws)
	if !bytes.Equal(same.InputSnapshotDigest, third.InputSnapshotDigest) {
		t.Fatal("equal inputs gave different digests")
	}
	h.owner.Mutate(http.MethodPut, "/v1/variable-sets/"+projectSet+"/scope", map[string]any{"global": false,
		"workspace_ids": []string{ws}}).MustStatus(t, http.StatusOK)
	rescoped := h.createRun(ws)
	if bytes.Equal(rescoped.InputSnapshotDigest, same.InputSnapshotDigest) {
		t.Fatal("a scope change left the input digest unchanged")
	}
	h.owner.Mutate(http.MethodPatch, "/v1/variable-sets/"+projectSet, map[string]any{"priority": true}).MustStatus(t, http.StatusOK)
	prioritized := h.createRun(ws)
	if bytes.Equal(prioritized.InputSnapshotDigest, rescoped.InputSnapshotDigest) {
		t.Fatal("a priority change left the input digest unchanged")
	}

	// An agent's (untrusted) run gets no sensitive set value at all.
	proposal, err := h.createAs(h.agentOf(), run.CreateInput{WorkspaceID: ws, ConfigurationVersionID: h.uploadConfiguration(ws),
		Kind: run.KindPlanAndApply, Message: "an agent's proposal", Source: "api"})
	if err != nil {
		t.Fatal(err)
	}
	sensitive, _, _ := h.snapshotOf(proposal)
	if len(sensitive) != 0 {
		t.Fatalf("an untrusted run pinned sensitive %v", sensitive)
	}
	if _, ok := inputsByKey(t, h, proposal)["env/DB_PASSWORD"]; ok {
		t.Fatal("an untrusted run's inputs hold the sensitive set value")
	}
}
