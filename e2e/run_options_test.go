package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

const runOptionsConfig = `variable "greeting" {
  type = string
}

resource "terraform_data" "replaced" {
  input = "stable"
}

resource "terraform_data" "greeted" {
  input = var.greeting
}

resource "terraform_data" "untargeted" {
  input = "never planned"
}

output "greeting" {
  value = terraform_data.greeted.output
}
`

// TestRunOptionsReachThePlan creates a run through /api/v2 as HCP
// Terraform clients do, with targets, a forced replacement and a run
// variable over the workspace variable of the same key; the worker plans
// it in the sandbox. The plan changes only the targeted resources, replaces
// the one named, uses the run's value, and approving it applies exactly
// that. A run variable that is not an HCL expression fails its plan.
func TestRunOptionsReachThePlan(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "options")
	wsID := s.createWorkspace(t, m, "options", "us")
	s.setVariable(t, m, wsID, "greeting", "from the workspace", false, false)
	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": runOptionsConfig})

	// The first run, through /v1, creates only the resource to replace.
	var first runView
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs", map[string]any{"workspace_id": wsID, "configuration_version_id": cfg,
		"kind": "plan_and_apply", "target_addrs": []string{"terraform_data.replaced"}}, &first, m.mutate(uniqueKey("run"))...); st != http.StatusCreated {
		t.Fatalf("create the first run: %d", st)
	}
	first = s.waitRun(t, m, first.ID, 2*time.Minute, status("awaiting_approval", "errored"))
	if first.Status != "awaiting_approval" || first.Plan.ResourceAdditions == nil || *first.Plan.ResourceAdditions != 1 {
		t.Fatalf("targeted first plan: %+v\n%s", first, s.logsOf(t, m, first.ID))
	}
	s.approveAndWait(t, m, first)

	created := s.createTFERun(t, m, wsID, cfg, map[string]any{"message": "with options",
		"target-addrs": []string{"terraform_data.greeted", "terraform_data.replaced"}, "replace-addrs": []string{"terraform_data.replaced"},
		"variables": []map[string]string{{"key": "greeting", "value": `"from the run"`}}})
	r := s.waitRun(t, m, created, 2*time.Minute, status("awaiting_approval", "errored", "planned_and_finished"))
	if r.Status != "awaiting_approval" {
		t.Fatalf("plan with options: %+v\n%s", r, s.logsOf(t, m, r.ID))
	}
	var changes struct {
		Data struct {
			Resources []struct {
				Address string          `json:"address"`
				Action  string          `json:"action"`
				Actions []string        `json:"actions"`
				After   json.RawMessage `json:"after"`
			} `json:"resources"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(s.rawGet(t, m, "/v1/runs/"+r.ID+"/plan-changes")), &changes); err != nil {
		t.Fatal(err)
	}
	planned := map[string]string{}
	for _, res := range changes.Data.Resources {
		planned[res.Address] = res.Action + " " + strings.Join(res.Actions, ",")
		if res.Address == "terraform_data.greeted" && !strings.Contains(string(res.After), "from the run") {
			t.Errorf("the greeted resource is planned with %s, want the run variable's value", res.After)
		}
	}
	if len(planned) != 2 || !strings.HasPrefix(planned["terraform_data.greeted"], "create") ||
		!strings.HasPrefix(planned["terraform_data.replaced"], "replace delete,create") {
		t.Fatalf("planned changes %v, want greeted created and replaced -/+ only", planned)
	}
	logs := s.logsOf(t, m, r.ID)
	if !strings.Contains(logs, "will be replaced, as requested") || !strings.Contains(logs, "Resource targeting is in effect") {
		t.Errorf("the plan log does not show the replacement and the targeting:\n%s", logs)
	}

	s.approveAndWait(t, m, r)
	_, _, state := s.currentState(t, m, wsID)
	if !strings.Contains(state, `"from the run"`) || strings.Contains(state, "from the workspace") || strings.Contains(state, "never planned") {
		t.Fatalf("state after the apply:\n%s", state)
	}

	// A value that is no HCL expression, accepted as HCP Terraform accepts
	// it, fails the plan with the variable named and nothing planned.
	bad := s.createTFERun(t, m, wsID, cfg, map[string]any{"variables": []map[string]string{{"key": "greeting", "value": "Hello, World!"}}})
	failed := s.waitRun(t, m, bad, 2*time.Minute, status("errored", "awaiting_approval", "planned_and_finished"))
	if failed.Status != "errored" || failed.TerminalReason == nil || *failed.TerminalReason != "variable_value_invalid" {
		t.Fatalf("plan with an invalid run variable: %+v", failed)
	}
	if logs := s.logsOf(t, m, bad); !strings.Contains(logs, `variable "greeting" is not a valid HCL expression`) {
		t.Fatalf("the log does not name the invalid variable:\n%s", logs)
	}
}

// createTFERun creates a run through /api/v2 with the member's API token,
// as go-tfe does, and returns its ID.
func (s *Stack) createTFERun(t *testing.T, m member, wsID, cfgID string, attrs map[string]any) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"data": map[string]any{"type": "runs", "attributes": attrs, "relationships": map[string]any{
		"workspace":             map[string]any{"data": map[string]string{"type": "workspaces", "id": wsID}},
		"configuration-version": map[string]any{"data": map[string]string{"type": "configuration-versions", "id": cfgID}}}}})
	st, answer := call(t, s.Client, http.MethodPost, s.APIURL+"/api/v2/runs", body, "Authorization", "Bearer "+m.token,
		"Content-Type", "application/vnd.api+json")
	var doc struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if st != http.StatusCreated || json.Unmarshal(answer, &doc) != nil {
		t.Fatalf("create run through /api/v2: %d %s", st, answer)
	}
	return doc.Data.ID
}

// approveAndWait approves a run's current review and waits for its apply.
func (s *Stack) approveAndWait(t *testing.T, m member, r runView) {
	t.Helper()
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve %s: %d", r.ID, st)
	}
	applied := s.waitRun(t, m, r.ID, 2*time.Minute, status("applied", "errored", "recovery_required"))
	if applied.Status != "applied" {
		t.Fatalf("apply of %s: %+v\n%s", r.ID, applied, s.logsOf(t, m, r.ID))
	}
}

// TestSavedCloudPlanWithTheTofuCLI drives OpenTofu's saved cloud plans:
// `tofu plan -out` with a cloud block creates a saved-plan run that plans
// in the sandbox and waits without locking the workspace; the protocol's
// apply action applies exactly that run. A saved plan made before the
// state moved is discarded when the new state becomes current, and its
// apply is refused.
func TestSavedCloudPlanWithTheTofuCLI(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "saved")
	tf := newTofuDir(t, s, m)
	tf.run(t, "init")
	auth := []string{"Authorization", "Bearer " + m.token}
	workspace := func() (id string, locked bool) {
		t.Helper()
		st, body := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/organizations/"+m.slug+"/workspaces/demo", nil, auth...)
		var doc struct {
			Data struct {
				ID         string `json:"id"`
				Attributes struct {
					Locked bool `json:"locked"`
				} `json:"attributes"`
			} `json:"data"`
		}
		if st != http.StatusOK || json.Unmarshal(body, &doc) != nil {
			t.Fatalf("workspace: %d %s", st, body)
		}
		return doc.Data.ID, doc.Data.Attributes.Locked
	}

	out := tf.run(t, "plan", "-out=stale.tfplan")
	if !strings.Contains(out, "Plan: 1 to add") || !strings.Contains(out, "This saved plan waits for its apply") {
		t.Fatalf("saved plan output:\n%s", out)
	}
	wsID, _ := workspace()
	stale := s.newestRun(t, m, wsID, 30*time.Second, status("awaiting_approval"))
	if out := tf.run(t, "plan", "-out=fresh.tfplan"); !strings.Contains(out, "Plan: 1 to add") {
		t.Fatalf("second saved plan output:\n%s", out)
	}
	fresh := s.newestRun(t, m, wsID, 30*time.Second, status("awaiting_approval"))
	if fresh.ID == stale.ID || !strings.Contains(s.rawGet(t, m, "/v1/runs/"+fresh.ID), `"save_plan":true`) {
		t.Fatalf("saved plans %s and %s; the second one reads %s", stale.ID, fresh.ID, s.rawGet(t, m, "/v1/runs/"+fresh.ID))
	}
	if _, locked := workspace(); locked {
		t.Fatal("a waiting saved plan locked the workspace")
	}
	// OpenTofu loads a saved cloud plan only when its run ID starts with
	// "run-" (SPEC fixes Cairn's as run_), so the CLI cannot apply the
	// file; the plan log said so, and the protocol's apply action does it.
	if out := tf.fail(t, "apply", "fresh.tfplan"); !strings.Contains(out, "invalid run ID") {
		t.Fatalf("tofu apply of the saved plan file:\n%s", out)
	}
	applyAction := func(runID string) (int, string) {
		st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/api/v2/runs/"+runID+"/actions/apply", []byte(`{}`),
			append(auth, "Content-Type", "application/vnd.api+json")...)
		return st, string(body)
	}
	if st, body := applyAction(fresh.ID); st != http.StatusAccepted {
		t.Fatalf("applying the saved plan: %d %s", st, body)
	}
	applied := s.waitRun(t, m, fresh.ID, 2*time.Minute, status("applied", "errored", "recovery_required"))
	if applied.Status != "applied" || applied.Apply.StateVersionID == nil {
		t.Fatalf("applied saved plan: %+v\n%s", applied, s.logsOf(t, m, fresh.ID))
	}
	// The first saved plan was made against the state before: the new
	// state discarded it, and it cannot be applied.
	if r := s.readRun(t, m, stale.ID); r.Status != "rejected" || deref(r.TerminalReason) != "state_changed_since_plan" || r.Decision != nil {
		t.Fatalf("the saved plan made before the state moved: %+v", r)
	}
	st, body := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/runs/"+stale.ID, nil, auth...)
	if st != http.StatusOK || !strings.Contains(string(body), `"status":"discarded"`) {
		t.Fatalf("the stale saved plan as the protocol shows it: %d %s", st, body)
	}
	if st, body := applyAction(stale.ID); st != http.StatusConflict || !strings.Contains(body, "RUN_ACTION_NOT_ALLOWED") {
		t.Fatalf("applying a saved plan made before the state moved: %d %s", st, body)
	}
}
