package e2e

import (
	"net/http"
	"testing"
	"time"
)

// TestUnapprovedPlansExpire runs the approval deadline with the real worker
// and a CAIRN_APPROVAL_TIMEOUT of a few seconds: a plan nobody decides on
// expires (no decision, approval_deadline_passed) by its scheduled job,
// and the queue moves on to the run behind it, which plans and expires in
// turn.
func TestUnapprovedPlansExpire(t *testing.T) {
	t.Parallel()
	s := runsStack(t, "CAIRN_APPROVAL_TIMEOUT=6s")
	m := s.newMember(t, "expiry")
	wsID := s.createWorkspace(t, m, "undecided", "us")
	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": `resource "terraform_data" "undecided" { input = "x" }`})
	var runs []runView
	for range 2 {
		st, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
		if st != http.StatusCreated {
			t.Fatalf("create run: %d", st)
		}
		runs = append(runs, r)
	}
	for _, r := range runs {
		got := s.waitRun(t, m, r.ID, 3*time.Minute, status("expired", "errored", "applied"))
		if got.Status != "expired" || got.Decision != nil || got.TerminalReason == nil || *got.TerminalReason != "approval_deadline_passed" ||
			got.PlanStatus != "finished" || len(got.AvailableActions) != 0 {
			t.Fatalf("an undecided plan: %+v\n%s", got, s.logsOf(t, m, r.ID))
		}
		if len(got.Evidence.Attempts) != 1 || got.Evidence.Attempts[0].Phase != "plan" {
			t.Fatalf("an expired run has attempts %+v", got.Evidence.Attempts)
		}
	}
}
