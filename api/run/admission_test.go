package run_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/run"
)

// control writes a new launch-control version, the one in force changed
// by change, as an operator does.
func (h *harness) control(reason string, change func(c *launch.Control)) {
	h.t.Helper()
	admission := h.env.Server.Services().Launch
	current, err := admission.Current(h.ctx)
	if err != nil || current == nil {
		h.t.Fatalf("reading the launch control: %v", err)
	}
	next := *current
	next.Regions = map[string]bool{}
	for region, on := range current.Regions {
		next.Regions[region] = on
	}
	next.Ceilings.SandboxesPerRegion = map[string]int{}
	for region, n := range current.Ceilings.SandboxesPerRegion {
		next.Ceilings.SandboxesPerRegion[region] = n
	}
	change(&next)
	if _, _, err := admission.Apply(h.ctx, launch.Change{Actor: "test-operator", RequestID: "req_test", IdempotencyKey: apitest.NewKey(),
		ExpectedVersion: current.Version, Reason: reason, Document: next}); err != nil {
		h.t.Fatalf("launch control change %q: %v", reason, err)
	}
}

// attemptState is what a phase start leaves on the attempt: who took it,
// its sandbox and its capacity lease.
type attemptState struct {
	Status       string  `db:"status"`
	WorkerID     *string `db:"worker_id"`
	SandboxName  *string `db:"sandbox_name"`
	Leases       int     `db:"leases"`
	ActiveLeases int     `db:"active_leases"`
	LeaseRegion  *string `db:"lease_region"`
}

func (h *harness) attemptState(attemptID string) attemptState {
	h.t.Helper()
	var s attemptState
	if err := h.env.DB.Get(&s, `SELECT status, worker_id, sandbox_name,
		(SELECT count(*) FROM capacity_leases WHERE attempt_id = a.id) AS leases,
		(SELECT count(*) FROM capacity_leases WHERE attempt_id = a.id AND released_at IS NULL) AS active_leases,
		(SELECT region FROM capacity_leases WHERE attempt_id = a.id) AS lease_region
		FROM run_attempts a WHERE id = $1`, attemptID); err != nil {
		h.t.Fatal(err)
	}
	return s
}

// refusedStart starts the run's queued attempt of phase and expects launch
// control to refuse it: the job waits, and nothing of the start commits
// (no sandbox, no lease, the attempt and the run as they were).
func (h *harness) refusedStart(r run.Run, phase string) {
	h.t.Helper()
	a := h.queued(r, phase)
	if _, err := h.runs.StartAttempt(h.ctx, a.ID, "test-worker", "local"); !errors.Is(err, run.ErrGateClosed) {
		h.t.Fatalf("starting the %s of %s: %v, want ErrGateClosed", phase, r.ID, err)
	}
	if s := h.attemptState(a.ID); s.Status != run.AttemptQueued || s.WorkerID != nil || s.SandboxName != nil || s.Leases != 0 {
		h.t.Fatalf("a refused %s start left %+v", phase, s)
	}
	if got := h.read(r.ID); got.Status != r.Status || got.PlanStatus != r.PlanStatus || got.ApplyStatus != r.ApplyStatus {
		h.t.Fatalf("a refused %s start moved the run from %s to %s (plan %s, apply %s)", phase, r.Status, got.Status, got.PlanStatus, got.ApplyStatus)
	}
}

// admittedStart starts the run's queued attempt of phase and expects a
// sandbox name and a lease in region.
func (h *harness) admittedStart(r run.Run, phase, region string) run.Started {
	h.t.Helper()
	st := h.start(r, phase)
	if s := h.attemptState(st.Attempt.ID); s.Status != run.AttemptRunning || s.SandboxName == nil || s.ActiveLeases != 1 ||
		s.LeaseRegion == nil || *s.LeaseRegion != region {
		h.t.Fatalf("an admitted %s start left %+v, want a running attempt with a lease in %s", phase, s, region)
	}
	return st
}

