package run_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/run"
)

// emergencyBody is a state the interrupted CLI could not publish.
const emergencyBody = `{"version":4,"terraform_version":"1.10.6","serial":3,"lineage":"lin-emergency","outputs":{},"resources":[]}`

// failedApply takes a new run of the workspace through plan and approval
// to an apply that exits nonzero: after publishing a partial state through
// the CLI (publish), or leaving errored.tfstate (otherwise). The run is in
// recovery; the emergency state's artifact is returned when there is one.
func (h *harness) failedApply(workspaceID string, publish bool) (run.Run, *run.Artifact) {
	h.t.Helper()
	r := h.plan(h.createRun(workspaceID), planJSON(h.t))
	h.approve(r.ID)
	st := h.start(h.read(r.ID), run.PhaseApply)
	outcome := run.ApplyOutcome{ExitCode: 1}
	if publish {
		h.publishState(st, "lin-partial-"+r.ID)
	} else {
		a, err := h.runs.StoreArtifact(h.ctx, st, run.ArtifactEmergencyState, strings.NewReader(emergencyBody), 1<<20)
		if err != nil {
			h.t.Fatal(err)
		}
		outcome.Emergency = &a
	}
	got, err := h.runs.CommitApply(h.ctx, st.Attempt.ID, outcome)
	if err != nil {
		h.t.Fatal(err)
	}
	if got.Status != run.StatusRecoveryRequired || got.TerminalReason == nil || *got.TerminalReason != "apply_failed_with_partial_state" {
		h.t.Fatalf("failed apply: %s (%v)", got.Status, got.TerminalReason)
	}
	return got, outcome.Emergency
}

// applyAttempts counts the run's apply attempts and apply jobs: one each
// for an apply that was never retried.
func (h *harness) applyAttempts(runID string) (attempts, jobs int) {
	h.t.Helper()
	if err := h.env.DB.QueryRow(`SELECT (SELECT count(*) FROM run_attempts WHERE run_id = $1 AND phase = 'apply'),
		(SELECT count(*) FROM river_job WHERE kind = 'run_phase' AND args->>'run_id' = $1 AND args->>'phase' = 'apply')`,
		runID).Scan(&attempts, &jobs); err != nil {
		h.t.Fatal(err)
	}
	return attempts, jobs
}

// currentState is the workspace's current state version and SHA-256.
func (h *harness) currentState(workspaceID string) (id, sha256 string) {
	h.t.Helper()
	if err := h.env.DB.QueryRow(`SELECT id, encode(sha256, 'hex') FROM state_versions WHERE workspace_id = $1 AND status = 'finalized'
		ORDER BY number DESC LIMIT 1`, workspaceID).Scan(&id, &sha256); err != nil {
		h.t.Fatal(err)
	}
	return id, sha256
}

