package run

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"

	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/state"
	"github.com/cairnhq/cairn/api/workspace"
)

var (
	// ErrAttemptNotCurrent means the attempt was canceled, lost or already
	// ran: its job must do nothing.
	ErrAttemptNotCurrent = errors.New("attempt is not current")
	// ErrNoCapacity means the region is at its sandbox ceiling; the job
	// waits and tries again.
	ErrNoCapacity = errors.New("region at its sandbox ceiling")
	// ErrGateClosed means launch control refused the start; the job waits.
	ErrGateClosed = errors.New("launch control refused the phase start")
	// ErrApplyRefused means the approval no longer authorizes the apply
	// (an override expired, the policy result or the state changed): the
	// run ended as errored and nothing was applied.
	ErrApplyRefused = errors.New("apply refused at start: the approval no longer holds")
)

// Started is a phase attempt that holds a capacity lease and may create its
// sandbox.
type Started struct {
	Run           Run
	Attempt       Attempt
	Configuration ConfigurationVersion
	SandboxName   string
	// Credentials is the attempt's one-time credential handle, held in
	// memory only; nil when the run pinned none.
	Credentials *credential.Grant
	// CredentialIssue is how long issuing the handle took in the
	// sandbox-create intent.
	CredentialIssue time.Duration
	// QueueWait is how long the attempt waited between being due and
	// starting.
	QueueWait time.Duration
	// StartTook is how long the sandbox-create intent's transaction took,
	// commit included.
	StartTook time.Duration
}

// StartAttempt is the sandbox-create intent: in one transaction it fences
// the attempt, rechecks the stored region (and, for applies, the public and
// apply gates), takes a regional capacity lease and marks the attempt and
// run running. A refused launch gate or a full region commits nothing; the
// job waits. An apply whose approval no longer holds (see applyRefusal)
// ends the run as errored instead and returns ErrApplyRefused.
func (s *Service) StartAttempt(ctx context.Context, attemptID, workerID, driver string) (Started, error) {
	var out Started
	var refused, credRefused string
	began := time.Now()
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		r, a, err := lockAttempt(ctx, tx, attemptID)
		if err != nil {
			return err
		}
		want := StatusPlanQueued
		if a.Phase == PhaseApply {
			want = StatusApplyQueued
		}
		if a.Status != AttemptQueued || (r.Status != want && !(a.Phase == PhasePlan && r.Status == StatusPlanning)) {
			return ErrAttemptNotCurrent
		}
		subject := launch.Subject{OrganizationID: r.OrganizationID, WorkspaceID: r.WorkspaceID}
		// An apply must also pass the apply gate: both rules are
		// decided from one reading of the control.
		var applyGate []launch.Rule
		if a.Phase == PhaseApply {
			applyGate = append(applyGate, launch.AdmitApply)
		}
		if _, err := s.launch.RequireBy(ctx, tx, subject, launch.AdmitSandbox(r.Region), applyGate...); err != nil {
			return ErrGateClosed
		}
		now := s.stamp()
		if a.Phase == PhaseApply {
			if refused, err = s.applyRefusal(ctx, tx, r, now); err != nil || refused != "" {
				if err != nil {
					return err
				}
				return s.refuseApply(ctx, tx, r, a, refused)
			}
		}
		// Credentials are issued (and the pinned versions rechecked) in
		// this transaction: a phase without the credentials its run
		// needs never gets a sandbox.
		issueStart := time.Now()
		grant, reason, err := s.issueCredentials(ctx, tx, r, a)
		issued := time.Since(issueStart)
		if err != nil {
			return err
		}
		if reason != "" {
			credRefused = reason
			return s.refuseCredentials(ctx, tx, r, a, reason)
		}
		granted, err := s.launch.TakeLease(ctx, tx, r.Region, launch.LeaseHolder{AttemptID: a.ID})
		if err != nil {
			return err
		}
		if !granted {
			return ErrNoCapacity
		}
		name := fmt.Sprintf("%s-%s-%d", r.ID, a.Phase, a.Number)
		a.Status, a.StartedAt, a.HeartbeatAt = AttemptRunning, &now, &now
		a.WorkerID, a.SandboxDriver, a.SandboxName = &workerID, &driver, &name
		if err := saveAttempt(ctx, tx, a); err != nil {
			return err
		}
		if a.Phase == PhasePlan {
			r.PlanStatus = PhaseRunning
			r = s.transition(r, StatusPlanning)
		} else {
			r.ApplyStatus = PhaseRunning
			r = s.transition(r, StatusApplying)
		}
		if err := s.save(ctx, tx, r); err != nil {
			return err
		}
		cv, err := configurationVersionByID(ctx, tx, r.OrganizationID, r.ConfigurationVersionID)
		if err != nil {
			return err
		}
		out = Started{Run: r, Attempt: a, Configuration: cv, SandboxName: name, Credentials: grant, CredentialIssue: issued,
			QueueWait: now.Sub(a.QueuedAt)}
		return nil
	})
	if err == nil && refused != "" {
		return Started{}, fmt.Errorf("%w (%s)", ErrApplyRefused, refused)
	}
	if err == nil && credRefused != "" {
		return Started{}, fmt.Errorf("%w (%s)", ErrCredentialsUnavailable, credRefused)
	}
	out.StartTook = time.Since(began)
	return out, err
}

