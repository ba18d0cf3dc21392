package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// switchAppliesWithTheCLI writes a new launch-control version with applies
// on or off through `cairn-api launch show` and `launch apply`, as an
// operator at the console does.
func switchAppliesWithTheCLI(t *testing.T, s *Stack, on bool) {
	t.Helper()
	shown := s.Run(t, "launch", "show")
	header, doc, ok := strings.Cut(shown, "\n")
	version, err := strconv.Atoi(strings.TrimPrefix(header, "version "))
	if !ok || err != nil {
		t.Fatalf("launch show printed %q", shown)
	}
	var control map[string]any
	if err := json.Unmarshal([]byte(doc), &control); err != nil {
		t.Fatalf("launch show printed %q: %v", shown, err)
	}
	control["applies_enabled"] = on
	file := filepath.Join(t.TempDir(), "control.json")
	if err := os.WriteFile(file, mustJSON(control), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Run(t, "launch", "apply", "-file", file, "-expected-version", strconv.Itoa(version), "-reason", "applies switched by the test")
}

// TestApplyWaitsWhileAppliesAreSwitchedOff approves a plan while applies
// are on, with no worker running, then switches applies off with `cairn-api
// launch apply`: the worker that starts takes the apply's job and puts it
// back without a sandbox (the run stays apply_queued, its apply attempt
// queued, nothing in its log), and once the operator API switches applies
// on again the same attempt runs and the run is applied.
func TestApplyWaitsWhileAppliesAreSwitchedOff(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "switch")
	wsID := s.createWorkspace(t, m, "switched-off", "us")
	r := s.planRun(t, m, wsID, map[string]string{"main.tf": `resource "terraform_data" "held" { input = "held-back" }`})
	if r.Status != "awaiting_approval" {
		t.Fatalf("plan: %s\n%s", r.Status, s.logsOf(t, m, r.ID))
	}
	s.StopWorker(t, time.Minute)
	if st, body := s.approve(t, m, r); st != http.StatusOK {
		t.Fatalf("approve: %d %s", st, body)
	}
	switchAppliesWithTheCLI(t, s, false)
	s.StartWorker(t)

	conn, err := sqlx.Open("postgres", s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The worker took the job and snoozed it: attempted, scheduled again.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var snoozed bool
		if err := conn.Get(&snoozed, `SELECT coalesce(bool_or(state = 'scheduled' AND attempted_at IS NOT NULL), false) FROM river_job
			WHERE kind = 'run_phase' AND args->>'run_id' = $1 AND args->>'phase' = 'apply'`, r.ID); err != nil {
			t.Fatal(err)
		}
		if snoozed {
			break
		}
		if got := s.readRun(t, m, r.ID); got.Status != "apply_queued" {
			t.Fatalf("the apply went on with applies switched off: %s, attempts %+v", got.Status, got.Evidence.Attempts)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker never took the apply's job:\n%s", s.Logs())
		}
	}
	held := s.readRun(t, m, r.ID)
	last := held.Evidence.Attempts[len(held.Evidence.Attempts)-1]
	if held.Status != "apply_queued" || len(held.Evidence.Attempts) != 2 || last.Phase != "apply" || last.Status != "queued" || last.SandboxID != nil {
		t.Fatalf("an apply with applies switched off: %s, attempts %+v", held.Status, held.Evidence.Attempts)
	}
	var leases int
	if err := conn.Get(&leases, `SELECT count(*) FROM capacity_leases l JOIN run_attempts a ON a.id = l.attempt_id
		WHERE a.run_id = $1 AND a.phase = 'apply'`, r.ID); err != nil || leases != 0 {
		t.Fatalf("the held apply took %d capacity leases (%v)", leases, err)
	}
	if logs := s.logsOf(t, m, r.ID); strings.Contains(logs, "Apply complete") || strings.Contains(logs, "terraform_data.held: Creating") {
		t.Fatalf("the held apply ran:\n%s", logs)
	}

	rewriteControl(t, s, "applies back on", func(doc map[string]any) { doc["applies_enabled"] = true })
	// The snoozed job comes back within its 30 s.
	applied := s.waitRun(t, m, r.ID, 2*time.Minute, status("applied", "errored", "recovery_required"))
	if applied.Status != "applied" || len(applied.Evidence.Attempts) != 2 || applied.Evidence.Attempts[1].Status != "succeeded" {
		t.Fatalf("after applies came back on: %s, attempts %+v\n%s", applied.Status, applied.Evidence.Attempts, s.logsOf(t, m, r.ID))
	}
	if id, _, state := s.currentState(t, m, wsID); applied.Apply.StateVersionID == nil || *applied.Apply.StateVersionID != id ||
		!strings.Contains(state, "held-back") {
		t.Fatalf("applied run recorded state %v, current %s:\n%s", applied.Apply.StateVersionID, id, state)
	}
}
