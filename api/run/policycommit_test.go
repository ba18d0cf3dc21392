package run_test

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/run/runtest"
)

// checkRow is a run's policy check as stored.
type checkRow struct {
	ID                string  `db:"id"`
	Status            string  `db:"status"`
	AttemptID         *string `db:"attempt_id"`
	PlanDigest        []byte  `db:"plan_digest"`
	InputDigest       []byte  `db:"input_digest"`
	CompositionDigest []byte  `db:"composition_digest"`
	Outcome           *string `db:"outcome"`
	Results           int     `db:"results"`
}

func (h *harness) checkRow(runID string) checkRow {
	h.t.Helper()
	var c checkRow
	if err := h.env.DB.Get(&c, `SELECT id, status, attempt_id, plan_digest, input_digest, composition_digest, outcome,
		(SELECT count(*) FROM policy_results WHERE check_id = policy_checks.id) AS results
		FROM policy_checks WHERE run_id = $1`, runID); err != nil {
		h.t.Fatal(err)
	}
	return c
}

// artifactRow is one committed run artifact.
type artifactRow struct {
	Kind      string `db:"kind"`
	AttemptID string `db:"attempt_id"`
	BlobKey   string `db:"blob_key"`
}

func (h *harness) artifactRows(runID string) []artifactRow {
	h.t.Helper()
	var rows []artifactRow
	if err := h.env.DB.Select(&rows, `SELECT kind, attempt_id, blob_key FROM run_artifacts WHERE run_id = $1 ORDER BY kind`, runID); err != nil {
		h.t.Fatal(err)
	}
	return rows
}

// runPolicy is the part of GET /v1/runs/{id}/policy these tests read.
type runPolicy struct {
	CheckID     *string `json:"check_id"`
	Status      string  `json:"status"`
	Outcome     *string `json:"outcome"`
	InputDigest *string `json:"input_digest"`
	Incomplete  *string `json:"incomplete"`
}

func (h *harness) runPolicy(runID string) runPolicy {
	h.t.Helper()
	var v runPolicy
	h.owner.Get("/v1/runs/"+runID+"/policy").MustStatus(h.t, http.StatusOK).Data(h.t, &v)
	return v
}