// Heartbeat proves the attempt's worker is alive. It says stop when the
// attempt is no longer running or its run was canceled, so the worker
// stops the command, and kill once the run was force-canceled.
func (s *Service) Heartbeat(ctx context.Context, attemptID string) (Halt, error) {
	var decision *string
	var runStatus string
	var forced *time.Time
	err := s.db.QueryRowxContext(ctx, `UPDATE run_attempts a SET heartbeat_at = now() FROM runs r
		WHERE a.id = $1 AND a.status = 'running' AND r.id = a.run_id
		RETURNING r.status, r.decision_action, r.force_canceled_at`, attemptID).Scan(&runStatus, &decision, &forced)
	if errors.Is(err, sql.ErrNoRows) {
		return HaltStop, nil
	}
	if err != nil {
		return HaltNone, fmt.Errorf("heartbeat: %w", err)
	}
	canceled := decision != nil && *decision == DecisionCanceled
	switch {
	case forced != nil:
		return HaltKill, nil
	case canceled || Status(runStatus).Terminal():
		return HaltStop, nil
	}
	return HaltNone, nil
}

// Halt is what a heartbeat tells the attempt's worker to do.
type Halt int

const (
	// HaltNone: go on.
	HaltNone Halt = iota
	// HaltStop: stop the command with its interrupt and grace.
	HaltStop
	// HaltKill: the run was force-canceled; kill the sandbox at once.
	HaltKill
)

// RunInputs returns the variable values the run pinned at creation,
// unsealed, for the sandbox only: the workspace's, with the run's own
// variables over those of the same key. The run's options must still be
// exactly what its input snapshot recorded, every run variable's value
// included; otherwise the run does not plan with them
// (workspace.ErrSnapshotChanged).
func (s *Service) RunInputs(ctx context.Context, r Run) ([]workspace.ResolvedVariable, error) {
	var snap inputSnapshot
	if err := json.Unmarshal(r.InputSnapshot, &snap); err != nil {
		return nil, fmt.Errorf("decoding input snapshot: %w", err)
	}
	// The tool version the run was pinned to is the snapshot's too.
	if snap.ToolVersion != r.ToolVersion {
		return nil, workspace.ErrSnapshotChanged
	}
	requested := ""
	if snap.Options != nil {
		requested = snap.Options.ToolVersion
	}
	recorded, err := json.Marshal(snap.Options)
	if err != nil {
		return nil, err
	}
	current, err := json.Marshal(snapshotOptions(r.RunOptions, requested))
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(recorded, current) {
		return nil, workspace.ErrSnapshotChanged
	}
	// The variable references are read here only: reads of the run leave
	// them out (runColumns).
	refs, err := variableRefs(ctx, s.db, r.OrganizationID, r.ID)
	if err != nil {
		return nil, err
	}
	// What created the snapshot left secrets out of a pull request's or
	// an untrusted run; a snapshot that names one anyway is refused here,
	// before anything is unsealed, rather than trusted.
	if r.Untrusted() || (r.Speculative() && r.Source == SourceVCS) {
		for _, v := range refs {
			if v.Sensitive {
				return nil, fmt.Errorf("%w: sensitive variable %q", ErrUntrustedInputs, v.Key)
			}
		}
	}
	pinned, err := s.workspaces.ResolvePinned(ctx, r.OrganizationID, r.WorkspaceID, r.ID, refs)
	if err != nil {
		return nil, err
	}
	return WithRunVariables(pinned, r.Variables), nil
}

// WorkspaceOf returns the run's workspace.
func (s *Service) WorkspaceOf(ctx context.Context, r Run) (workspace.Workspace, error) {
	return workspace.WorkspaceByID(ctx, s.db, r.OrganizationID, r.WorkspaceID, false)
}