// TestRecoveryGoesOnWithAppliesSwitchedOff (SPEC §1 rule 7: the apply
// switch does not block the recovery path): with applies and new runs
// switched off, a run whose apply failed after publishing part of its
// state is resolved as current_state_verified through /v1, and the
// workspace's queue moves on to the run waiting behind it; with the public
// gate closed as well, another is resolved by importing its emergency
// state. Neither apply is retried.
func TestRecoveryGoesOnWithAppliesSwitchedOff(t *testing.T) {
	t.Parallel()
	h := setup(t)
	verifiedWS, importedWS := h.workspace("verified"), h.workspace("imported")
	verified, _ := h.failedApply(verifiedWS, true)
	behind := h.createRun(verifiedWS)
	if behind.Status != run.StatusPending {
		t.Fatalf("the run behind the failed apply is %s", behind.Status)
	}
	imported, emergency := h.failedApply(importedWS, false)

	h.control("applies and new runs off", func(c *launch.Control) { c.AppliesEnabled, c.NewRunsEnabled = false, false })
	recover := func(runID, resolution string) review {
		t.Helper()
		v := h.review(runID)
		if v.Recovery == nil {
			t.Fatalf("run %s shows no recovery evidence: %+v", runID, v)
		}
		body := map[string]any{"resolution": resolution, "current_state_version_id": v.Recovery.CurrentStateVersionID,
			"current_state_digest": v.Recovery.CurrentStateDigest, "reason": "verified by hand with applies off", "confirm_fence_advance": true}
		if v.Recovery.EmergencyStateDigest != nil {
			body["emergency_state_digest"] = *v.Recovery.EmergencyStateDigest
		}
		var out review
		h.owner.Mutate(http.MethodPost, "/v1/runs/"+runID+"/actions/recover", body).MustStatus(t, http.StatusOK).Data(t, &out)
		if out.Status != string(run.StatusRecovered) || out.TerminalReason == nil || *out.TerminalReason != resolution ||
			out.Decision == nil || out.Decision.Action != run.DecisionApproved {
			t.Fatalf("recovered %s: %+v", runID, out)
		}
		if attempts, jobs := h.applyAttempts(runID); attempts != 1 || jobs != 1 {
			t.Fatalf("run %s has %d apply attempts and %d apply jobs after its recovery", runID, attempts, jobs)
		}
		return out
	}

	partial, _ := h.currentState(verifiedWS)
	if got := recover(verified.ID, run.ResolutionCurrentStateVerified); got.Apply.StateVersionID == nil || *got.Apply.StateVersionID != partial {
		t.Fatalf("verified run records state %v, want the partial state %s", got.Apply.StateVersionID, partial)
	}
	if id, _ := h.currentState(verifiedWS); id != partial {
		t.Fatalf("verifying the current state changed it to %s", id)
	}
	if next := h.read(behind.ID); next.Status != run.StatusPlanQueued {
		t.Fatalf("after the recovery the run behind is %s, want plan_queued", next.Status)
	}
	h.queued(behind, run.PhasePlan)

	h.control("public gate closed too", func(c *launch.Control) { c.PublicGate = false })
	got := recover(imported.ID, run.ResolutionImportEmergencyState)
	id, sha := h.currentState(importedWS)
	if got.Apply.StateVersionID == nil || *got.Apply.StateVersionID != id || sha != run.HexDigest(emergency.SHA256) {
		t.Fatalf("imported run records state %v; current %s (sha256 %s, emergency %s)", got.Apply.StateVersionID, id, sha,
			run.HexDigest(emergency.SHA256))
	}
}

