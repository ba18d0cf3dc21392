package run_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestDiscardReasonIsKeptAndAudited: the reject action takes a reason,
// trims it, refuses one over 500 characters (before touching the run),
// shows it as decision.reason and records it in the audit event.
func TestDiscardReasonIsKeptAndAudited(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("discarded")
	r := h.plan(h.read(h.createRun(ws).ID), planJSON(t))
	v := h.review(r.ID)
	reject := func(reason string) int {
		body := map[string]any{"plan_digest": v.Plan.PlanDigest, "policy_result_digest": v.Policy.ResultDigest,
			"predecessor_state_version_id": v.Plan.PredecessorStateVersionID,
			"dependency_lock_digest":       v.Pinned.DependencyLockDigest, "reason": reason}
		return h.owner.Mutate(http.MethodPost, "/v1/runs/"+r.ID+"/actions/reject", body).Status
	}
	if got := reject(strings.Repeat("é", 501)); got != http.StatusBadRequest && got != http.StatusUnprocessableEntity {
		t.Fatalf("501-character reason = %d", got)
	}
	if got := h.review(r.ID).Status; got != "awaiting_approval" {
		t.Fatalf("a refused discard changed the run to %s", got)
	}
	reason := strings.Repeat("é", 499) + "!"
	if got := reject("  " + reason + "\n"); got != http.StatusOK {
		t.Fatalf("discard = %d", got)
	}
	var view struct {
		Status   string `json:"status"`
		Decision struct {
			Action string  `json:"action"`
			Reason *string `json:"reason"`
		} `json:"decision"`
	}
	h.owner.Get("/v1/runs/"+r.ID).MustStatus(t, http.StatusOK).Data(t, &view)
	if view.Status != "rejected" || view.Decision.Action != "rejected" || view.Decision.Reason == nil || *view.Decision.Reason != reason {
		t.Fatalf("run after discard: %+v", view)
	}
	var events []struct {
		Action   string         `json:"action"`
		Evidence map[string]any `json:"evidence"`
		Target   struct {
			ID string `json:"id"`
		} `json:"target"`
	}
	h.owner.Get("/v1/audit-events?limit=20").MustStatus(t, http.StatusOK).Data(t, &events)
	for _, e := range events {
		if e.Action == "run.rejected" && e.Target.ID == r.ID {
			// 500 two-byte characters do not fit one evidence string: a
			// prefix on a character boundary, marked, with the digest.
			got, _ := e.Evidence["reason"].(string)
			if !strings.HasPrefix(reason, got) || len(got) == 0 || e.Evidence["reason_truncated"] != true || e.Evidence["reason_sha256"] == nil {
				t.Fatalf("audit evidence %v", e.Evidence)
			}
			return
		}
	}
	t.Fatalf("no run.rejected audit event among %+v", events)
}
