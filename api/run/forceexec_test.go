package run_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/run"
)

// forceExecute calls the service in its own committed transaction.
func (h *harness) forceExecute(p access.Principal, runID string) (run.Run, error) {
	var out run.Run
	err := h.inTx(func(tx *sqlx.Tx) error {
		var err error
		out, err = h.runs.ForceExecute(h.ctx, tx, p, runID)
		return err
	})
	return out, err
}

// planJobs counts the run's plan jobs on River's queue, read through q.
func (h *harness) planJobs(q sqlx.QueryerContext, runID string) int {
	h.t.Helper()
	var n int
	if err := sqlx.GetContext(h.ctx, q, &n, `SELECT count(*) FROM river_job WHERE kind = 'run_phase'
		AND args->>'run_id' = $1 AND args->>'phase' = 'plan'`, runID); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// auditEvidence is the evidence of the target's audit events of action,
// newest first.
func (h *harness) auditEvidence(action, targetID string) []map[string]any {
	h.t.Helper()
	var rows [][]byte
	if err := h.env.DB.Select(&rows, `SELECT evidence FROM audit_events WHERE action = $1 AND target_id = $2
		ORDER BY created_at DESC`, action, targetID); err != nil {
		h.t.Fatal(err)
	}
	out := make([]map[string]any, len(rows))
	for i, raw := range rows {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			h.t.Fatal(err)
		}
	}
	return out
}