// StoreArtifact seals an artifact stream for a run. The row is written by
// the commit that records the phase result; until then the object is an
// orphan the caller deletes on failure.
func (s *Service) StoreArtifact(ctx context.Context, st Started, kind string, r io.Reader, limit int64) (Artifact, error) {
	blobs, err := s.storage()
	if err != nil {
		return Artifact{}, err
	}
	if max, ok := kindLimits[kind]; ok && (limit <= 0 || limit > max) {
		limit = max
	}
	key := blobkey.RunArtifact(st.Run.OrganizationID, st.Run.ID, kind)
	d, err := blobs.Put(ctx, key, artifactIdentity(st.Run.OrganizationID, st.Run.ID, kind), r, limit)
	if err != nil {
		return Artifact{}, fmt.Errorf("storing %s: %w", kind, err)
	}
	return Artifact{ID: id.New("art"), OrganizationID: st.Run.OrganizationID, RunID: st.Run.ID, AttemptID: st.Attempt.ID,
		Kind: kind, BlobKey: key, SizeBytes: d.Size, SHA256: d.SHA256, CreatedAt: s.stamp()}, nil
}

// DiscardArtifacts deletes objects whose rows never committed.
func (s *Service) DiscardArtifacts(ctx context.Context, arts []Artifact) {
	if s.blobs == nil {
		return
	}
	for _, a := range arts {
		_ = s.blobs.Delete(context.WithoutCancel(ctx), a.BlobKey)
	}
}

// PlanEvidence is what a plan attempt commits once its plan is made.
type PlanEvidence struct {
	// Artifacts are the plan's sealed evidence: at least its plan file.
	Artifacts                 []Artifact
	HasChanges                bool
	Additions, Changes        int
	Destructions              int
	PredecessorStateVersionID *string
}

// CommitPlan records a finished plan (its plan file, change counts and
// predecessor state) and reserves the run's policy check for it, pending
// with no input digest (SPEC §3), in one transaction. The run stays
// planning with its plan phase finished while the attempt evaluates the
// policy stage; CommitPolicy ends the attempt. Plan evidence an earlier,
// lost attempt of the run committed is replaced: its rows are deleted
// here and its objects once the transaction committed (SPEC §8). The
// attempt fence is checked under the run's row lock: a canceled or lost
// attempt, or one whose plan is already committed, commits nothing.
func (s *Service) CommitPlan(ctx context.Context, attemptID string, ev PlanEvidence) (Run, error) {
	var out Run
	var superseded []Artifact
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		r, a, err := s.runningAttempt(ctx, tx, attemptID)
		if err != nil {
			return err
		}
		if a.Phase != PhasePlan || r.PlanStatus != PhaseRunning {
			return ErrAttemptNotCurrent
		}
		if r.Untrusted() {
			// Planned without the workspace's state: bound to none, and
			// never applied.
			if ev.PredecessorStateVersionID != nil {
				return fmt.Errorf("%w: an untrusted plan names a state version", ErrUntrustedInputs)
			}
		} else if err := s.checkPredecessor(ctx, tx, r, ev.PredecessorStateVersionID); err != nil {
			return err
		}
		var planFile []byte
		for _, art := range ev.Artifacts {
			if art.Kind == ArtifactPlanFile {
				planFile = art.SHA256
			}
		}
		if planFile == nil {
			return errors.New("plan evidence lacks the plan file")
		}
		if superseded, err = deletePlanArtifacts(ctx, tx, r.ID); err != nil {
			return err
		}
		if err := insertArtifacts(ctx, tx, ev.Artifacts); err != nil {
			return err
		}
		check, err := policy.ReserveCheck(ctx, tx, r.OrganizationID, r.ID, a.ID, planFile, s.stamp())
		if err != nil {
			return err
		}
		hasChanges := ev.HasChanges
		r.PlanStatus, r.HasChanges, r.PlanDigest = PhaseFinished, &hasChanges, planFile
		r.ResourceAdditions, r.ResourceChanges, r.ResourceDestructions = &ev.Additions, &ev.Changes, &ev.Destructions
		r.PredecessorStateVersionID = ev.PredecessorStateVersionID
		r.UpdatedAt = s.stamp()
		if err := s.save(ctx, tx, r); err != nil {
			return err
		}
		out = r
		return s.systemEvent(ctx, tx, r, "run.planned", map[string]any{
			"attempt_id": a.ID, "has_changes": hasChanges, "additions": ev.Additions, "changes": ev.Changes,
			"destructions": ev.Destructions, "policy_check_id": check.ID, "superseded_artifacts": len(superseded),
		})
	})
	if err != nil {
		return Run{}, err
	}
	s.DiscardArtifacts(ctx, superseded)
	return out, nil
}

