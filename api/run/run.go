package run

import (
	"crypto/sha256"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/policy"
)

// Kind is what a run is allowed to do.
type Kind string

const (
	// KindPlanAndApply plans, checks policy, waits for approval and applies.
	KindPlanAndApply Kind = "plan_and_apply"
	// KindPlanOnly plans and checks policy, then succeeds.
	KindPlanOnly Kind = "plan_only"
	// KindSpeculative plans and checks policy for review (a CLI `tofu plan`
	// or a pull request); it never writes state and never applies.
	KindSpeculative Kind = "speculative"
)

// Kinds lists the run kinds.
var Kinds = []Kind{KindPlanAndApply, KindPlanOnly, KindSpeculative}

// Status is where a run is in its lifecycle.
type Status string

const (
	StatusPending          Status = "pending"
	StatusPlanQueued       Status = "plan_queued"
	StatusPlanning         Status = "planning"
	StatusAwaitingApproval Status = "awaiting_approval"
	// StatusPolicyOverride waits for every soft policy failure to be
	// overridden (or for a rejection) before approval is possible.
	StatusPolicyOverride   Status = "policy_override"
	StatusApplyQueued      Status = "apply_queued"
	StatusApplying         Status = "applying"
	StatusRecoveryRequired Status = "recovery_required"
	// Terminal statuses.
	StatusApplied             Status = "applied"
	StatusPlannedAndFinished  Status = "planned_and_finished"
	StatusErrored             Status = "errored"
	StatusRejected            Status = "rejected"
	StatusCanceled            Status = "canceled"
	StatusExpired             Status = "expired"
	StatusRecovered           Status = "recovered"
	StatusCredentialsRequired Status = "plan_credentials_required"
	// StatusPolicySoftFailed ends a run that can never apply (plan-only,
	// speculative or without changes) whose policy stage soft-failed.
	StatusPolicySoftFailed Status = "policy_soft_failed"
)

var terminalStatuses = []Status{
	StatusApplied, StatusPlannedAndFinished, StatusErrored, StatusRejected, StatusCanceled,
	StatusExpired, StatusRecovered, StatusCredentialsRequired, StatusPolicySoftFailed,
}

// Terminal reports whether a run in status s will never change again.
func (s Status) Terminal() bool { return slices.Contains(terminalStatuses, s) }

// Phase statuses (SPEC §2): clients reject any other value.
const (
	PhasePending     = "pending"
	PhaseRunning     = "running"
	PhaseFinished    = "finished"
	PhaseErrored     = "errored"
	PhaseCanceled    = "canceled"
	PhaseInterrupted = "interrupted" // apply only
)

// Phases of a run that execute in a sandbox.
const (
	PhasePlan  = "plan"
	PhaseApply = "apply"
)

// Why a runner stopped an attempt's command before it ended by itself.
// Each is the attempt's terminal classification; an interrupted apply's run
// goes to recovery with the reason "apply_" + it.
const (
	InterruptCanceled = "canceled"
	InterruptTimedOut = "timed_out"
	InterruptShutdown = "worker_shutdown"
)

// FailureConnectionLost classifies an attempt whose command failed
// because a connection it held was cut off mid-exchange (a replica of the
// API dying under a request is the common case). A run's first plan so
// failed is retried like one whose worker stopped: it changed nothing.
const FailureConnectionLost = "connection_lost"

// Interruption reports whether classification names an interruption.
func Interruption(classification string) bool {
	switch classification {
	case InterruptCanceled, InterruptTimedOut, InterruptShutdown:
		return true
	}
	return false
}

// Decision actions.
const (
	DecisionApproved = "approved"
	DecisionRejected = "rejected"
	DecisionCanceled = "canceled"
)

// Policy outcomes (see package policy for their composition).
const (
	PolicyPass           = policy.OutcomePass
	PolicyAdvisoryFailed = policy.OutcomeAdvisoryFailed
	PolicySoftFailed     = policy.OutcomeSoftFailed
	PolicyHardFailed     = policy.OutcomeHardFailed
	PolicyError          = policy.OutcomeError
)

// Actions a caller may take on a run.
const (
	ActionApprove = "approve"
	ActionReject  = "reject"
	ActionCancel  = "cancel"
	ActionRecover = "recover"
	// ActionOverridePolicy waives the run's current soft policy failures.
	ActionOverridePolicy = "override_policy"
	// ActionForceExecute starts a pending run at once, discarding every
	// run ahead of it in its workspace's queue (HCP Terraform's "Run this
	// plan now").
	ActionForceExecute = "force_execute"
	// ActionRelease starts an agent's run again as a person's, with the
	// workspace's state, sensitive variables and credentials ("Run with
	// credentials").
	ActionRelease = "release"
)

