package run_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/run"
)

// expire does what the run_approval_expiry job does, in its own
// transaction.
func (h *harness) expire(runID string) (run.Run, error) {
	var out run.Run
	err := h.inTx(func(tx *sqlx.Tx) error {
		var err error
		out, err = h.runs.ExpireRun(h.ctx, tx, runID)
		return err
	})
	return out, err
}

// expiryJobAt checks that the run's commit scheduled its expiry job at
// exactly its approval deadline.
func (h *harness) expiryJobAt(r run.Run) {
	h.t.Helper()
	var at []time.Time
	if err := h.env.DB.Select(&at, `SELECT scheduled_at FROM river_job WHERE kind = 'run_approval_expiry' AND args->>'run_id' = $1`,
		r.ID); err != nil {
		h.t.Fatal(err)
	}
	if r.ApprovalDeadline == nil || len(at) != 1 || !at[0].Equal(*r.ApprovalDeadline) {
		h.t.Fatalf("run %s with deadline %v has expiry jobs at %v", r.ID, r.ApprovalDeadline, at)
	}
}

// TestApprovalDeadlineExpiresTheRun (SPEC §3 Run): a plan that waits for a
// decision gets a deadline CAIRN_APPROVAL_TIMEOUT ahead and an expiry job
// scheduled at it. Before the deadline the job leaves the run waiting and
// asks to run again (the database's clock, which scheduled it, may be ahead
// of this one); once it passed, approving is no longer offered or accepted,
// and the job ends the run expired with no decision, audited, its workspace
// lock released and the queue moving on to the run behind it, whose plan
// then waits for overrides and expires the same way. Replayed jobs change
// nothing.
func TestApprovalDeadlineExpiresTheRun(t *testing.T) {
	t.Parallel()
	h := setup(t)
	wsID := h.workspace("deadline")
	first := h.createRun(wsID)
	setID, versionID := h.softPolicy(wsID)
	h.attach(wsID, setID, versionID)
	behind := h.createRun(wsID)

	timeout := h.env.Config.ApprovalTimeout
	before := time.Now().Add(timeout).Truncate(time.Microsecond)
	planned := h.plan(first, planJSON(t))
	after := time.Now().Add(timeout)
	if planned.Status != run.StatusAwaitingApproval || planned.ApprovalDeadline == nil ||
		planned.ApprovalDeadline.Before(before) || planned.ApprovalDeadline.After(after) {
		t.Fatalf("planned run %s with deadline %v, want %s ahead (%s..%s)", planned.Status, planned.ApprovalDeadline, timeout, before, after)
	}
	h.expiryJobAt(planned)

	h.advance(timeout - time.Minute)
	if _, err := h.expire(first.ID); !errors.Is(err, run.ErrApprovalNotDue) {
		t.Fatalf("expiring before the deadline: %v, want ErrApprovalNotDue", err)
	}
	if got := h.read(first.ID); got.Status != run.StatusAwaitingApproval {
		t.Fatalf("before its deadline the run is %s", got.Status)
	}
	p := h.ownerPrincipal()
	if actions := run.AvailableActions(h.read(first.ID), nil, p, time.Now().Add(timeout-time.Minute)); !contains(actions, run.ActionApprove) {
		t.Fatalf("before the deadline approving is not offered: %v", actions)
	}

	h.advance(2 * time.Minute)
	// Past the deadline, before the job ran: the run is as good as expired.
	if actions := run.AvailableActions(h.read(first.ID), nil, p, time.Now().Add(timeout+time.Minute)); contains(actions, run.ActionApprove) {
		t.Fatalf("approving is offered past the deadline: %v", actions)
	}
	err := h.inTx(func(tx *sqlx.Tx) error {
		_, err := h.runs.Approve(h.ctx, tx, p, first.ID, run.BindingOf(planned))
		return err
	})
	if !errors.Is(err, run.ErrActionNotAllowed) {
		t.Fatalf("approving past the deadline: %v, want ErrActionNotAllowed", err)
	}

	expired, err := h.expire(first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if expired.Status != run.StatusExpired || expired.TerminalReason == nil || *expired.TerminalReason != "approval_deadline_passed" ||
		expired.DecisionAction != nil || expired.DecidedAt != nil {
		t.Fatalf("expired run %s (%v), decision %v", expired.Status, expired.TerminalReason, expired.DecisionAction)
	}
	var shown struct {
		Status   string          `json:"status"`
		Decision json.RawMessage `json:"decision"`
		Actions  []string        `json:"available_actions"`
	}
	h.owner.Get("/v1/runs/"+first.ID).MustStatus(t, http.StatusOK).Data(t, &shown)
	if shown.Status != "expired" || string(shown.Decision) != "null" || contains(shown.Actions, run.ActionApprove) ||
		contains(shown.Actions, run.ActionReject) || contains(shown.Actions, run.ActionCancel) {
		t.Fatalf("review of the expired run: %+v (decision %s)", shown, shown.Decision)
	}
	var actorType, actorID string
	if err := h.env.DB.QueryRow(`SELECT actor_type, actor_id FROM audit_events WHERE action = 'run.expired' AND target_id = $1`,
		first.ID).Scan(&actorType, &actorID); err != nil || actorType != "system" || actorID != "approval-deadline" {
		t.Fatalf("run.expired audited by %s %s (%v)", actorType, actorID, err)
	}
	if kind, holder := h.lockHolder(wsID); holder == first.ID {
		t.Fatalf("the expired run still holds its workspace lock (%s)", kind)
	}
	if again, err := h.expire(first.ID); err != nil || again.Status != run.StatusExpired || len(h.auditEvidence("run.expired", first.ID)) != 1 {
		t.Fatalf("a replayed expiry job: %s, %v", again.Status, err)
	}

	// The queue moved on: the run behind plans, fails its soft policy and
	// waits for an override until its own deadline.
	next := h.read(behind.ID)
	if next.Status != run.StatusPlanQueued {
		t.Fatalf("the run behind the expired one is %s", next.Status)
	}
	waiting := h.plan(next, planJSON(t))
	if waiting.Status != run.StatusPolicyOverride {
		t.Fatalf("the run behind planned to %s", waiting.Status)
	}
	h.expiryJobAt(waiting)
	h.advance(timeout)
	if got, err := h.expire(behind.ID); err != nil || got.Status != run.StatusExpired || got.DecisionAction != nil {
		t.Fatalf("the run waiting for an override past its deadline: %s (%v)", got.Status, err)
	}
}
