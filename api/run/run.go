package run

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"github.com/cairnhq/cairn/api/access"
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
)

var terminalStatuses = []Status{
	StatusApplied, StatusPlannedAndFinished, StatusErrored, StatusRejected, StatusCanceled,
	StatusExpired, StatusRecovered, StatusCredentialsRequired,
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

// Decision actions.
const (
	DecisionApproved = "approved"
	DecisionRejected = "rejected"
	DecisionCanceled = "canceled"
)

// Policy outcomes.
const (
	PolicyPass  = "pass"
	PolicyError = "error"
)

// Actions a caller may take on a run.
const (
	ActionApprove = "approve"
	ActionReject  = "reject"
	ActionCancel  = "cancel"
	ActionRecover = "recover"
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
	InputSnapshot             json.RawMessage `db:"input_snapshot"`
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
	ApprovalDeadline          *time.Time      `db:"approval_deadline"`
	DecisionAction            *string         `db:"decision_action"`
	DecisionActorKind         *string         `db:"decision_actor_kind"`
	DecisionActorID           *string         `db:"decision_actor_id"`
	DecidedAt                 *time.Time      `db:"decided_at"`
	TerminalReason            *string         `db:"terminal_reason"`
	StateVersionID            *string         `db:"state_version_id"`
	StatusTimestamps          Timestamps      `db:"status_timestamps"`
	CreatedAt                 time.Time       `db:"created_at"`
	UpdatedAt                 time.Time       `db:"updated_at"`
}

// Speculative reports whether the run can never write state.
func (r Run) Speculative() bool { return r.Kind == KindSpeculative }

// Attempt is one execution of a phase in one sandbox.
type Attempt struct {
	ID                     string     `db:"id"`
	OrganizationID         string     `db:"organization_id"`
	RunID                  string     `db:"run_id"`
	Phase                  string     `db:"phase"`
	Number                 int        `db:"attempt"`
	Status                 string     `db:"status"`
	Region                 string     `db:"region"`
	SandboxDriver          *string    `db:"sandbox_driver"`
	SandboxID              *string    `db:"sandbox_id"`
	SandboxName            *string    `db:"sandbox_name"`
	WorkerID               *string    `db:"worker_id"`
	ExitCode               *int       `db:"exit_code"`
	TerminalClassification *string    `db:"terminal_classification"`
	Timings                Timings    `db:"timings"`
	QueuedAt               time.Time  `db:"queued_at"`
	StartedAt              *time.Time `db:"started_at"`
	HeartbeatAt            *time.Time `db:"heartbeat_at"`
	FinishedAt             *time.Time `db:"finished_at"`
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

// AfterPolicy is where a run goes once its plan is committed and its
// policy stage has an outcome. An outcome other than pass blocks apply.
func AfterPolicy(kind Kind, hasChanges bool, outcome string) (Status, string) {
	if outcome != PolicyPass {
		return StatusErrored, "policy_blocked"
	}
	switch {
	case kind != KindPlanAndApply:
		return StatusPlannedAndFinished, ""
	case !hasChanges:
		return StatusPlannedAndFinished, "no_changes"
	default:
		return StatusAwaitingApproval, ""
	}
}

// AvailableActions lists what the principal may do to the run now. A closed
// policy gate may offer rejection but never approval.
func AvailableActions(r Run, p access.Principal) []string {
	actions := []string{}
	if r.Status == StatusAwaitingApproval && p.Permissions.Has(access.PermRunApprove) {
		if r.PolicyOutcome != nil && *r.PolicyOutcome == PolicyPass {
			actions = append(actions, ActionApprove)
		}
		actions = append(actions, ActionReject)
	}
	if Cancelable(r.Status) && p.Permissions.Has(access.PermRunCancel) {
		actions = append(actions, ActionCancel)
	}
	if r.Status == StatusRecoveryRequired && p.Permissions.Has(access.PermRunRecover) && p.Permissions.Has(access.PermStateRecover) {
		actions = append(actions, ActionRecover)
	}
	return actions
}

// Cancelable reports whether cancel applies: every non-terminal status
// except an unresolved recovery, which only recovery may end.
func Cancelable(s Status) bool { return !s.Terminal() && s != StatusRecoveryRequired }

// Digest is SHA-256 over b.
func Digest(b []byte) []byte {
	sum := sha256.Sum256(b)
	return sum[:]
}