// Run is one managed run with everything it pinned at creation.
type Run struct {
	ID                        string          `db:"id"`
	OrganizationID            string          `db:"organization_id"`
	ProjectID                 string          `db:"project_id"`
	WorkspaceID               string          `db:"workspace_id"`
	Kind                      Kind            `db:"kind"`
	Status                    Status          `db:"status"`
	Message                   string          `db:"message"`
	Source                    string          `db:"source"`
	AutoApply                 bool            `db:"auto_apply"`
	IsDestroy                 bool            `db:"is_destroy"`
	ConfigurationVersionID    string          `db:"configuration_version_id"`
	ConfigurationDigest       []byte          `db:"configuration_digest"`
	DependencyLockDigest      []byte          `db:"dependency_lock_digest"`
	InputSnapshot             json.RawMessage `db:"input_snapshot"` // read back without its variables (runColumns)
	InputSnapshotDigest       []byte          `db:"input_snapshot_digest"`
	SettingsVersion           int             `db:"settings_version"`
	ToolVersion               string          `db:"tool_version"`
	Region                    string          `db:"region"`
	Platform                  string          `db:"platform"`
	RunnerRelease             string          `db:"runner_release"`
	CreatedByKind             string          `db:"created_by_kind"`
	CreatedByID               string          `db:"created_by_id"`
	PlanStatus                string          `db:"plan_status"`
	ApplyStatus               string          `db:"apply_status"`
	HasChanges                *bool           `db:"has_changes"`
	ResourceAdditions         *int            `db:"resource_additions"`
	ResourceChanges           *int            `db:"resource_changes"`
	ResourceDestructions      *int            `db:"resource_destructions"`
	PlanDigest                []byte          `db:"plan_digest"`
	PredecessorStateVersionID *string         `db:"predecessor_state_version_id"`
	PolicyOutcome             *string         `db:"policy_outcome"`
	PolicyResultDigest        []byte          `db:"policy_result_digest"`
	// PolicyGateUntil is until when the policy gate is open: far future for
	// an outcome that needs no override, the first needed override's expiry
	// for an overridden soft failure, nil while closed.
	PolicyGateUntil *time.Time `db:"policy_gate_until"`
	// PolicySnapshotError records an effective attachment list that could
	// not be snapshotted; the policy stage then ends in error.
	PolicySnapshotError *string `db:"policy_snapshot_error"`
	// CredentialSnapshotError records why the run's credentials could
	// not be snapshotted; its plan then ends plan_credentials_required.
	CredentialSnapshotError *string    `db:"credential_snapshot_error"`
	ApprovalDeadline        *time.Time `db:"approval_deadline"`
	DecisionAction          *string    `db:"decision_action"`
	DecisionActorKind       *string    `db:"decision_actor_kind"`
	DecisionActorID         *string    `db:"decision_actor_id"`
	DecidedAt               *time.Time `db:"decided_at"`
	// DecisionReason is the reason given with a discard, if any.
	DecisionReason   *string    `db:"decision_reason"`
	TerminalReason   *string    `db:"terminal_reason"`
	StateVersionID   *string    `db:"state_version_id"`
	StatusTimestamps Timestamps `db:"status_timestamps"`
	// LogTruncated is set once output was dropped at a log cap.
	LogTruncated bool      `db:"log_truncated"`
	CreatedAt    time.Time `db:"created_at"`
	UpdatedAt    time.Time `db:"updated_at"`

	// ApprovedBinding is the review an approval named; starting the apply
	// checks the run still has exactly that review.
	ApprovedBinding *Binding `db:"approved_binding"`
	// ForceCanceledAt is when a force-cancel was requested: the attempt's
	// sandbox is killed without the interrupt grace.
	ForceCanceledAt *time.Time `db:"force_canceled_at"`

	// Initiator is where the run came from (see InitiatorOf); a released
	// run keeps its agent's.
	Initiator string `db:"initiator"`
	// UntrustedReason is set for a run whose configuration no trusted
	// person has looked at (UntrustedAgent, UntrustedFork): it plans
	// without the workspace's state, sensitive variables, credential
	// profiles and a run token, and never applies.
	UntrustedReason *string `db:"untrusted_reason"`
	// ReleasedRunID is the run a person started from this agent's run
	// with its credentials ("Run with credentials"), with who and when.
	ReleasedRunID  *string    `db:"released_run_id"`
	ReleasedByKind *string    `db:"released_by_kind"`
	ReleasedByID   *string    `db:"released_by_id"`
	ReleasedAt     *time.Time `db:"released_at"`
	// ReleasedFromRunID is the agent's run this run was released from.
	ReleasedFromRunID *string `db:"released_from_run_id"`
	// TriggeredByRunID is the applied run of another workspace whose run
	// trigger created this run.
	TriggeredByRunID *string `db:"triggered_by_run_id"`

	// RunOptions are what the run was created with besides its kind.
	RunOptions
}

