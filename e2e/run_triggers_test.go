package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// triggeredRun is the part of a triggered run's review the test reads.
type triggeredRun struct {
	ID               string  `json:"id"`
	Status           string  `json:"status"`
	Message          string  `json:"message"`
	Initiator        string  `json:"initiator"`
	TriggeredByRunID *string `json:"triggered_by_run_id"`
	CreatedBy        struct {
		Kind string `json:"kind"`
	} `json:"created_by"`
}

// workspaceRuns lists a workspace's runs, newest first.
func (s *Stack) workspaceRuns(t *testing.T, m member, workspaceID string) []triggeredRun {
	t.Helper()
	var runs []triggeredRun
	if st := s.apiJSON(t, http.MethodGet, "/v1/runs?workspace_id="+workspaceID+"&limit=50", nil, &runs, m.cookie()...); st != http.StatusOK {
		t.Fatalf("listing runs: %d", st)
	}
	return runs
}

// addSource makes source a run trigger source of workspace.
func (s *Stack) addSource(t *testing.T, m member, workspaceID, sourceID string) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"source_workspace_id": sourceID})
	return call(t, s.Client, http.MethodPost, s.APIURL+"/v1/workspaces/"+workspaceID+"/run-triggers", body,
		m.mutate(uniqueKey("rt"))...)
}

// applyManaged runs files in the workspace as a managed run, approved
// through the API, until it applied.
func (s *Stack) applyManaged(t *testing.T, m member, workspaceID string, files map[string]string) string {
	t.Helper()
	_, r := s.createRun(t, m, workspaceID, s.uploadConfiguration(t, m, workspaceID, files), "plan_and_apply")
	r = s.waitRun(t, m, r.ID, 120*time.Second, status("awaiting_approval"))
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	s.waitRun(t, m, r.ID, 120*time.Second, status("applied"))
	return r.ID
}

// TestRunTriggersWithManagedRuns: with B subscribed to A, a plan-only run
// of A starts nothing; applying A (approved through the API) starts exactly
// one run in B, which names A's run, plans and waits at awaiting_approval;
// the opposite trigger is refused as a cycle; once the trigger is deleted,
// applying A starts nothing. The dashboard shows B's source on B's settings
// and B on A's overview, and adds and removes a source from its picker.
func TestRunTriggersWithManagedRuns(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "triggers")
	a := s.createWorkspace(t, m, "trig-network", "us")
	b := s.createWorkspace(t, m, "trig-app", "us")
	s.uploadConfiguration(t, m, b, map[string]string{"main.tf": `resource "terraform_data" "app" { input = "app" }`})

	var created struct{ ID string }
	st, body := s.addSource(t, m, b, a)
	if st != http.StatusCreated {
		t.Fatalf("adding A as B's source: %d %s", st, body)
	}
	_ = json.Unmarshal(body, &struct{ Data any }{Data: &created})
	if st, body := s.addSource(t, m, a, b); st != http.StatusUnprocessableEntity || !strings.Contains(string(body), "RUN_TRIGGER_CYCLE") {
		t.Fatalf("A → B → A: %d %s, want 422 RUN_TRIGGER_CYCLE", st, body)
	}

	// A plan-only run of A never fires.
	_, planOnly := s.createRun(t, m, a, s.uploadConfiguration(t, m, a, map[string]string{"main.tf": `resource "terraform_data" "net" { input = "v0" }`}), "plan_only")
	s.waitRun(t, m, planOnly.ID, 120*time.Second, status("planned_and_finished"))
	time.Sleep(2 * time.Second)
	if runs := s.workspaceRuns(t, m, b); len(runs) != 0 {
		t.Fatalf("a plan-only run of A started runs in B: %+v", runs)
	}

	applied := s.applyManaged(t, m, a, map[string]string{"main.tf": `resource "terraform_data" "net" { input = "v1" }`})
	var triggered triggeredRun
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		runs := s.workspaceRuns(t, m, b)
		if len(runs) > 1 {
			t.Fatalf("%d runs in B after one apply of A", len(runs))
		}
		if len(runs) == 1 {
			triggered = runs[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("applying A started no run in B")
		}
	}
	if want := "Triggered by run " + applied + " of workspace trig-network"; triggered.Message != want {
		t.Fatalf("B's run says %q, want %q", triggered.Message, want)
	}
	var full triggeredRun
	if st := s.apiJSON(t, http.MethodGet, "/v1/runs/"+triggered.ID, nil, &full, m.cookie()...); st != http.StatusOK ||
		full.TriggeredByRunID == nil || *full.TriggeredByRunID != applied || full.Initiator != "trigger" || full.CreatedBy.Kind != "run_trigger" {
		t.Fatalf("B's run: %d %+v", st, full)
	}
	s.waitRun(t, m, triggered.ID, 120*time.Second, status("awaiting_approval"))
	// It waits for a person: nothing applies it, and no second run comes.
	time.Sleep(3 * time.Second)
	if r := s.readRun(t, m, triggered.ID); r.Status != "awaiting_approval" {
		t.Fatalf("B's triggered run moved on to %s without approval", r.Status)
	}
	if n := len(s.workspaceRuns(t, m, b)); n != 1 {
		t.Fatalf("%d runs in B, want exactly 1", n)
	}

	t.Run("dashboard", func(t *testing.T) {
		c := s.createWorkspace(t, m, "trig-reports", "us")
		ctx := newBrowser(t)
		signInThroughTheDashboard(t, ctx, s, m)
		browse(t, ctx, "opening B's settings", chromedp.Navigate(s.DashboardURL+"/workspaces/"+b+"/settings"),
			chromedp.WaitVisible(chromedp.CSS("#run-trigger-sources")))
		waitText(t, ctx, "#run-trigger-sources", "trig-network")
		browse(t, ctx, "opening A's overview", chromedp.Navigate(s.DashboardURL+"/workspaces/"+a),
			chromedp.WaitVisible(chromedp.CSS("#triggered-workspaces")))
		waitText(t, ctx, "#triggered-workspaces", "trig-app")
		screenshot(t, ctx, "run-triggers-overview")

		// The picker adds A as a source of C, and C's settings remove it.
		browse(t, ctx, "opening C's settings", chromedp.Navigate(s.DashboardURL+"/workspaces/"+c+"/settings"),
			chromedp.WaitVisible(chromedp.CSS("#add-run-trigger")))
		browse(t, ctx, "adding A from the picker", chromedp.SetValue(chromedp.CSS("#run-trigger-source"), a),
			chromedp.Click(chromedp.CSS("#add-run-trigger button[type=submit]")))
		waitText(t, ctx, "#run-trigger-sources", "trig-network")
		screenshot(t, ctx, "run-triggers-settings")
		browse(t, ctx, "removing it", chromedp.Click(chromedp.CSS("#run-trigger-sources button[type=submit]")))
		waitText(t, ctx, "#run-trigger-none", "No source workspaces")
	})

	// Deleting the trigger stops it: A's next apply starts nothing in B.
	if st := s.apiJSON(t, http.MethodDelete, "/v1/run-triggers/"+created.ID, nil, nil, m.mutate(uniqueKey("rt-del"))...); st != http.StatusOK {
		t.Fatalf("deleting the trigger: %d", st)
	}
	again := s.applyManaged(t, m, a, map[string]string{"main.tf": `resource "terraform_data" "net" { input = "v2" }`})
	time.Sleep(5 * time.Second)
	if runs := s.workspaceRuns(t, m, b); len(runs) != 1 || runs[0].ID != triggered.ID {
		t.Fatalf("after the trigger was deleted, applying A (%s) left B with runs %+v", again, runs)
	}
}