// PolicyEvidence is what a plan attempt commits once its policy stage is
// evaluated.
type PolicyEvidence struct {
	// Artifacts are the rest of the plan's sealed evidence: its JSON, its
	// redacted diff and a saved plan's redacted JSON.
	Artifacts []Artifact
	Policy    policy.Evaluation
	Timings   Timings
}

// CommitPolicy records the policy stage of a committed plan, in one
// transaction: the evaluation completes the check the plan commit reserved
// (binding its input digest once), the remaining artifacts are written,
// the attempt ends and the run moves on (AfterPolicy). The attempt fence
// is checked under the run's row lock, and the predecessor state under
// the finalization's, as the plan commit's were. A replay
// of the recorded evaluation (the same attempt, plan and input digest)
// changes nothing and returns the run as it is; any other evaluation of
// the check is policy.ErrEvaluationConflict and changes nothing either.
func (s *Service) CommitPolicy(ctx context.Context, attemptID string, ev PolicyEvidence) (Run, error) {
	var out Run
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		r, a, err := lockAttempt(ctx, tx, attemptID)
		if err != nil {
			return err
		}
		check := ev.Policy.Check
		if check.RunID != r.ID {
			return fmt.Errorf("policy evaluation of run %s committed by an attempt of run %s", check.RunID, r.ID)
		}
		// A replay of what the attempt recorded, or another evaluation of
		// the check it bound, is answered whatever the attempt's state;
		// anything else needs the attempt that committed the plan, still
		// running. A recorded evaluation is rolled back with the rest.
		fenced := a.Phase != PhasePlan || a.Status != AttemptRunning || r.Status != StatusPlanning || r.PlanStatus != PhaseFinished
		recorded, err := policy.RecordEvaluation(ctx, tx, a.ID, ev.Policy)
		switch {
		case err == nil && !recorded:
			out = r
			return nil
		case errors.Is(err, policy.ErrEvaluationConflict):
			return err
		case fenced:
			return ErrAttemptNotCurrent
		case err != nil:
			return err
		}
		// The state may have moved during the policy stage (another run's
		// apply publishing beside a saved plan): rechecked under the
		// finalization's lock, so no stale plan goes on to wait.
		if !r.Untrusted() {
			if err := s.checkPredecessor(ctx, tx, r, r.PredecessorStateVersionID); err != nil {
				return err
			}
		}
		if err := insertArtifacts(ctx, tx, ev.Artifacts); err != nil {
			return err
		}
		if err := s.endAttempt(ctx, tx, &a, AttemptSucceeded, "succeeded", 0, ev.Timings); err != nil {
			return err
		}
		outcome := check.Outcome
		r.PolicyOutcome, r.PolicyResultDigest = &outcome, check.CompositionDigest
		if policy.GateOpensOnItsOwn(outcome) {
			r.PolicyGateUntil = &policy.GateAlwaysOpen
		}
		hasChanges := r.HasChanges != nil && *r.HasChanges
		next, reason := AfterPolicy(PlanResult{Kind: r.Kind, HasChanges: hasChanges, AllowEmptyApply: r.AllowEmptyApply,
			Untrusted: r.Untrusted(), Outcome: outcome})
		if next == StatusAwaitingApproval || next == StatusPolicyOverride {
			deadline := s.stamp().Add(s.opts.ApprovalTimeout)
			r.ApprovalDeadline = &deadline
			r = s.transition(r, next)
			if err := s.save(ctx, tx, r); err != nil {
				return err
			}
			if _, err := s.jobs.InsertTx(ctx, tx.Tx, ExpiryArgs{RunID: r.ID}, &river.InsertOpts{ScheduledAt: deadline}); err != nil {
				return fmt.Errorf("scheduling approval expiry: %w", err)
			}
		} else if r, err = s.finish(ctx, tx, r, next, reason); err != nil {
			return err
		}
		out = r
		return s.systemEvent(ctx, tx, r, "run.policy_evaluated", map[string]any{
			"attempt_id": a.ID, "policy_check_id": check.ID, "policy_outcome": outcome,
			"composition_digest": hex.EncodeToString(check.CompositionDigest), "status": string(r.Status),
		})
	})
	return out, err
}

// checkPredecessor refuses a plan whose state moved since it was read. A
// state finalized from here on discards the run once it waits
// (StateFinalized); one finalized since the runner's last look would not,
// so the plan is checked against the state under the finalization's own
// lock, taken after the run's as no finalization waits for a planning run.
func (s *Service) checkPredecessor(ctx context.Context, tx *sqlx.Tx, r Run, predecessor *string) error {
	if err := state.LockVersions(ctx, tx, r.WorkspaceID); err != nil {
		return err
	}
	current, err := s.currentStateID(ctx, tx, r)
	if err != nil {
		return err
	}
	if !sameStateID(current, predecessor) {
		return ErrStateMoved
	}
	return nil
}