// Speculative reports whether the run can never write state.
func (r Run) Speculative() bool { return r.Kind == KindSpeculative }

// Initiators: who started a run, as workload-identity tokens name it in
// their run_initiator claim.
const (
	InitiatorUser           = "user"
	InitiatorAgent          = "agent"
	InitiatorServiceAccount = "service_account"
	InitiatorCodeHost       = "code_host"
	InitiatorOperator       = "operator"
	InitiatorTrigger        = "trigger"
)

// InitiatorOf is the initiator of a run p creates: an agent acting for a
// person is the agent, not the person.
func InitiatorOf(p access.Principal) string {
	switch {
	case p.IsAgent():
		return InitiatorAgent
	case p.Kind == access.KindServiceAccount:
		return InitiatorServiceAccount
	case p.Kind == access.KindCodeHost:
		return InitiatorCodeHost
	case p.Kind == access.KindOperator:
		return InitiatorOperator
	case p.Kind == access.KindRunTrigger:
		return InitiatorTrigger
	}
	return InitiatorUser
}

// Why a run's configuration is untrusted: nobody trusted has looked at it.
const (
	// UntrustedAgent: an agent wrote or chose the configuration. A person
	// may release the run to run it with the workspace's inputs.
	UntrustedAgent = "agent"
	// UntrustedFork: a pull request from a fork, whose author need not be
	// anyone the organization knows. It is never given anything secret.
	UntrustedFork = "fork_pull_request"
)

// Withheld names what an untrusted run's plan does not get.
var Withheld = []string{"state", "sensitive_variables", "credential_profiles", "run_token"}

// Untrusted reports whether the run plans without anything secret.
func (r Run) Untrusted() bool { return r.UntrustedReason != nil }

// Releasable reports whether a person may still start this run again with
// its workspace's inputs: an agent's run not released before.
func (r Run) Releasable() bool {
	return r.UntrustedReason != nil && *r.UntrustedReason == UntrustedAgent && r.ReleasedRunID == nil
}

// untrustedReason decides whether a new run is untrusted: an agent's, any
// run of a configuration an agent uploaded (whoever starts it: a person's
// run of the workspace's current configuration runs the agent's code), and
// a fork's pull request's. A released run is a person's decision to trust
// its configuration.
func untrustedReason(p access.Principal, in CreateInput, cv ConfigurationVersion) *string {
	var reason string
	switch {
	case in.ReleasedFrom != nil:
		return nil
	case p.IsAgent() || cv.CreatedByAgent != nil:
		reason = UntrustedAgent
	case in.CodeHost != nil && in.CodeHost.Fork:
		reason = UntrustedFork
	default:
		return nil
	}
	return &reason
}

// ForceCancelCoolOff is how long after a cancel request a force-cancel
// becomes available: a cancel first gives tofu its interrupt and the time
// to stop and save what it did.
const ForceCancelCoolOff = 10 * time.Second

// ForceCancelAvailableAt is when a force-cancel becomes available, or nil
// when no cancel was requested.
func (r Run) ForceCancelAvailableAt() *time.Time {
	if !r.CancelRequested() || r.DecidedAt == nil {
		return nil
	}
	at := r.DecidedAt.Add(ForceCancelCoolOff)
	return &at
}

// ForceCancelable reports whether a force-cancel may be requested at now:
// a cancel was requested at least ForceCancelCoolOff ago, the run has not
// ended (an applying run waits for its interrupted apply) and it was not
// force-canceled already.
func (r Run) ForceCancelable(now time.Time) bool {
	at := r.ForceCancelAvailableAt()
	return at != nil && !now.Before(*at) && !r.Status.Terminal() && r.ForceCanceledAt == nil
}