// TestApplySwitchIsRecheckedAtApprovalAndApplyStart (SPEC §1 rule 7):
// with applies switched off an approval is refused, on /v1 and on /api/v2,
// with the retryable 503 and nothing recorded; the same approval passes once
// applies are back on. An apply approved while they were on whose start
// comes after they were switched off (or after the public gate closed) gets
// no sandbox and no lease and stays queued, then starts once both are open
// again.
func TestApplySwitchIsRecheckedAtApprovalAndApplyStart(t *testing.T) {
	t.Parallel()
	h := setup(t)
	wsID := h.workspace("switched")
	r := h.plan(h.createRun(wsID), planJSON(t))
	if r.Status != run.StatusAwaitingApproval {
		t.Fatalf("planned run is %s", r.Status)
	}
	h.control("applies off for the test", func(c *launch.Control) { c.AppliesEnabled = false })

	v := h.review(r.ID)
	binding := map[string]any{"plan_digest": v.Plan.PlanDigest, "policy_result_digest": v.Policy.ResultDigest,
		"predecessor_state_version_id": v.Plan.PredecessorStateVersionID, "dependency_lock_digest": v.Pinned.DependencyLockDigest}
	refused := h.owner.Mutate(http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", binding)
	if refused.Status != http.StatusServiceUnavailable || refused.Header.Get("Retry-After") != "60" ||
		!strings.Contains(string(refused.Body), "service_unavailable") {
		t.Fatalf("approval with applies off: %d %s (Retry-After %q)", refused.Status, refused.Body, refused.Header.Get("Retry-After"))
	}
	var token struct{ Token string }
	h.owner.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "cli"}).MustStatus(t, http.StatusCreated).Data(t, &token)
	cliApply := h.env.Anonymous().Do(apitest.Request{Method: http.MethodPost, Path: "/api/v2/runs/" + r.ID + "/actions/apply",
		Header: map[string]string{"Authorization": "Bearer " + token.Token, "Content-Type": "application/vnd.api+json"}})
	if cliApply.Status != http.StatusServiceUnavailable || !strings.Contains(string(cliApply.Body), "service_unavailable") {
		t.Fatalf("/api/v2 apply with applies off: %d %s", cliApply.Status, cliApply.Body)
	}
	got := h.read(r.ID)
	attempts, err := h.runs.Attempts(h.ctx, h.env.DB, got)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != run.StatusAwaitingApproval || got.DecisionAction != nil || got.ApprovedBinding != nil || len(attempts) != 1 ||
		len(h.auditEvidence("run.approved", r.ID)) != 0 {
		t.Fatalf("refused approvals left the run %s (decision %v, binding %v) with %d attempts and %d approval events",
			got.Status, got.DecisionAction, got.ApprovedBinding, len(attempts), len(h.auditEvidence("run.approved", r.ID)))
	}

	h.control("applies back on", func(c *launch.Control) { c.AppliesEnabled = true })
	h.owner.Mutate(http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", binding).MustStatus(t, http.StatusOK)
	approved := h.read(r.ID)
	if approved.Status != run.StatusApplyQueued {
		t.Fatalf("approved run is %s", approved.Status)
	}

	// Approved while applies were on; they are off when the apply starts.
	h.control("applies off while the apply waits", func(c *launch.Control) { c.AppliesEnabled = false })
	h.refusedStart(approved, run.PhaseApply)
	// Applies on, but the public gate closed (the workspace is no canary).
	h.control("gate closed while the apply waits", func(c *launch.Control) { c.AppliesEnabled, c.PublicGate = true, false })
	h.refusedStart(approved, run.PhaseApply)
	h.control("gate open again", func(c *launch.Control) { c.PublicGate = true })
	if st := h.admittedStart(approved, run.PhaseApply, "us"); st.Run.Status != run.StatusApplying || st.Run.DecisionAction == nil ||
		*st.Run.DecisionAction != run.DecisionApproved {
		t.Fatalf("the apply started as %s with decision %v", st.Run.Status, st.Run.DecisionAction)
	}
}

// TestSandboxStartRechecksTheStoredRegion (SPEC §1 rule 7): a run's
// attempts start only while the region the run was pinned to at creation
// is switched on. A queued plan, and later a queued apply, whose region was
// switched off after the run was created get no sandbox and no lease and
// wait; they start once it is back on. The region is the run's own, not
// the workspace's current one: moving the workspace to another region
// changes nothing for a run created before.
func TestSandboxStartRechecksTheStoredRegion(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.control("eu on with room for sandboxes", func(c *launch.Control) {
		c.Regions["eu"], c.Ceilings.SandboxesPerRegion["eu"] = true, 2
	})
	wsID := h.workspace("moving")
	r := h.createRun(wsID)
	if r.Region != "us" {
		t.Fatalf("run pinned to %q", r.Region)
	}
	// The workspace moves to eu after the run was created.
	h.owner.Mutate(http.MethodPatch, "/v1/workspaces/"+wsID, map[string]any{
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "eu", "platform": "linux_amd64"}}).
		MustStatus(t, http.StatusOK)

	h.control("us off", func(c *launch.Control) { c.Regions["us"] = false })
	h.refusedStart(r, run.PhasePlan)
	h.control("us on, eu off", func(c *launch.Control) { c.Regions["us"], c.Regions["eu"] = true, false })
	planAttempt := h.queued(r, run.PhasePlan)
	planned := h.plan(r, planJSON(t))
	if s := h.attemptState(planAttempt.ID); planned.Status != run.StatusAwaitingApproval || s.Status != run.AttemptSucceeded ||
		s.LeaseRegion == nil || *s.LeaseRegion != "us" || s.ActiveLeases != 0 {
		t.Fatalf("the plan started in eu's stead: run %s, attempt %+v", planned.Status, s)
	}
	h.approve(r.ID)
	approved := h.read(r.ID)

	h.control("us off while the apply waits", func(c *launch.Control) { c.Regions["us"], c.Regions["eu"] = false, true })
	h.refusedStart(approved, run.PhaseApply)
	h.control("us on again", func(c *launch.Control) { c.Regions["us"] = true })
	h.admittedStart(approved, run.PhaseApply, "us")
}