// ApplyOutcome is what the runner observed of an apply.
type ApplyOutcome struct {
	ExitCode int
	// Interruption is why the runner stopped the apply (InterruptCanceled,
	// InterruptTimedOut, InterruptShutdown); empty when tofu exited by
	// itself.
	Interruption string
	// Emergency is a state the CLI could not publish (errored.tfstate).
	Emergency *Artifact
	Timings   Timings
}

// CommitApply records an apply's end. Success needs a zero exit and a
// verified state version published by this run; anything uncertain goes to
// recovery, never to a retried apply. An interrupted apply (canceled,
// timed out, stopped with its worker) always goes to recovery, with what
// it left: the state it published and the emergency state it could not.
func (s *Service) CommitApply(ctx context.Context, attemptID string, o ApplyOutcome) (Run, error) {
	var out Run
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		r, a, err := s.runningAttempt(ctx, tx, attemptID)
		if err != nil {
			return err
		}
		if o.Emergency != nil {
			if err := insertArtifact(ctx, tx, *o.Emergency); err != nil {
				return err
			}
		}
		published, err := publishedBy(ctx, tx, r)
		if err != nil {
			return err
		}
		// An empty plan's apply publishes no state: it succeeded when the
		// state is still the one the plan was made against.
		unchanged := false
		if emptyApply(r) {
			current, err := s.currentStateID(ctx, tx, r)
			if err != nil {
				return err
			}
			unchanged = sameStateID(current, r.PredecessorStateVersionID)
		}
		interruption := o.Interruption
		if r.CancelRequested() {
			// Whatever ended tofu (the interrupt, its revoked run token),
			// the apply ended because the run was canceled.
			interruption = InterruptCanceled
		}
		classification, attemptStatus := "succeeded", AttemptSucceeded
		switch {
		case interruption != "":
			classification, attemptStatus = interruption, AttemptFailed
			if interruption == InterruptCanceled {
				attemptStatus = AttemptCanceled
			}
			r.StateVersionID = published
			r = s.toRecovery(r, PhaseInterrupted, "apply_"+interruption)
		case o.ExitCode == 0 && published != nil:
			r.ApplyStatus, r.StateVersionID = PhaseFinished, published
			if r, err = s.finish(ctx, tx, r, StatusApplied, ""); err != nil {
				return err
			}
		case o.ExitCode == 0 && unchanged:
			// An empty plan applied (allow-empty-apply) changes nothing.
			classification = "succeeded_without_state_change"
			r.ApplyStatus = PhaseFinished
			if r, err = s.finish(ctx, tx, r, StatusApplied, ""); err != nil {
				return err
			}
		case o.ExitCode == 0:
			classification, attemptStatus = "state_unverified", AttemptFailed
			r = s.toRecovery(r, PhaseErrored, "state_publication_unverified")
		case published != nil || o.Emergency != nil:
			classification, attemptStatus = "partial_apply", AttemptFailed
			r.StateVersionID = published
			r = s.toRecovery(r, PhaseErrored, "apply_failed_with_partial_state")
		default:
			classification, attemptStatus = "apply_failed", AttemptFailed
			r.ApplyStatus = PhaseErrored
			if r, err = s.finish(ctx, tx, r, StatusErrored, "apply_failed"); err != nil {
				return err
			}
		}
		if r.Status == StatusRecoveryRequired {
			if err := s.save(ctx, tx, r); err != nil {
				return err
			}
		}
		if err := s.endAttempt(ctx, tx, &a, attemptStatus, classification, o.ExitCode, o.Timings); err != nil {
			return err
		}
		out = r
		ev := map[string]any{"attempt_id": a.ID, "exit_code": o.ExitCode, "classification": classification, "status": string(r.Status)}
		if o.Emergency != nil {
			ev["emergency_state_sha256"] = hex.EncodeToString(o.Emergency.SHA256)
		}
		return s.systemEvent(ctx, tx, r, "run.apply_finished", ev)
	})
	return out, err
}

// emptyApply reports whether the run applies a plan without changes.
func emptyApply(r Run) bool { return r.HasChanges != nil && !*r.HasChanges }

func (s *Service) toRecovery(r Run, applyStatus, reason string) Run {
	r.ApplyStatus = applyStatus
	r.TerminalReason = &reason
	return s.transition(r, StatusRecoveryRequired)
}