// CancelRequested reports whether the run was canceled. An applying run
// stays applying until its interrupted apply has recorded what it left.
func (r Run) CancelRequested() bool {
	return r.DecisionAction != nil && *r.DecisionAction == DecisionCanceled
}

// Attempt is one execution of a phase in one sandbox.
type Attempt struct {
	ID             string  `db:"id"`
	OrganizationID string  `db:"organization_id"`
	RunID          string  `db:"run_id"`
	Phase          string  `db:"phase"`
	Number         int     `db:"attempt"`
	Status         string  `db:"status"`
	Region         string  `db:"region"`
	SandboxDriver  *string `db:"sandbox_driver"`
	SandboxID      *string `db:"sandbox_id"`
	SandboxName    *string `db:"sandbox_name"`
	// SandboxProfile is what the sandbox applied, or nil before it was
	// created (or refused).
	SandboxProfile *SandboxProfile `db:"sandbox_profile"`
	// Worker is what the worker that ran the attempt recorded of itself,
	// or nil (an attempt that never started, or started before workers
	// recorded it).
	Worker                 *WorkerIdentity `db:"worker_identity"`
	WorkerID               *string         `db:"worker_id"`
	ExitCode               *int            `db:"exit_code"`
	TerminalClassification *string         `db:"terminal_classification"`
	Timings                Timings         `db:"timings"`
	QueuedAt               time.Time       `db:"queued_at"`
	StartedAt              *time.Time      `db:"started_at"`
	HeartbeatAt            *time.Time      `db:"heartbeat_at"`
	FinishedAt             *time.Time      `db:"finished_at"`
}

// Attempt statuses.
const (
	AttemptQueued    = "queued"
	AttemptRunning   = "running"
	AttemptSucceeded = "succeeded"
	AttemptFailed    = "failed"
	AttemptCanceled  = "canceled"
	AttemptLost      = "lost"
)

// Binding is the exact review a human approves or rejects: the plan, the
// policy result, the state the plan was made against and the dependency
// lock. A decision on anything else is stale.
type Binding struct {
	PlanDigest                string  `json:"plan_digest"`
	PolicyResultDigest        string  `json:"policy_result_digest"`
	PredecessorStateVersionID *string `json:"predecessor_state_version_id"`
	DependencyLockDigest      string  `json:"dependency_lock_digest"`
}

// Scan reads a jsonb column.
func (b *Binding) Scan(src any) error { return scanJSON(src, b) }

// Value writes a jsonb column.
func (b Binding) Value() (driver.Value, error) { return valueJSON(b) }

// BindingOf returns the review binding of a run's current plan.
func BindingOf(r Run) Binding {
	return Binding{
		PlanDigest:                hex.EncodeToString(r.PlanDigest),
		PolicyResultDigest:        hex.EncodeToString(r.PolicyResultDigest),
		PredecessorStateVersionID: r.PredecessorStateVersionID,
		DependencyLockDigest:      hex.EncodeToString(r.DependencyLockDigest),
	}
}

// Matches reports whether b names exactly the review of r.
func (b Binding) Matches(r Run) bool {
	want := BindingOf(r)
	samePredecessor := (b.PredecessorStateVersionID == nil) == (want.PredecessorStateVersionID == nil) &&
		(b.PredecessorStateVersionID == nil || *b.PredecessorStateVersionID == *want.PredecessorStateVersionID)
	return len(r.PlanDigest) > 0 && b.PlanDigest == want.PlanDigest && b.PolicyResultDigest == want.PolicyResultDigest &&
		b.DependencyLockDigest == want.DependencyLockDigest && samePredecessor
}

// PlanResult is what decides where a run goes after its plan.
type PlanResult struct {
	Kind       Kind
	HasChanges bool
	// AllowEmptyApply: a plan without changes still goes on to approval
	// and an apply, which updates outputs and state metadata.
	AllowEmptyApply bool
	// Untrusted: the plan was made without the workspace's state and
	// secrets, so it can never be applied.
	Untrusted bool
	// Outcome is the policy stage's outcome.
	Outcome string
}

// applyable reports whether the plan leaves something to apply: changes,
// or an empty plan its run asked to apply anyway.
func (p PlanResult) applyable() bool {
	return p.Kind == KindPlanAndApply && !p.Untrusted && (p.HasChanges || p.AllowEmptyApply)
}