// TestPolicyCheckIsReservedAtThePlanCommit follows a plan through its two
// commits (SPEC §3): the plan commit records the plan file, leaves the run
// planning with its plan finished and reserves the check, running with its
// deterministic ID and no input digest; the policy commit binds the
// evaluation, records the rest of the evidence, ends the attempt and moves
// the run on. Replaying that evaluation changes nothing and answers the
// same run; an evaluation with another input digest, or of another plan
// before or after the binding, is refused and leaves the check and the
// run as they were.
func TestPolicyCheckIsReservedAtThePlanCommit(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.softPolicyWorkspace("reserved")
	r := h.createRun(ws)
	st := h.start(r, run.PhasePlan)

	planned := runtest.CommitPlan(t, h.env, h.runs, st, planJSON(t), true, nil)
	got := h.read(r.ID)
	if got.Status != run.StatusPlanning || got.PlanStatus != run.PhaseFinished || got.PolicyOutcome != nil || len(got.PlanDigest) == 0 {
		t.Fatalf("after the plan commit: %s, plan %s, outcome %v, plan digest %x", got.Status, got.PlanStatus, got.PolicyOutcome, got.PlanDigest)
	}
	c := h.checkRow(r.ID)
	if c.ID != policy.CheckID(r.ID) || c.Status != policy.CheckRunning || c.AttemptID == nil || *c.AttemptID != st.Attempt.ID ||
		string(c.PlanDigest) != string(got.PlanDigest) || c.InputDigest != nil || c.CompositionDigest != nil || c.Outcome != nil {
		t.Fatalf("reserved check: %+v", c)
	}
	if kinds := h.artifactKinds(r.ID); !slices.Equal(kinds, []string{run.ArtifactPlanFile}) {
		t.Fatalf("artifacts after the plan commit: %v", kinds)
	}
	if v := h.runPolicy(r.ID); v.Status != "pending" || v.CheckID == nil || *v.CheckID != c.ID || v.Outcome != nil || v.Incomplete != nil {
		t.Fatalf("/v1 policy after the plan commit: %+v", v)
	}
	// The attempt runs on through its policy stage; a second plan commit
	// of it is refused.
	if _, err := h.runs.CommitPlan(h.ctx, st.Attempt.ID, run.PlanEvidence{}); !errors.Is(err, run.ErrAttemptNotCurrent) {
		t.Fatalf("a second plan commit: %v", err)
	}

	ev := planned.Evaluate(t)
	if ev.Check.InputDigest == nil {
		t.Fatal("the evaluation has no input digest")
	}
	// An evaluation of another plan is refused before anything is bound:
	// the check stays running, with no input digest.
	otherPlan := ev
	planSum := sha256.Sum256([]byte("another plan"))
	otherPlan.Check.PlanDigest = planSum[:]
	if _, err := planned.CommitPolicy(h.ctx, otherPlan); !errors.Is(err, policy.ErrEvaluationConflict) {
		t.Fatalf("an evaluation of another plan: %v, want ErrEvaluationConflict", err)
	}
	if c := h.checkRow(r.ID); c.Status != policy.CheckRunning || c.InputDigest != nil || c.Results != 0 {
		t.Fatalf("a refused evaluation changed the reserved check: %+v", c)
	}
	out, err := planned.CommitPolicy(h.ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != run.StatusPolicyOverride || out.PolicyOutcome == nil || *out.PolicyOutcome != policy.OutcomeSoftFailed {
		t.Fatalf("after the policy commit: %s, outcome %v", out.Status, out.PolicyOutcome)
	}
	c = h.checkRow(r.ID)
	if c.Status != policy.CheckCompleted || string(c.InputDigest) != string(ev.Check.InputDigest) ||
		string(c.CompositionDigest) != string(out.PolicyResultDigest) || c.Results != 1 {
		t.Fatalf("completed check: %+v", c)
	}
	if kinds := h.artifactKinds(r.ID); !slices.Equal(kinds, []string{run.ArtifactPlanDiff, run.ArtifactPlanFile, run.ArtifactPlanJSON}) {
		t.Fatalf("artifacts after the policy commit: %v", kinds)
	}
	if v := h.runPolicy(r.ID); v.Status != "soft_failed" || v.InputDigest == nil {
		t.Fatalf("/v1 policy after the policy commit: %+v", v)
	}
	var attemptStatus string
	if err := h.env.DB.Get(&attemptStatus, `SELECT status FROM run_attempts WHERE id = $1`, st.Attempt.ID); err != nil || attemptStatus != run.AttemptSucceeded {
		t.Fatalf("attempt after the policy commit: %s %v", attemptStatus, err)
	}

	// An identical replay: nothing is written, the run is what it was.
	again, err := planned.CommitPolicy(h.ctx, ev)
	if err != nil {
		t.Fatalf("replaying the evaluation: %v", err)
	}
	if again.Status != out.Status || !again.UpdatedAt.Equal(out.UpdatedAt) || h.checkRow(r.ID).Results != 1 || h.events(r.ID, "run.policy_evaluated") != 1 {
		t.Fatalf("a replay changed the run or its check: %s at %v", again.Status, again.UpdatedAt)
	}

	// Another input digest for the same check fails closed.
	other := ev
	sum := sha256.Sum256([]byte("another input"))
	other.Check.InputDigest = sum[:]
	if _, err := planned.CommitPolicy(h.ctx, other); !errors.Is(err, policy.ErrEvaluationConflict) {
		t.Fatalf("another input digest: %v, want ErrEvaluationConflict", err)
	}
	if _, err := planned.CommitPolicy(h.ctx, otherPlan); !errors.Is(err, policy.ErrEvaluationConflict) {
		t.Fatalf("an evaluation of another plan after the binding: %v, want ErrEvaluationConflict", err)
	}
	after := h.read(r.ID)
	if c2 := h.checkRow(r.ID); string(c2.InputDigest) != string(ev.Check.InputDigest) || string(c2.CompositionDigest) != string(c.CompositionDigest) ||
		after.Status != out.Status || !after.UpdatedAt.Equal(out.UpdatedAt) {
		t.Fatalf("a refused evaluation changed the check or the run: %+v, run %s", c2, after.Status)
	}
}

func (h *harness) artifactKinds(runID string) []string {
	h.t.Helper()
	var kinds []string
	for _, a := range h.artifactRows(runID) {
		kinds = append(kinds, a.Kind)
	}
	return kinds
}

func (h *harness) events(runID, action string) int {
	h.t.Helper()
	var n int
	if err := h.env.DB.Get(&n, `SELECT count(*) FROM audit_events WHERE target_id = $1 AND action = $2`, runID, action); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// TestPlanLostAfterItsPlanCommitIsRetried loses a plan attempt's worker
// during its policy stage, after the plan commit: the plan is retried like
// any lost plan, and the retry's plan commit replaces the lost attempt's
// plan file (its row first, then its object) and takes the reserved check
// over. The lost attempt's evaluation can no longer be committed; the
// retry's completes the check.
func TestPlanLostAfterItsPlanCommitIsRetried(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.softPolicyWorkspace("lost-in-policy")
	r := h.createRun(ws)

	first := h.start(r, run.PhasePlan)
	lost := runtest.CommitPlan(t, h.env, h.runs, first, planJSON(t), true, nil)
	lostFiles := h.artifactRows(r.ID)
	if len(lostFiles) != 1 || lostFiles[0].AttemptID != first.Attempt.ID {
		t.Fatalf("the first plan commit: %+v", lostFiles)
	}
	h.lose(first)
	if got := h.read(r.ID); got.Status != run.StatusPlanQueued || got.PlanStatus != run.PhasePending {
		t.Fatalf("after a plan lost in its policy stage: %s, plan %s", got.Status, got.PlanStatus)
	}

	second := h.start(r, run.PhasePlan)
	retried := runtest.CommitPlan(t, h.env, h.runs, second, planJSON(t), true, nil)
	files := h.artifactRows(r.ID)
	if len(files) != 1 || files[0].Kind != run.ArtifactPlanFile || files[0].AttemptID != second.Attempt.ID {
		t.Fatalf("the retry's plan commit left %+v", files)
	}
	blobs := h.env.Server.Blobs()
	if _, err := blobs.Open(h.ctx, lostFiles[0].BlobKey, "any"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("the lost attempt's plan file object: %v, want it deleted", err)
	}
	if rc, err := h.runs.OpenPlanFile(h.ctx, retried.Run); err != nil {
		t.Fatalf("the retry's plan file: %v", err)
	} else {
		rc.Close()
	}
	if c := h.checkRow(r.ID); c.Status != policy.CheckRunning || c.AttemptID == nil || *c.AttemptID != second.Attempt.ID {
		t.Fatalf("the check after the retry's plan commit: %+v", c)
	}

	// The lost attempt's worker went on evaluating: too late.
	if _, err := lost.CommitPolicy(h.ctx, lost.Evaluate(t)); !errors.Is(err, run.ErrAttemptNotCurrent) {
		t.Fatalf("the lost attempt's policy commit: %v, want ErrAttemptNotCurrent", err)
	}
	out, err := retried.CommitPolicy(h.ctx, retried.Evaluate(t))
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != run.StatusPolicyOverride {
		t.Fatalf("after the retry's policy commit: %s", out.Status)
	}
	for _, a := range h.artifactRows(r.ID) {
		if a.AttemptID != second.Attempt.ID {
			t.Fatalf("artifact %s of attempt %s, want %s", a.Kind, a.AttemptID, second.Attempt.ID)
		}
	}
	if c := h.checkRow(r.ID); c.Status != policy.CheckCompleted || c.Results != 1 {
		t.Fatalf("the completed check: %+v", c)
	}
}

// TestPendingCheckOfAnEndedRunIsErrored ends runs between their plan and
// policy commits, one canceled and one whose policy stage failed: each
// keeps its finished plan, its check stays running in the database and
// reads errored with the explanation, the run can never be approved, and a
// late policy commit is refused.
func TestPendingCheckOfAnEndedRunIsErrored(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.softPolicyWorkspace("ended")

	canceled := h.createRun(ws)
	st := h.start(canceled, run.PhasePlan)
	planned := runtest.CommitPlan(t, h.env, h.runs, st, planJSON(t), true, nil)
	h.owner.Mutate(http.MethodPost, "/v1/runs/"+canceled.ID+"/actions/cancel", nil).MustStatus(t, http.StatusOK)
	if got := h.read(canceled.ID); got.Status != run.StatusCanceled || got.PlanStatus != run.PhaseFinished {
		t.Fatalf("canceled in its policy stage: %s, plan %s", got.Status, got.PlanStatus)
	}
	h.refusedEnded(canceled.ID)
	if _, err := planned.CommitPolicy(h.ctx, planned.Evaluate(t)); !errors.Is(err, run.ErrAttemptNotCurrent) {
		t.Fatalf("a policy commit after the cancel: %v, want ErrAttemptNotCurrent", err)
	}
	h.refusedEnded(canceled.ID)

	failed := h.createRun(ws)
	st = h.start(failed, run.PhasePlan)
	runtest.CommitPlan(t, h.env, h.runs, st, planJSON(t), true, nil)
	if _, err := h.runs.FailAttempt(h.ctx, st.Attempt.ID, "runner_error", -1, nil); err != nil {
		t.Fatal(err)
	}
	if got := h.read(failed.ID); got.Status != run.StatusErrored || got.PlanStatus != run.PhaseFinished {
		t.Fatalf("failed in its policy stage: %s, plan %s", got.Status, got.PlanStatus)
	}
	h.refusedEnded(failed.ID)
}

// refusedEnded checks a run that ended with its check pending: errored
// with the explanation, the row still running, no approval.
func (h *harness) refusedEnded(runID string) {
	h.t.Helper()
	if c := h.checkRow(runID); c.Status != policy.CheckRunning || c.InputDigest != nil || c.Outcome != nil {
		h.t.Fatalf("the check of an ended run: %+v", c)
	}
	v := h.runPolicy(runID)
	if v.Status != "errored" || v.Incomplete == nil || *v.Incomplete != run.PolicyIncomplete || v.Outcome != nil {
		h.t.Fatalf("/v1 policy of an ended run: %+v", v)
	}
	rv := h.review(runID)
	if contains(rv.Actions, "approve") {
		h.t.Fatalf("an ended run offers %v", rv.Actions)
	}
	r := h.owner.Mutate(http.MethodPost, "/v1/runs/"+runID+"/actions/approve", map[string]any{"plan_digest": rv.Plan.PlanDigest,
		"policy_result_digest": rv.Policy.ResultDigest, "predecessor_state_version_id": rv.Plan.PredecessorStateVersionID,
		"dependency_lock_digest": rv.Pinned.DependencyLockDigest})
	if r.Status < 400 || r.Status == http.StatusInternalServerError {
		h.t.Fatalf("approving an ended run: %d %s", r.Status, r.Body)
	}
}

// TestStateMovedDuringThePolicyStageIsRefused: a saved plan commits its
// plan against no state, then another run's apply publishes one while the
// saved plan's policy stage runs. Its policy commit is refused
// (ErrStateMoved): it would otherwise go on to wait for a decision about a
// plan the finalization could no longer discard. The run ends errored with
// its check errored.
func TestStateMovedDuringThePolicyStageIsRefused(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("moved-in-policy")
	active := h.plan(h.createRun(ws), planJSON(t))
	h.approve(active.ID)
	saved := h.createdRun(h.createRunWith(ws, map[string]any{"save_plan": true}))
	applying := h.start(h.read(active.ID), run.PhaseApply)
	planning := h.start(saved, run.PhasePlan)
	planned := runtest.CommitPlan(t, h.env, h.runs, planning, planJSON(t), true, nil)
	h.publishState(applying, "lin-moved-in-policy")
	if _, err := planned.CommitPolicy(h.ctx, planned.Evaluate(t)); !errors.Is(err, run.ErrStateMoved) {
		t.Fatalf("a policy commit after the state moved: %v, want ErrStateMoved", err)
	}
	if got := h.read(saved.ID); got.Status != run.StatusPlanning {
		t.Fatalf("a refused policy commit moved the run to %s", got.Status)
	}
	if _, err := h.runs.FailAttempt(h.ctx, planning.Attempt.ID, "state_changed_during_plan", -1, nil); err != nil {
		t.Fatal(err)
	}
	if got := h.read(saved.ID); got.Status != run.StatusErrored || got.TerminalReason == nil || *got.TerminalReason != "state_changed_during_plan" {
		t.Fatalf("the saved plan: %s (%v)", got.Status, got.TerminalReason)
	}
	if v := h.runPolicy(saved.ID); v.Status != "errored" || v.Incomplete == nil {
		t.Fatalf("/v1 policy of the saved plan: %+v", v)
	}
}