// publishedBy returns the current finalized state version if this run's
// CLI published it.
func publishedBy(ctx context.Context, q sqlx.QueryerContext, r Run) (*string, error) {
	var svID *string
	err := sqlx.GetContext(ctx, q, &svID, `SELECT (SELECT id FROM state_versions WHERE workspace_id = $1 AND status = 'finalized'
		AND created_by_kind = 'run' AND created_by_id = $2
		AND number = (SELECT max(number) FROM state_versions WHERE workspace_id = $1 AND status = 'finalized'))`,
		r.WorkspaceID, r.ID)
	if err != nil {
		return nil, fmt.Errorf("verifying state publication: %w", err)
	}
	return svID, nil
}

// FailAttempt records a phase that ended without a result. A plan stopped
// by its worker's shutdown is retried (a plan changes nothing), within
// PlanMaxAttempts, and so is the run's first plan that failed on a lost
// connection; any other failed plan ends the run as errored. A failed
// apply's outcome is uncertain, so its run goes to recovery. A canceled
// attempt is recorded as such whatever the sandbox saw.
func (s *Service) FailAttempt(ctx context.Context, attemptID, classification string, exitCode int, timings Timings) (Run, error) {
	return s.failAttempt(ctx, attemptID, classification, exitCode, timings, nil)
}

// FailUnstartedAttempt records a phase that ended before any tofu command
// started, for example on a worker that cannot isolate sandboxes. Nothing
// ran, so nothing changed: an apply ends errored like a plan instead of
// going to recovery. profile, when set, is the sandbox the attempt got or
// was refused (isolation "unavailable").
func (s *Service) FailUnstartedAttempt(ctx context.Context, attemptID, classification string, profile *SandboxProfile, timings Timings) (Run, error) {
	return s.failAttempt(ctx, attemptID, classification, -1, timings, &unstarted{profile: profile})
}

// unstarted marks a failure before user code ran.
type unstarted struct{ profile *SandboxProfile }