// TerminalCredentialsWithheld ends an untrusted plan_and_apply run after
// its plan: made without the workspace's state and secrets, it can never be
// applied, and a person may release the run to plan and apply with them.
const TerminalCredentialsWithheld = "credentials_withheld"

// AfterPolicy is where a run goes once its plan is committed and its
// policy stage has an outcome (SPEC §3): errors and hard failures always
// block; a soft failure waits for overrides when there is something to
// apply and ends the run otherwise; pass and advisory findings continue.
// A plan_and_apply plan without changes ends the run, unless the run
// allows an empty apply (as HCP Terraform's allow-empty-apply does); an
// untrusted one ends it whatever it planned.
func AfterPolicy(p PlanResult) (Status, string) {
	switch p.Outcome {
	case PolicyPass, PolicyAdvisoryFailed:
	case PolicySoftFailed:
		if p.applyable() {
			return StatusPolicyOverride, ""
		}
		return StatusPolicySoftFailed, "policy_soft_failed"
	case PolicyHardFailed:
		return StatusErrored, "policy_hard_failed"
	default:
		return StatusErrored, "policy_error"
	}
	switch {
	case p.Kind != KindPlanAndApply:
		return StatusPlannedAndFinished, ""
	case p.Untrusted:
		return StatusPlannedAndFinished, TerminalCredentialsWithheld
	case !p.applyable():
		return StatusPlannedAndFinished, "no_changes"
	default:
		return StatusAwaitingApproval, ""
	}
}

// GateOpen reports whether the run's policy gate is open at now.
func (r Run) GateOpen(now time.Time) bool {
	return r.PolicyGateUntil != nil && now.Before(*r.PolicyGateUntil)
}

// PastApprovalDeadline reports whether the run's wait for a decision is
// over: from its deadline on it can only expire, whether or not its expiry
// job has run yet.
func (r Run) PastApprovalDeadline(now time.Time) bool {
	return r.ApprovalDeadline != nil && !now.Before(*r.ApprovalDeadline)
}

// Overridable reports whether overrides can still open the run's gate: a
// soft failure of a run that waits for a decision, with the gate closed.
func (r Run) Overridable(now time.Time) bool {
	waiting := r.Status == StatusPolicyOverride || r.Status == StatusAwaitingApproval
	return waiting && r.PolicyOutcome != nil && *r.PolicyOutcome == PolicySoftFailed && !r.GateOpen(now)
}

// AvailableActions lists what the principal may do to the run now; ahead
// is what stands ahead of a pending run in its workspace's queue (see
// Ahead), nil for any other run. A closed policy gate may offer rejection
// but never approval.
func AvailableActions(r Run, ahead []Run, p access.Principal, now time.Time) []string {
	actions := []string{}
	// What the principal may do in the run's workspace: its baseline and
	// its teams' grants there.
	has := p.PermissionsIn(r.WorkspaceID, r.ProjectID).Has
	waiting := r.Status == StatusAwaitingApproval || r.Status == StatusPolicyOverride
	// An agent may reject or cancel; approving, overriding and recovering
	// are a person's decisions.
	human := !p.IsAgent()
	if waiting && has(access.PermRunApprove) {
		if r.Status == StatusAwaitingApproval && r.GateOpen(now) && !r.PastApprovalDeadline(now) && human {
			actions = append(actions, ActionApprove)
		}
		actions = append(actions, ActionReject)
	}
	if r.Overridable(now) && has(access.PermPolicyOverrideSoft) && human {
		actions = append(actions, ActionOverridePolicy)
	}
	if Cancelable(r.Status) && !r.CancelRequested() && has(access.PermRunCancel) {
		actions = append(actions, ActionCancel)
	}
	if r.Status == StatusRecoveryRequired && has(access.PermRunRecover) && has(access.PermStateRecover) && human {
		actions = append(actions, ActionRecover)
	}
	if ForceExecutePermitted(p, r) && ForceExecutable(r, ahead) == nil {
		actions = append(actions, ActionForceExecute)
	}
	if r.Releasable() && ReleasePermitted(p, r) {
		actions = append(actions, ActionRelease)
	}
	return actions
}

// ReleasePermitted reports whether p may release an agent's run r: a
// person signed in (never an agent or a token) who may create runs in its
// workspace.
func ReleasePermitted(p access.Principal, r Run) bool {
	return p.Kind == access.KindUser && !p.IsAgent() && p.PermissionsIn(r.WorkspaceID, r.ProjectID).Has(access.PermRunCreate)
}

