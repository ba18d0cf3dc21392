package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFailedApplyWithPartialStateGoesToRecovery (SPEC §3 Run: a nonzero
// apply exit with partial state published is recovery, not success): the
// real CLI creates one resource, fails on the next and publishes what it
// has. The run ends recovery_required (apply_failed_with_partial_state),
// never applied, with the published state recorded on the run and shown as
// the recovery's current state; the apply is not retried.
func TestFailedApplyWithPartialStateGoesToRecovery(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "partial")
	wsID := s.createWorkspace(t, m, "partial-apply", "us")
	// The second resource's provisioner fails once the first exists: tofu
	// publishes the state it has (the first, the second tainted) and exits 1.
	r := s.planRun(t, m, wsID, map[string]string{"main.tf": fmt.Sprintf(firstThenProvisionerConfig, "echo provisioner-failing; exit 3")})
	if r.Status != "awaiting_approval" {
		t.Fatalf("plan: %s\n%s", r.Status, s.logsOf(t, m, r.ID))
	}
	if st, body := s.approve(t, m, r); st != http.StatusOK {
		t.Fatalf("approve: %d %s", st, body)
	}
	s.waitRun(t, m, r.ID, 2*time.Minute, status("applied", "errored", "recovery_required"))
	rec := s.readRecovery(t, m, r.ID)
	logs := s.logsOf(t, m, r.ID)
	last := rec.Evidence.Attempts[len(rec.Evidence.Attempts)-1]
	if rec.Status != "recovery_required" || rec.ApplyStatus != "errored" || rec.TerminalReason == nil ||
		*rec.TerminalReason != "apply_failed_with_partial_state" || last.Phase != "apply" || last.Status != "failed" ||
		last.TerminalClassification == nil || *last.TerminalClassification != "partial_apply" || !contains(rec.AvailableActions, "recover") {
		t.Fatalf("a failed apply with partial state: %+v\n%s", rec, logs)
	}
	if !strings.Contains(logs, "provisioner-failing") {
		t.Fatalf("the apply did not reach the failing provisioner:\n%s", logs)
	}
	id, sha, state := s.currentState(t, m, wsID)
	if rec.Apply.StateVersionID == nil || *rec.Apply.StateVersionID != id || !strings.Contains(state, "created-first") {
		t.Fatalf("the run records state %v, the workspace's current is %s:\n%s", rec.Apply.StateVersionID, id, state)
	}
	if rec.Recovery == nil || rec.Recovery.CurrentStateVersionID == nil || *rec.Recovery.CurrentStateVersionID != id ||
		rec.Recovery.CurrentStateDigest != sha || rec.Apply.EmergencyStateDigest != nil {
		t.Fatalf("recovery evidence %+v (emergency %v), want the published state %s (%s)", rec.Recovery, rec.Apply.EmergencyStateDigest, id, sha)
	}
	// Nothing retries the apply.
	time.Sleep(5 * time.Second)
	final := s.readRun(t, m, r.ID)
	if applies := final.attemptsOf("apply"); final.Status != "recovery_required" || applies != 1 {
		t.Fatalf("the failed apply moved on: %s with %d apply attempts", final.Status, applies)
	}
}