// TestForceExecuteDiscardsTheRunsAhead: a pending run behind a plan that
// waits for approval and another pending run starts at once; both runs
// ahead end discarded with the same effects as a person's discard (the
// decision and its reason naming the forced run, the audit event, the
// workspace lock and run tokens let go) and the forced run's plan job is
// inserted in the same transaction; a run created after it keeps waiting.
func TestForceExecuteDiscardsTheRunsAhead(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("forced")
	holder := h.plan(h.read(h.createRun(ws).ID), planJSON(t))
	if holder.Status != run.StatusAwaitingApproval {
		t.Fatalf("holder is %s", holder.Status)
	}
	waiting, target, later := h.createRun(ws), h.createRun(ws), h.createRun(ws)
	for _, r := range []run.Run{waiting, target, later} {
		if r.Status != run.StatusPending {
			t.Fatalf("run %s behind the holder is %s", r.ID, r.Status)
		}
	}
	var attemptID string
	if err := h.env.DB.Get(&attemptID, `SELECT id FROM run_attempts WHERE run_id = $1`, holder.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.env.DB.Exec(`INSERT INTO run_tokens (id, token_hash, organization_id, workspace_id, run_id, attempt_id, phase, expires_at)
		VALUES ('rat_forcetest', 'forcetest', $1, $2, $3, $4, 'plan', now() + interval '1 hour')`,
		holder.OrganizationID, ws, holder.ID, attemptID); err != nil {
		t.Fatal(err)
	}

	// The review offers it and names what it would discard.
	var v struct {
		Actions  []string `json:"available_actions"`
		Discards []string `json:"force_execute_discards"`
	}
	h.owner.Get("/v1/runs/"+target.ID).MustStatus(t, http.StatusOK).Data(t, &v)
	if !slices.Contains(v.Actions, run.ActionForceExecute) || !slices.Equal(v.Discards, []string{holder.ID, waiting.ID}) {
		t.Fatalf("pending run's review: actions %v, discards %v", v.Actions, v.Discards)
	}
	h.owner.Get("/v1/runs/"+holder.ID).MustStatus(t, http.StatusOK).Data(t, &v)
	if slices.Contains(v.Actions, run.ActionForceExecute) || len(v.Discards) != 0 {
		t.Fatalf("the holder's review: actions %v, discards %v", v.Actions, v.Discards)
	}

	// A transaction that rolls back leaves no trace of it.
	owner := h.ownerPrincipal()
	rollback := errors.New("rolled back")
	if err := h.inTx(func(tx *sqlx.Tx) error {
		r, err := h.runs.ForceExecute(h.ctx, tx, owner, target.ID)
		if err != nil {
			return err
		}
		// The plan's job is inserted in the transaction itself.
		if r.Status != run.StatusPlanQueued || h.planJobs(tx, target.ID) != 1 {
			t.Errorf("inside the transaction: %s with %d plan jobs", r.Status, h.planJobs(tx, target.ID))
		}
		return rollback
	}); !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	if got := h.read(holder.ID).Status; got != run.StatusAwaitingApproval || h.planJobs(h.env.DB, target.ID) != 0 {
		t.Fatalf("after a rollback the holder is %s and the target has %d plan jobs", got, h.planJobs(h.env.DB, target.ID))
	}

	forced, err := h.forceExecute(owner, target.ID)
	if err != nil {
		t.Fatal(err)
	}
	if forced.Status != run.StatusPlanQueued || h.read(target.ID).Status != run.StatusPlanQueued {
		t.Fatalf("forced run is %s", h.read(target.ID).Status)
	}
	h.queued(forced, run.PhasePlan)
	if n := h.planJobs(h.env.DB, target.ID); n != 1 {
		t.Fatalf("forced run has %d plan jobs", n)
	}
	if kind, id := h.lockHolder(ws); kind != access.KindRun || id != target.ID {
		t.Fatalf("workspace locked by %q %q, want the forced run", kind, id)
	}
	reason := "Discarded by a force-execute of " + target.ID
	for _, id := range []string{holder.ID, waiting.ID} {
		r := h.read(id)
		if r.Status != run.StatusRejected || r.DecisionAction == nil || *r.DecisionAction != run.DecisionRejected ||
			r.DecisionActorID == nil || *r.DecisionActorID != owner.ID || r.DecisionReason == nil || *r.DecisionReason != reason ||
			r.TerminalReason == nil || *r.TerminalReason != run.ReasonForceExecuted {
			t.Errorf("discarded run %s: status %s, decision %v by %v, reason %v, terminal %v", id, r.Status,
				r.DecisionAction, r.DecisionActorID, r.DecisionReason, r.TerminalReason)
		}
		ev := h.auditEvidence("run.rejected", id)
		if len(ev) != 1 || ev[0]["force_executed_run_id"] != target.ID || ev[0]["reason"] != reason {
			t.Errorf("audit evidence of discarding %s: %v", id, ev)
		}
		var actor string
		if err := h.env.DB.Get(&actor, `SELECT actor_id FROM run_events WHERE run_id = $1 AND action = 'rejected'`, id); err != nil || actor != owner.ID {
			t.Errorf("run event of discarding %s: %q %v", id, actor, err)
		}
	}
	if r := h.read(waiting.ID); r.PlanStatus != run.PhaseCanceled {
		t.Errorf("the discarded pending run's plan is %s", r.PlanStatus)
	}
	var revoked bool
	if err := h.env.DB.Get(&revoked, `SELECT revoked_at IS NOT NULL FROM run_tokens WHERE id = 'rat_forcetest'`); err != nil || !revoked {
		t.Errorf("the holder's run token revoked: %v %v", revoked, err)
	}
	ev := h.auditEvidence("run.force_executed", target.ID)
	if len(ev) != 1 {
		t.Fatalf("force-execute audit events: %v", ev)
	}
	if ids, _ := ev[0]["discarded_run_ids"].([]any); len(ids) != 2 || ids[0] != holder.ID || ids[1] != waiting.ID {
		t.Errorf("force-execute audit evidence: %v", ev)
	}
	if got := h.read(later.ID).Status; got != run.StatusPending {
		t.Errorf("the run created after the forced one is %s", got)
	}
	// Done once, it is not offered or allowed again.
	if _, err := h.forceExecute(owner, target.ID); !errors.Is(err, run.ErrActionNotAllowed) {
		t.Errorf("a second force-execute: %v, want ErrActionNotAllowed", err)
	}
}

// TestForceExecuteRefusals: a run ahead that is planning or applying
// cannot be skipped (409, nothing changes); a run that is not pending or
// is speculative is not force-executable; a principal without both
// permissions is forbidden, and another tenant, or a token bounded to
// another workspace, finds nothing.
func TestForceExecuteRefusals(t *testing.T) {
	t.Parallel()
	h := setup(t)
	owner := h.ownerPrincipal()

	planning := h.workspace("planning")
	busy := h.createRun(planning)
	h.start(busy, run.PhasePlan)
	applying := h.workspace("applying")
	applier := h.plan(h.read(h.createRun(applying).ID), planJSON(t))
	h.approve(applier.ID)
	h.start(h.read(applier.ID), run.PhaseApply)
	for ws, holder := range map[string]run.Run{planning: busy, applying: applier} {
		before := h.read(holder.ID)
		target := h.createRun(ws)
		if slices.Contains(h.review(target.ID).Actions, run.ActionForceExecute) {
			t.Errorf("force_execute offered behind a %s run", before.Status)
		}
		if _, err := h.forceExecute(owner, target.ID); !errors.Is(err, run.ErrQueueNotDiscardable) {
			t.Errorf("force-execute behind a %s run: %v, want ErrQueueNotDiscardable", before.Status, err)
		}
		resp := h.owner.Mutate(http.MethodPost, "/v1/runs/"+target.ID+"/actions/force-execute", nil)
		if resp.Status != http.StatusConflict || resp.Code() != "RUN_QUEUE_NOT_DISCARDABLE" {
			t.Errorf("/v1 force-execute behind a %s run = %d %s", before.Status, resp.Status, resp.Body)
		}
		after, forced := h.read(holder.ID), h.read(target.ID)
		if after.Status != before.Status || !after.UpdatedAt.Equal(before.UpdatedAt) || forced.Status != run.StatusPending ||
			!forced.UpdatedAt.Equal(target.UpdatedAt) || h.planJobs(h.env.DB, target.ID) != 0 {
			t.Errorf("a refused force-execute changed the holder %s -> %s, the target to %s", before.Status, after.Status, forced.Status)
		}
		if ev := h.auditEvidence("run.force_executed", target.ID); len(ev) != 0 {
			t.Errorf("a refused force-execute left audit events %v", ev)
		}
	}

	ws := h.workspace("refusals")
	holder := h.plan(h.read(h.createRun(ws).ID), planJSON(t))
	target := h.createRun(ws)
	if _, err := h.forceExecute(owner, holder.ID); !errors.Is(err, run.ErrActionNotAllowed) {
		t.Errorf("force-execute of a run awaiting approval: %v", err)
	}
	var spec struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/runs", map[string]string{"workspace_id": ws, "configuration_version_id": target.ConfigurationVersionID,
		"kind": "speculative"}).MustStatus(t, http.StatusCreated).Data(t, &spec)
	if _, err := h.forceExecute(owner, spec.ID); !errors.Is(err, run.ErrActionNotAllowed) {
		t.Errorf("force-execute of a speculative run: %v", err)
	}
	withPermissions := func(perms ...access.Permission) access.Principal {
		p := owner
		p.Permissions = access.NewPermissionSet(perms...)
		return p
	}
	for name, p := range map[string]access.Principal{
		"reader":              withPermissions(access.PermissionsOf(access.RoleReader).List()...),
		"without run:create":  withPermissions(access.PermRunRead, access.PermRunApprove, access.PermRunCancel),
		"without run:approve": withPermissions(access.PermRunRead, access.PermRunCreate, access.PermRunCancel),
	} {
		if _, err := h.forceExecute(p, target.ID); !errors.Is(err, fault.ErrForbidden) {
			t.Errorf("%s: %v, want ErrForbidden", name, err)
		}
	}
	stranger := h.env.WithOrganization("elsewhere")
	other := owner
	other.ID, other.OrganizationID = stranger.ID, stranger.OrganizationID
	bounded := owner
	bounded.WorkspaceID = holder.WorkspaceID + "_other"
	for name, p := range map[string]access.Principal{"another tenant": other, "a token bounded to another workspace": bounded} {
		if _, err := h.forceExecute(p, target.ID); !errors.Is(err, fault.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if _, err := h.forceExecute(owner, "run_nosuchrun"); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("unknown run: %v, want ErrNotFound", err)
	}
	if got, held := h.read(holder.ID).Status, h.read(target.ID).Status; got != run.StatusAwaitingApproval || held != run.StatusPending {
		t.Fatalf("refusals changed the runs: holder %s, target %s", got, held)
	}
	// The /v1 action needs an idempotency key like every mutation, and
	// then starts the run.
	if resp := h.owner.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/runs/" + target.ID + "/actions/force-execute"}); resp.Status != http.StatusBadRequest {
		t.Fatalf("/v1 force-execute without a key = %d %s", resp.Status, resp.Body)
	}
	var forced struct {
		Status string `json:"status"`
	}
	h.owner.Mutate(http.MethodPost, "/v1/runs/"+target.ID+"/actions/force-execute", nil).MustStatus(t, http.StatusOK).Data(t, &forced)
	if forced.Status != string(run.StatusPlanQueued) || h.read(holder.ID).Status != run.StatusRejected {
		t.Fatalf("/v1 force-execute: target %s, holder %s", forced.Status, h.read(holder.ID).Status)
	}
}

// TestForceExecuteWaitsForARacingDecision: an approval of the run ahead
// that is under way holds its row; a force-execute waits for it and then
// sees the approved run, which it cannot skip, instead of discarding the
// plan it read before.
func TestForceExecuteWaitsForARacingDecision(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("racing")
	holder := h.plan(h.read(h.createRun(ws).ID), planJSON(t))
	target := h.createRun(ws)
	owner := h.ownerPrincipal()

	tx, err := h.env.DB.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := h.runs.Approve(h.ctx, tx, owner, holder.ID, run.BindingOf(holder)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.forceExecute(owner, target.ID)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("force-execute did not wait for the approval under way: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, run.ErrQueueNotDiscardable) {
		t.Fatalf("force-execute after the approval: %v, want ErrQueueNotDiscardable", err)
	}
	if got, waiting := h.read(holder.ID).Status, h.read(target.ID).Status; got != run.StatusApplyQueued || waiting != run.StatusPending {
		t.Fatalf("after the race: holder %s, target %s", got, waiting)
	}
}