// TestRecoveryTakeoverAfterTheLease (SPEC §4 rule 2): a recovery belongs to
// the principal that prepared it for 15 minutes, on the database clock.
// While the first admin's import is under way another admin is refused,
// even confirming a takeover; once the lease expired they are refused
// without confirm_takeover and with changed evidence, and take over with
// it: the first admin's in-flight recovery is fenced and resolves nothing,
// the takeover is audited, and the second admin, after losing a response,
// resumes and resolves the same recovery to the one state version both
// imports wrote; a takeover naming the evidence as it reads after the
// import (not as the recovery was prepared) conflicts. The apply is never
// retried.
func TestRecoveryTakeoverAfterTheLease(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r, emergency := h.failedApply(h.workspace("takeover"), false)
	second := h.env.SignUp("second")
	h.env.Join(h.owner, second, string(access.RoleAdmin))
	first := h.ownerPrincipal()
	other := access.Principal{Kind: access.KindUser, ID: second.ID, OrganizationID: h.owner.OrganizationID, Role: access.RoleAdmin,
		Permissions: access.PermissionsOf(access.RoleAdmin), ReauthenticatedAt: time.Now()}
	in := run.RecoverInput{Resolution: run.ResolutionImportEmergencyState, EmergencyStateDigest: run.HexDigest(emergency.SHA256),
		Reason: "import what the failed apply kept", ConfirmFenceAdvance: true}
	settled := func(context.Context, *sqlx.Tx, run.Run) error { return nil }
	recovery := func() run.Recovery {
		t.Helper()
		rec, err := h.runs.RecoveryOf(h.ctx, h.env.DB, r.ID)
		if err != nil || rec == nil {
			t.Fatalf("reading the recovery: %v %v", rec, err)
		}
		return *rec
	}

	// The import reads the workspace; holding the table stops each
	// recovery there, after its lease was taken and committed.
	lock, err := h.env.DB.BeginTxx(h.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.Exec(`LOCK TABLE workspaces IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	waiting := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var got int
			if err := h.env.DB.Get(&got, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'workspaces'::regclass`); err != nil {
				t.Fatal(err)
			}
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d recoveries wait on the workspace, want %d", got, n)
			}
		}
	}
	// Calls refused before their import must not reach it: one that did
	// would wait on the table until this deadline.
	refusing, cancel := context.WithTimeout(h.ctx, 20*time.Second)
	defer cancel()
	firstDone := make(chan error, 1)
	go func() {
		_, err := h.runs.Recover(h.ctx, first, r.ID, in, settled)
		firstDone <- err
	}()
	waiting(1)
	prepared := recovery()
	if prepared.HolderID != first.ID || prepared.Fence != 1 || prepared.Status != "prepared" || prepared.LeaseRemaining < 890 {
		t.Fatalf("prepared recovery %+v", prepared)
	}

	takeover := in
	takeover.ConfirmTakeover = true
	if _, err := h.runs.Recover(refusing, other, r.ID, takeover, settled); !errors.Is(err, run.ErrRecoveryLeaseHeld) {
		t.Fatalf("a takeover inside the lease: %v, want ErrRecoveryLeaseHeld", err)
	}
	if _, err := h.env.DB.Exec(`UPDATE run_recoveries SET lease_expires_at = now() - interval '1 second' WHERE run_id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.runs.Recover(refusing, other, r.ID, in, settled); !errors.Is(err, run.ErrRecoveryLeaseHeld) {
		t.Fatalf("an expired lease taken without confirm_takeover: %v, want ErrRecoveryLeaseHeld", err)
	}
	changed := takeover
	changed.EmergencyStateDigest = strings.Repeat("0", 64)
	verified := takeover
	verified.Resolution, verified.EmergencyStateDigest = run.ResolutionCurrentStateVerified, ""
	for name, ch := range map[string]run.RecoverInput{"another emergency state": changed, "another resolution": verified} {
		if _, err := h.runs.Recover(refusing, other, r.ID, ch, settled); !errors.Is(err, run.ErrRecoveryEvidence) {
			t.Fatalf("a takeover naming %s: %v, want ErrRecoveryEvidence", name, err)
		}
	}
	if rec := recovery(); rec.HolderID != first.ID || rec.Fence != 1 {
		t.Fatalf("refused takeovers changed the recovery: %+v", rec)
	}

	// The takeover commits while the first admin's import still waits;
	// the second admin's answer is then lost.
	lost := errors.New("the answer could not be stored")
	secondDone := make(chan error, 1)
	go func() {
		_, err := h.runs.Recover(h.ctx, other, r.ID, takeover, func(context.Context, *sqlx.Tx, run.Run) error { return lost })
		secondDone <- err
	}()
	waiting(2)
	taken := recovery()
	if taken.ID != prepared.ID || taken.HolderID != other.ID || taken.Fence != 2 || taken.LeaseRemaining < 890 {
		t.Fatalf("recovery after the takeover %+v (prepared %s)", taken, prepared.ID)
	}
	var actor string
	var evidence []byte
	if err := h.env.DB.QueryRow(`SELECT actor_id, evidence FROM audit_events WHERE action = 'run.recovery_taken_over' AND target_id = $1`,
		r.ID).Scan(&actor, &evidence); err != nil {
		t.Fatalf("no takeover audit event: %v", err)
	}
	for _, want := range []string{`"recovery_id": "` + prepared.ID + `"`, `"previous_holder_id": "` + first.ID + `"`, `"fence": 2`} {
		if actor != other.ID || !strings.Contains(string(evidence), want) {
			t.Fatalf("takeover audited by %s with %s, want %s", actor, evidence, want)
		}
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-firstDone; !errors.Is(err, run.ErrRecoveryLeaseHeld) {
		t.Fatalf("the fenced first recovery: %v, want ErrRecoveryLeaseHeld", err)
	}
	if err := <-secondDone; !errors.Is(err, lost) {
		t.Fatalf("the second recovery: %v, want its lost answer", err)
	}
	if v := h.review(r.ID); v.Status != string(run.StatusRecoveryRequired) || v.LeaseExpiresAt == nil ||
		v.LeaseRemainingSeconds == nil || *v.LeaseRemainingSeconds < 890 || *v.LeaseRemainingSeconds > 900 {
		t.Fatalf("review of the taken-over recovery: %+v", v)
	}
	// The first admin cannot come back while the second holds the lease,
	// nor after it expired naming the evidence shown now (the imported
	// state is current), which is not what the recovery was prepared with.
	if _, err := h.runs.Recover(h.ctx, first, r.ID, takeover, settled); !errors.Is(err, run.ErrRecoveryLeaseHeld) {
		t.Fatalf("the fenced admin again: %v, want ErrRecoveryLeaseHeld", err)
	}
	if _, err := h.env.DB.Exec(`UPDATE run_recoveries SET lease_expires_at = now() - interval '1 second' WHERE run_id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}
	importedID, importedSHA := h.currentState(r.WorkspaceID)
	shownNow := takeover
	shownNow.CurrentStateVersionID, shownNow.CurrentStateDigest = &importedID, importedSHA
	if _, err := h.runs.Recover(h.ctx, first, r.ID, shownNow, settled); !errors.Is(err, run.ErrRecoveryEvidence) {
		t.Fatalf("a takeover naming the imported state as current: %v, want ErrRecoveryEvidence", err)
	}
	if rec := recovery(); rec.HolderID != other.ID || rec.Fence != 2 {
		t.Fatalf("a refused takeover changed the recovery: %+v", rec)
	}

	recovered, err := h.runs.Recover(h.ctx, other, r.ID, takeover, settled)
	if err != nil {
		t.Fatalf("resuming after the lost answer: %v", err)
	}
	var versions []string
	if err := h.env.DB.Select(&versions, `SELECT id FROM state_versions WHERE workspace_id = $1 AND status = 'finalized'`, r.WorkspaceID); err != nil {
		t.Fatal(err)
	}
	final := recovery()
	if recovered.Status != run.StatusRecovered || len(versions) != 1 || recovered.StateVersionID == nil || *recovered.StateVersionID != versions[0] ||
		final.ID != prepared.ID || final.Status != "resolved" || final.Fence != 2 || final.HolderID != other.ID ||
		final.TargetStateVersionID == nil || *final.TargetStateVersionID != versions[0] {
		t.Fatalf("resolved run %s with state %v; recovery %+v; the workspace's versions %v", recovered.Status, recovered.StateVersionID, final, versions)
	}
	if ev := h.auditEvidence("run.recovered", r.ID); len(ev) != 1 || ev[0]["recovery_id"] != prepared.ID || ev[0]["fence"] != float64(2) {
		t.Fatalf("run.recovered evidence %v", ev)
	}
	if v := h.review(r.ID); v.LeaseExpiresAt != nil || v.LeaseRemainingSeconds != nil {
		t.Fatalf("a resolved recovery still shows a lease: %+v", v)
	}
	if _, err := h.runs.Recover(h.ctx, first, r.ID, takeover, settled); !errors.Is(err, run.ErrActionNotAllowed) {
		t.Fatalf("recovering a recovered run: %v, want ErrActionNotAllowed", err)
	}
	if attempts, jobs := h.applyAttempts(r.ID); attempts != 1 || jobs != 1 {
		t.Fatalf("%d apply attempts and %d apply jobs after the recovery", attempts, jobs)
	}
}