func (s *Service) failAttempt(ctx context.Context, attemptID, classification string, exitCode int, timings Timings, before *unstarted) (Run, error) {
	var out Run
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		r, a, err := lockAttempt(ctx, tx, attemptID)
		if err != nil {
			return err
		}
		if a.Status != AttemptRunning {
			out = r
			return nil
		}
		if r.CancelRequested() {
			// Whatever the sandbox saw (a killed process, a revoked run
			// token), the attempt ended because the run was canceled.
			classification = InterruptCanceled
		}
		status := AttemptFailed
		if classification == InterruptCanceled {
			status = AttemptCanceled
		}
		if err := s.endAttempt(ctx, tx, &a, status, classification, exitCode, timings); err != nil {
			return err
		}
		if before != nil && before.profile != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE run_attempts SET sandbox_profile = $2 WHERE id = $1`, a.ID, *before.profile); err != nil {
				return fmt.Errorf("recording sandbox profile: %w", err)
			}
		}
		retry := classification == InterruptShutdown
		if a.Phase == PhasePlan && classification == FailureConnectionLost {
			// What a failed command said is partly the configuration's
			// own words, which could imitate a lost connection on every
			// attempt: a run gets one retry for it.
			lostBefore, err := connectionLostBefore(ctx, tx, r.ID, a.ID)
			if err != nil {
				return err
			}
			retry = !lostBefore
		}
		switch {
		case r.Status.Terminal() || r.Status == StatusRecoveryRequired:
		case a.Phase == PhasePlan && retry:
			if r, err = s.retryPlan(ctx, tx, r, a); err != nil {
				return err
			}
		case a.Phase == PhasePlan:
			r = planFailed(r)
			if r, err = s.finish(ctx, tx, r, StatusErrored, classification); err != nil {
				return err
			}
		case before != nil && status == AttemptCanceled:
			// Canceled before tofu started: the run ends canceled, as a
			// cancel before the apply's start does.
			r.ApplyStatus = PhaseCanceled
			if r, err = s.finish(ctx, tx, r, StatusCanceled, "canceled"); err != nil {
				return err
			}
		case before != nil:
			// Nothing ran, so nothing changed: the apply ends errored.
			r.ApplyStatus = PhaseErrored
			if r, err = s.finish(ctx, tx, r, StatusErrored, classification); err != nil {
				return err
			}
		case Interruption(classification):
			r = s.toRecovery(r, PhaseInterrupted, "apply_"+classification)
			if err := s.save(ctx, tx, r); err != nil {
				return err
			}
		default:
			r = s.toRecovery(r, PhaseErrored, classification)
			if err := s.save(ctx, tx, r); err != nil {
				return err
			}
		}
		out = r
		return s.systemEvent(ctx, tx, r, "run.attempt_failed", map[string]any{
			"attempt_id": a.ID, "phase": a.Phase, "classification": classification, "status": string(r.Status),
			"user_code_started": before == nil,
		})
	})
	return out, err
}

// retryPlan queues the next attempt of a plan whose worker died or stopped
// under it, unless the plan already had PlanMaxAttempts: a plan that keeps
// taking its worker down must not loop forever, so the run then errors.
func (s *Service) retryPlan(ctx context.Context, tx *sqlx.Tx, r Run, a Attempt) (Run, error) {
	if a.Number >= s.opts.PlanMaxAttempts {
		return s.finish(ctx, tx, planFailed(r), StatusErrored, "plan_attempts_exhausted")
	}
	r.PlanStatus = PhasePending
	return s.queuePlan(ctx, tx, r, a.Number+1)
}

// planFailed marks the plan phase of a failed plan attempt errored, unless
// its plan committed and its policy stage failed after: the plan stays
// finished, and the policy check it reserved reports that the evaluation
// did not complete.
func planFailed(r Run) Run {
	if r.PlanStatus != PhaseFinished {
		r.PlanStatus = PhaseErrored
	}
	return r
}

// lockAttempt locks an attempt's run, then the attempt itself. Every
// transaction that touches both takes them in this order (as Cancel does,
// locking the run before its attempts), so none can deadlock another.
func lockAttempt(ctx context.Context, tx *sqlx.Tx, attemptID string) (Run, Attempt, error) {
	r, err := runOfAttemptForUpdate(ctx, tx, attemptID)
	if err != nil {
		return Run{}, Attempt{}, err
	}
	a, err := attemptByID(ctx, tx, attemptID, true)
	if err == nil && (a.RunID != r.ID || a.OrganizationID != r.OrganizationID) {
		err = fmt.Errorf("attempt %s is not of run %s", a.ID, r.ID)
	}
	return r, a, err
}

// runningAttempt locks the run and the attempt and checks the fence.
func (s *Service) runningAttempt(ctx context.Context, tx *sqlx.Tx, attemptID string) (Run, Attempt, error) {
	r, a, err := lockAttempt(ctx, tx, attemptID)
	if err != nil {
		return Run{}, Attempt{}, err
	}
	want := StatusPlanning
	if a.Phase == PhaseApply {
		want = StatusApplying
	}
	if a.Status != AttemptRunning || r.Status != want {
		return Run{}, Attempt{}, ErrAttemptNotCurrent
	}
	return r, a, nil
}

// endAttempt closes an attempt and releases its capacity lease with it.
func (s *Service) endAttempt(ctx context.Context, tx *sqlx.Tx, a *Attempt, status, classification string, exitCode int, timings Timings) error {
	now := s.stamp()
	a.Status, a.FinishedAt, a.TerminalClassification, a.ExitCode = status, &now, &classification, &exitCode
	if timings != nil {
		a.Timings = timings
	}
	if err := saveAttempt(ctx, tx, *a); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE run_tokens SET revoked_at = now() WHERE attempt_id = $1 AND revoked_at IS NULL`, a.ID); err != nil {
		return fmt.Errorf("revoking attempt tokens: %w", err)
	}
	return releaseLease(ctx, tx, a.ID)
}

// ReapLostAttempts handles attempts whose worker stopped heartbeating: the
// lease is released; a lost plan is retried as a new attempt (a plan
// changes nothing) within PlanMaxAttempts; a lost apply's outcome is
// unknown, so its run goes to recovery and the apply is never retried.
func (s *Service) ReapLostAttempts(ctx context.Context, timeout time.Duration) (int, error) {
	var ids []string
	if err := s.db.SelectContext(ctx, &ids, `SELECT id FROM run_attempts WHERE status = 'running'
		AND heartbeat_at < now() - make_interval(secs => $1) ORDER BY heartbeat_at LIMIT 100`, timeout.Seconds()); err != nil {
		return 0, fmt.Errorf("finding lost attempts: %w", err)
	}
	reaped := 0
	for _, attemptID := range ids {
		err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
			r, a, err := lockAttempt(ctx, tx, attemptID)
			if err != nil {
				return err
			}
			// Recheck under the lock, on the database clock: a heartbeat may
			// have landed since the scan.
			var lost bool
			if err := tx.GetContext(ctx, &lost, `SELECT status = 'running' AND heartbeat_at < now() - make_interval(secs => $2)
				FROM run_attempts WHERE id = $1`, attemptID, timeout.Seconds()); err != nil || !lost {
				return err
			}
			if err := s.endAttempt(ctx, tx, &a, AttemptLost, "worker_lost", -1, nil); err != nil {
				return err
			}
			switch {
			case a.Phase == PhasePlan && r.Status == StatusPlanning:
				if r, err = s.retryPlan(ctx, tx, r, a); err != nil {
					return err
				}
			case a.Phase == PhaseApply && r.Status == StatusApplying:
				r.ApplyStatus = PhaseInterrupted
				r = s.toRecovery(r, PhaseInterrupted, "worker_lost")
				if err := s.save(ctx, tx, r); err != nil {
					return err
				}
			}
			reaped++
			return s.systemEvent(ctx, tx, r, "run.attempt_lost", map[string]any{"attempt_id": a.ID, "phase": a.Phase, "status": string(r.Status)})
		})
		if err != nil {
			return reaped, err
		}
	}
	redelivered, err := s.redeliverStrandedPhases(ctx, timeout)
	return reaped + redelivered, err
}

