package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

const pinnedInputsConfig = `variable "greeting" {
  type = string
}

variable "passphrase" {
  type      = string
  sensitive = true
}

resource "terraform_data" "greeting" {
  input = var.greeting
}

resource "terraform_data" "passphrase" {
  input = var.passphrase
}
`

// TestApprovedApplyUsesThePinnedValues approves plans that use workspace
// variables, then edits the variables in one case and deletes them in the
// other before the apply runs (the worker is stopped meanwhile, so the
// approved apply waits for it): both applies succeed with the values the
// runs pinned at creation, which the published state shows.
func TestApprovedApplyUsesThePinnedValues(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "pinned")
	for _, change := range []string{"edit", "delete"} {
		wsID := s.createWorkspace(t, m, "pinned-"+change, "us")
		s.setVariable(t, m, wsID, "greeting", "pinned-greeting-"+change, false, false)
		s.setVariable(t, m, wsID, "passphrase", "pinned-passphrase-"+change, true, false)
		cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": pinnedInputsConfig})
		st, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
		if st != http.StatusCreated {
			t.Fatalf("create run: %d", st)
		}
		r = s.waitRun(t, m, r.ID, 90*time.Second, status("awaiting_approval"))

		s.StopWorker(t, time.Minute)
		if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
			t.Fatalf("approve: %d", st)
		}
		var vars []struct{ ID, Key string }
		s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+wsID+"/variables", nil, &vars, m.cookie()...)
		for _, v := range vars {
			var st int
			if change == "edit" {
				st = s.apiJSON(t, http.MethodPut, "/v1/workspace-variables/"+v.ID, map[string]any{"value": "edited-after-approval",
					"sensitive": v.Key == "passphrase"}, nil, m.mutate(uniqueKey("edit"))...)
			} else {
				st = s.apiJSON(t, http.MethodDelete, "/v1/workspace-variables/"+v.ID, nil, nil, m.mutate(uniqueKey("delete"))...)
			}
			if st != http.StatusOK {
				t.Fatalf("%s %s: %d", change, v.Key, st)
			}
		}
		if queued := s.readRun(t, m, r.ID); queued.Status != "apply_queued" {
			t.Fatalf("approved run while the worker is stopped: %s", queued.Status)
		}
		s.StartWorker(t)
		applied := s.waitRun(t, m, r.ID, 90*time.Second, status("applied", "errored", "recovery_required"))
		if applied.Status != "applied" {
			t.Fatalf("apply after the variables were %sed: %+v\n%s", change, applied, s.logsOf(t, m, r.ID))
		}
		_, _, state := s.currentState(t, m, wsID)
		if !strings.Contains(state, `"pinned-greeting-`+change+`"`) || !strings.Contains(state, `"pinned-passphrase-`+change+`"`) ||
			strings.Contains(state, "edited-after-approval") {
			t.Fatalf("state after the variables were %sed:\n%s", change, state)
		}
		if logs := s.logsOf(t, m, r.ID); strings.Contains(logs, "pinned-passphrase-") {
			t.Fatalf("the sensitive value reached the log:\n%s", logs)
		}
	}
}