// ForceExecutePermitted reports whether p may force-execute runs in r's
// workspace: it discards the runs ahead (what rejecting needs) and starts
// a plan (what creating a run needs).
func ForceExecutePermitted(p access.Principal, r Run) bool {
	perms := p.PermissionsIn(r.WorkspaceID, r.ProjectID)
	return perms.Has(access.PermRunApprove) && perms.Has(access.PermRunCreate)
}

// Ahead is what stands ahead of target in its workspace's queue, oldest
// first, out of unfinished (the workspace's unfinished non-speculative
// runs, oldest first): every other run created before it, and a run that
// holds the queue (is no longer pending) whenever it was created.
func Ahead(target Run, unfinished []Run) []Run {
	var ahead []Run
	for _, r := range unfinished {
		if r.ID == target.ID || r.Speculative() || r.Status.Terminal() || r.unappliedSavedPlan() {
			continue
		}
		earlier := r.CreatedAt.Before(target.CreatedAt) || (r.CreatedAt.Equal(target.CreatedAt) && r.ID < target.ID)
		if earlier || r.Status != StatusPending {
			ahead = append(ahead, r)
		}
	}
	return ahead
}

// unappliedSavedPlan reports whether r is a saved plan not yet applied:
// it holds neither the workspace queue nor the current-run place until its
// apply is approved (store.go's unappliedSavedPlan says the same in SQL).
func (r Run) unappliedSavedPlan() bool {
	switch r.Status {
	case StatusPending, StatusPlanQueued, StatusPlanning, StatusAwaitingApproval, StatusPolicyOverride:
		return r.SavePlan
	}
	return false
}

// queueDiscardable reports whether a run in status s may be discarded so
// a later one can start: it waits for a decision (approval or a policy
// override) or for its turn, and nothing of it runs. A queued, running or
// approved phase cannot be skipped.
func queueDiscardable(s Status) bool {
	return s == StatusPending || s == StatusAwaitingApproval || s == StatusPolicyOverride
}

// ForceExecutable decides whether target may start now by discarding
// ahead (Ahead's answer): nil, ErrActionNotAllowed when target is not a
// pending run waiting behind another (a speculative run never waits), or
// ErrQueueNotDiscardable when a run ahead is past discarding (planning,
// applying, approved or in recovery).
func ForceExecutable(target Run, ahead []Run) error {
	if target.Speculative() || target.Status != StatusPending {
		return ErrActionNotAllowed
	}
	held := false
	for _, r := range ahead {
		if !queueDiscardable(r.Status) {
			return ErrQueueNotDiscardable
		}
		held = held || r.Status != StatusPending
	}
	// Nothing holds the queue: the run is about to start on its own.
	if !held {
		return ErrActionNotAllowed
	}
	return nil
}

// Cancelable reports whether cancel applies: every non-terminal status
// except an unresolved recovery, which only recovery may end.
func Cancelable(s Status) bool { return !s.Terminal() && s != StatusRecoveryRequired }

// Digest is SHA-256 over b.
func Digest(b []byte) []byte {
	sum := sha256.Sum256(b)
	return sum[:]
}

// MaxReasonChars bounds the reason a person gives for a recovery, a
// discard or a restricted download, counted in characters after trimming.
const MaxReasonChars = 500

// ReasonOf trims a person's reason and checks it holds 1..MaxReasonChars
// characters of valid UTF-8.
func ReasonOf(raw string) (string, error) {
	reason := strings.TrimSpace(raw)
	if reason == "" || !utf8.ValidString(reason) || utf8.RuneCountInString(reason) > MaxReasonChars {
		return "", fmt.Errorf("%w: reason must be 1..%d characters", ErrInvalid, MaxReasonChars)
	}
	return reason, nil
}

// auditReasonBytes is what one audit evidence string holds.
const auditReasonBytes = 512

// withReason adds a reason to audit evidence: whole when it fits an
// evidence string, otherwise cut at a character boundary and marked, with
// the SHA-256 of the whole reason (kept on the record it explains) either
// way.
func withReason(evidence map[string]any, reason string) map[string]any {
	sum := sha256.Sum256([]byte(reason))
	evidence["reason_sha256"] = hex.EncodeToString(sum[:])
	if len(reason) <= auditReasonBytes {
		evidence["reason"] = reason
		return evidence
	}
	cut := auditReasonBytes
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	evidence["reason"], evidence["reason_truncated"] = reason[:cut], true
	return evidence
}