// redeliverStrandedPhases queues a fresh job for each queued attempt whose
// job a worker took but never started, for longer than timeout: the worker
// died between River's fetch and the attempt's start, and River would give
// the job back only after its own rescue delay (an hour). The start is
// fenced on the attempt still being queued, so if the first worker was only
// slow, exactly one of the two jobs starts the attempt.
func (s *Service) redeliverStrandedPhases(ctx context.Context, timeout time.Duration) (int, error) {
	var stranded []struct {
		ID    string `db:"id"`
		RunID string `db:"run_id"`
		Phase string `db:"phase"`
	}
	if err := s.db.SelectContext(ctx, &stranded, `SELECT a.id, a.run_id, a.phase FROM run_attempts a
		WHERE a.status = 'queued'
		AND EXISTS (SELECT 1 FROM river_job j WHERE j.kind = 'run_phase' AND j.args->>'attempt_id' = a.id
			AND j.state = 'running' AND j.attempted_at < now() - make_interval(secs => $1))
		AND NOT EXISTS (SELECT 1 FROM river_job j WHERE j.kind = 'run_phase' AND j.args->>'attempt_id' = a.id
			AND (j.state IN ('available', 'scheduled', 'retryable', 'pending')
				OR (j.state = 'running' AND j.attempted_at >= now() - make_interval(secs => $1))))
		ORDER BY a.queued_at LIMIT 100`, timeout.Seconds()); err != nil {
		return 0, fmt.Errorf("finding stranded phase jobs: %w", err)
	}
	n := 0
	for _, a := range stranded {
		err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
			r, att, err := lockAttempt(ctx, tx, a.ID)
			if err != nil || att.Status != AttemptQueued {
				return err
			}
			opts := &river.InsertOpts{Queue: s.launch.Queue(ctx, tx, launch.WorkflowRun)}
			if _, err := s.jobs.InsertTx(ctx, tx.Tx, PhaseArgs{RunID: a.RunID, AttemptID: a.ID, Phase: a.Phase}, opts); err != nil {
				return fmt.Errorf("redelivering %s job: %w", a.Phase, err)
			}
			n++
			return s.systemEvent(ctx, tx, r, "run.attempt_redelivered", map[string]any{"attempt_id": a.ID, "phase": a.Phase})
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (s *Service) systemEvent(ctx context.Context, tx *sqlx.Tx, r Run, action string, evidence map[string]any) error {
	_, err := audit.Append(ctx, tx, audit.Entry{OrganizationID: r.OrganizationID, Action: action,
		Actor: audit.Actor{Type: audit.ActorSystem, ID: "runner"}, TargetType: "run", TargetID: r.ID, Evidence: evidence})
	return err
}

// CurrentStateVersionID is the workspace's current finalized state
// version, or nil before the first.
func (s *Service) CurrentStateVersionID(ctx context.Context, r Run) (*string, error) {
	return s.currentStateID(ctx, s.db, r)
}

// OpenPlanFile returns the saved plan an apply executes.
func (s *Service) OpenPlanFile(ctx context.Context, r Run) (io.ReadCloser, error) {
	return s.openArtifact(ctx, r, ArtifactPlanFile)
}

// OrganizationSlug names the run's organization as the remote backend does.
func (s *Service) OrganizationSlug(ctx context.Context, organizationID string) (string, error) {
	var slug string
	if err := s.db.GetContext(ctx, &slug, `SELECT slug FROM organizations WHERE id = $1`, organizationID); err != nil {
		return "", fmt.Errorf("reading organization slug: %w", err)
	}
	return slug, nil
}
