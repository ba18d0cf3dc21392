package run

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/policy"
)

// Reasons an apply is refused at its start.
const (
	// RefusedBindingChanged: the run's plan, policy result, predecessor
	// state or dependency lock is not the review the approval named.
	RefusedBindingChanged = "approved_review_changed"
	// RefusedPolicyResultChanged: the persisted policy check is not the
	// result the run (and its approval) carry.
	RefusedPolicyResultChanged = "policy_result_changed"
	// RefusedPolicyGateClosed: the gate is closed now, typically because an
	// override the approval relied on expired.
	RefusedPolicyGateClosed = "policy_gate_closed"
	// RefusedStateChanged: the workspace's state moved since the approval,
	// so the saved plan no longer describes what the apply would do.
	RefusedStateChanged = "state_changed_since_approval"
)

// applyRefusal rechecks, as the apply starts, everything the approval
// relied on (SPEC §3: the gate holds until the apply starts): the approved
// review is still the run's, the persisted policy result is still the one
// it names, the policy gate is open now, recomputed from the results and
// the overrides unexpired at now, not from what was stored at approval,
// and the state is still the plan's predecessor. It returns the refusal
// reason, or "" when the apply may start.
func (s *Service) applyRefusal(ctx context.Context, tx *sqlx.Tx, r Run, now time.Time) (string, error) {
	if r.ApprovedBinding == nil || !r.ApprovedBinding.Matches(r) {
		return RefusedBindingChanged, nil
	}
	check, results, err := policy.CheckOfRun(ctx, tx, r.ID)
	if errors.Is(err, fault.ErrNotFound) {
		return RefusedPolicyResultChanged, nil
	}
	if err != nil {
		return "", err
	}
	if !bytes.Equal(check.CompositionDigest, r.PolicyResultDigest) || !bytes.Equal(check.PlanDigest, r.PlanDigest) ||
		r.PolicyOutcome == nil || check.Outcome != *r.PolicyOutcome {
		return RefusedPolicyResultChanged, nil
	}
	open := policy.GateOpensOnItsOwn(check.Outcome)
	if check.Outcome == policy.OutcomeSoftFailed {
		valid, err := policy.UnexpiredOverrides(ctx, tx, r.ID, now)
		if err != nil {
			return "", err
		}
		until := policy.GateUntil(results, valid, r.PlanDigest, now)
		open = until != nil && now.Before(*until)
	}
	if !open || !r.GateOpen(now) {
		return RefusedPolicyGateClosed, nil
	}
	current, err := s.currentStateID(ctx, tx, r)
	if err != nil {
		return "", err
	}
	if !sameStateID(current, r.PredecessorStateVersionID) {
		return RefusedStateChanged, nil
	}
	return "", nil
}

// refuseApply ends a run whose apply may not start: the attempt closes
// without a sandbox, the run errors with the reason, and nothing ran.
func (s *Service) refuseApply(ctx context.Context, tx *sqlx.Tx, r Run, a Attempt, reason string) error {
	if err := s.endAttempt(ctx, tx, &a, AttemptFailed, reason, -1, nil); err != nil {
		return err
	}
	r.ApplyStatus = PhaseErrored
	r, err := s.finish(ctx, tx, r, StatusErrored, reason)
	if err != nil {
		return err
	}
	return s.systemEvent(ctx, tx, r, "run.apply_refused", map[string]any{"attempt_id": a.ID, "reason": reason})
}
