package v1

import (
	"context"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/run"
)

// RunSummaryView is a run in a list.
type RunSummaryView struct {
	ID               string                  `json:"id" doc:"Run ID (run_…)."`
	Object           string                  `json:"object" enum:"run"`
	WorkspaceID      string                  `json:"workspace_id"`
	WorkspaceName    string                  `json:"workspace_name" doc:"The workspace's current name."`
	Kind             string                  `json:"kind" enum:"plan_and_apply,plan_only,speculative"`
	Status           string                  `json:"status"`
	Message          string                  `json:"message"`
	PlanStatus       string                  `json:"plan_status" enum:"pending,running,finished,errored,canceled"`
	ApplyStatus      string                  `json:"apply_status" enum:"pending,running,finished,errored,canceled,interrupted"`
	AvailableActions []string                `json:"available_actions"`
	CreatedAt        time.Time               `json:"created_at"`
	UpdatedAt        time.Time               `json:"updated_at"`
	StatusTimestamps map[string]string       `json:"status_timestamps" doc:"When each status was entered (RFC 3339)."`
	Source           string                  `json:"source" enum:"api,tfe,vcs" doc:"Where the run was created: the native API (or dashboard), the remote-backend CLI, or a code-host event."`
	CreatedBy        StateVersionCreatorView `json:"created_by"`
}

// runSummary renders r of the workspace named workspaceName; ahead is
// what stands ahead of it in its workspace's queue (Runs.QueuesAhead),
// which decides force_execute.
func runSummary(r run.Run, workspaceName string, ahead []run.Run, p access.Principal) RunSummaryView {
	ts := make(map[string]string, len(r.StatusTimestamps))
	for k, v := range r.StatusTimestamps {
		ts[k] = v.UTC().Format(time.RFC3339Nano)
	}
	return RunSummaryView{ID: r.ID, Object: "run", WorkspaceID: r.WorkspaceID, WorkspaceName: workspaceName, Kind: string(r.Kind), Status: string(r.Status),
		Message: r.Message, PlanStatus: r.PlanStatus, ApplyStatus: r.ApplyStatus, AvailableActions: run.AvailableActions(r, ahead, p, time.Now()),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, StatusTimestamps: ts,
		Source: r.Source, CreatedBy: StateVersionCreatorView{Kind: r.CreatedByKind, ID: r.CreatedByID}}
}

// PinnedView is what a run pinned at creation.
type PinnedView struct {
	ConfigurationVersionID string `json:"configuration_version_id"`
	ConfigurationDigest    string `json:"configuration_digest"`
	InputSnapshotDigest    string `json:"input_snapshot_digest"`
	DependencyLockDigest   string `json:"dependency_lock_digest"`
	SettingsVersion        int    `json:"settings_version"`
	ToolVersion            string `json:"tool_version"`
	Region                 string `json:"region" enum:"us,eu"`
	Platform               string `json:"platform"`
	RunnerRelease          string `json:"runner_release"`
}

// PlanPhaseView is the plan phase's recorded result.
type PlanPhaseView struct {
	Status                    string  `json:"status" enum:"pending,running,finished,errored,canceled"`
	HasChanges                *bool   `json:"has_changes"`
	ResourceAdditions         *int    `json:"resource_additions"`
	ResourceChanges           *int    `json:"resource_changes"`
	ResourceDestructions      *int    `json:"resource_destructions"`
	PlanDigest                *string `json:"plan_digest"`
	PredecessorStateVersionID *string `json:"predecessor_state_version_id"`
}

// PolicyStageView is the policy stage's outcome. Findings carry title,
// message and resource address only.
type PolicyStageView struct {
	Outcome      *string            `json:"outcome" enum:"pass,advisory_failed,soft_failed,hard_failed,error"`
	Status       string             `json:"status" enum:"pending,passed,soft_failed,hard_failed,errored,overridden"`
	ResultDigest *string            `json:"result_digest" doc:"Composition digest of the results; an approval names it."`
	Gate         PolicyGateView     `json:"gate"`
	Attachments  []PolicyResultView `json:"attachments" doc:"One evaluated result per snapshotted attachment, in order."`
	Findings     []FindingView      `json:"findings" doc:"Every result's findings, in attachment order."`
}

// OverridesView lists soft overrides, at most 256, with a truncation flag.
type OverridesView struct {
	Records   []PolicyOverrideView `json:"records"`
	Truncated bool                 `json:"truncated"`
}

// ApplyPhaseView is the apply phase's recorded result.
type ApplyPhaseView struct {
	Status               string  `json:"status" enum:"pending,running,finished,errored,canceled,interrupted"`
	StateVersionID       *string `json:"state_version_id" doc:"The state version the apply published, verified."`
	EmergencyStateDigest *string `json:"emergency_state_digest" doc:"SHA-256 of the state an interrupted or failed apply could not publish (errored.tfstate), kept sealed; a recovery that imports it names this digest. Null when none was left."`
}

// RecoveryView is what a recover request must name, shown while the run
// waits for recovery.
type RecoveryView struct {
	CurrentStateVersionID *string `json:"current_state_version_id" doc:"The workspace's current state version (null before the first)."`
	CurrentStateDigest    string  `json:"current_state_digest" doc:"SHA-256 of that state (empty when there is none)."`
	EmergencyStateDigest  *string `json:"emergency_state_digest" doc:"SHA-256 of the emergency state import_emergency_state would import; null when the apply left none."`
}

// DecisionView is the human decision on the run.
type DecisionView struct {
	Action    string    `json:"action" enum:"approved,rejected,canceled"`
	ActorID   string    `json:"actor_id"`
	ActorName *string   `json:"actor_name" doc:"Null when the principal no longer resolves."`
	DecidedAt time.Time `json:"decided_at"`
	Reason    *string   `json:"reason" doc:"The reason given with a discard; null when none was given."`
}

// UntrustedView says why a run's configuration was not trusted and what
// its plan went without.
type UntrustedView struct {
	Reason   string       `json:"reason" enum:"agent,fork_pull_request" doc:"agent: an agent started the run or uploaded its configuration; fork_pull_request: a pull request from a fork."`
	Withheld []string     `json:"withheld" doc:"What the plan did not get: state, sensitive_variables, credential_profiles, run_token. It planned as if nothing existed yet and can never be applied."`
	Release  *ReleaseView `json:"release" doc:"Set once a person released the run as a run with credentials."`
}

// ReleaseView is who released an agent's run as which run.
type ReleaseView struct {
	RunID      string    `json:"run_id" doc:"The person's run with the workspace's state, sensitive variables and credentials."`
	ActorID    string    `json:"actor_id"`
	ActorName  *string   `json:"actor_name" doc:"Null when the person no longer resolves."`
	ReleasedAt time.Time `json:"released_at"`
}

// SandboxCeilingView is one resource ceiling as the sandbox applied it.
type SandboxCeilingView struct {
	Limit     uint64 `json:"limit" doc:"Bytes for memory, tasks (processes and threads) for processes; 0 when not enforced."`
	Mechanism string `json:"mechanism" enum:"cgroup_v2_memory_max,rlimit_as,cgroup_v2_pids_max,rlimit_nproc_user_namespace,rlimit_nproc_dedicated_uid,none"`
}

// SandboxProfileView is what an attempt's sandbox really applied, as its
// worker recorded it.
type SandboxProfileView struct {
	Driver     string             `json:"driver"`
	Isolation  string             `json:"isolation" enum:"namespaces,none,unavailable" doc:"none: the operator runs sandboxes without namespaces; unavailable: the worker could not isolate the sandbox and ran nothing."`
	Reason     *string            `json:"reason" doc:"Why isolation was unavailable."`
	Namespaces []string           `json:"namespaces" doc:"Namespaces the commands had of their own; the network is shared by design."`
	Base       *string            `json:"base" doc:"Version of the managed base the sandbox started from (its system paths); null where commands saw the worker's host (no namespaces) or nothing ran."`
	BaseDigest *string            `json:"base_digest" doc:"SHA-256 digest (sha256:…) of that managed base's files, verified by the worker before it created sandboxes."`
	Network    *string            `json:"network" enum:"shared"`
	User       *string            `json:"user" enum:"dedicated_uid,worker" doc:"dedicated_uid: the commands ran as a user ID of their own."`
	Memory     SandboxCeilingView `json:"memory"`
	Processes  SandboxCeilingView `json:"processes"`
	CPUSeconds uint64             `json:"cpu_seconds"`
	OpenFiles  uint64             `json:"open_files"`
	FileBytes  uint64             `json:"file_bytes"`
}

func sandboxProfileView(p *run.SandboxProfile) *SandboxProfileView {
	if p == nil {
		return nil
	}
	optional := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return &SandboxProfileView{Driver: p.Driver, Isolation: p.Isolation, Reason: optional(p.Reason),
		Namespaces: append([]string{}, p.Namespaces...), Base: optional(p.Base), BaseDigest: optional(p.BaseDigest),
		Network: optional(p.Network), User: optional(p.User),
		Memory:     SandboxCeilingView{Limit: p.Memory.Limit, Mechanism: p.Memory.Mechanism},
		Processes:  SandboxCeilingView{Limit: p.Processes.Limit, Mechanism: p.Processes.Mechanism},
		CPUSeconds: p.CPUSeconds, OpenFiles: p.OpenFiles, FileBytes: p.FileBytes}
}

// WorkerIdentityView is what the worker that ran an attempt recorded of
// itself when the attempt started; a field it could not tell is null.
type WorkerIdentityView struct {
	WorkflowID    *string `json:"workflow_id" doc:"The job that ran the attempt: its kind and ID."`
	DefinitionSHA *string `json:"definition_sha" doc:"Full commit ID of the source the worker was built from."`
	BuildSHA      *string `json:"build_sha" doc:"SHA-256 of the worker executable (which also runs the sandboxed policy evaluations)."`
	Version       *string `json:"version" doc:"The worker's build version."`
	Protocol      *string `json:"protocol" doc:"The state protocol the runner's sandboxed CLI speaks."`
	PolicyEngine  *string `json:"policy_engine" doc:"The policy engine linked into the worker."`
}

func workerIdentityView(id *run.WorkerIdentity) *WorkerIdentityView {
	if id == nil {
		return nil
	}
	return &WorkerIdentityView{WorkflowID: recorded(id.WorkflowID), DefinitionSHA: recorded(id.DefinitionSHA), BuildSHA: recorded(id.BuildSHA),
		Version: recorded(id.Version), Protocol: recorded(id.Protocol), PolicyEngine: recorded(id.PolicyEngine)}
}

// recorded is a recorded value, or nil when nothing was recorded.
func recorded(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// AttemptView is the evidence of one phase attempt.
type AttemptView struct {
	ID                     string              `json:"id"`
	Phase                  string              `json:"phase" enum:"plan,apply"`
	Attempt                int                 `json:"attempt"`
	SandboxID              *string             `json:"sandbox_id"`
	SandboxName            *string             `json:"sandbox_name"`
	SandboxDriver          *string             `json:"sandbox_driver"`
	SandboxProfile         *SandboxProfileView `json:"sandbox_profile" doc:"Null until the attempt created (or was refused) its sandbox."`
	Worker                 *WorkerIdentityView `json:"worker" doc:"What the worker that ran the attempt recorded of itself when it started; null when nothing was recorded."`
	Region                 string              `json:"region"`
	Status                 string              `json:"status"`
	TerminalClassification *string             `json:"terminal_classification"`
	QueuedAt               time.Time           `json:"queued_at"`
	StartedAt              *time.Time          `json:"started_at"`
	FinishedAt             *time.Time          `json:"finished_at"`
	TimingsMS              map[string]float64  `json:"timings_ms" doc:"Breakdown of the attempt in milliseconds."`
}

// EvidenceView is the run's execution evidence. Its workflow, definition,
// build, protocol and policy-engine identities are the ones recorded by the
// worker of the newest attempt that recorded any (the policy engine: of the
// newest plan attempt, where policies are evaluated); each is null, and
// listed in not_recorded, while no worker recorded it.
type EvidenceView struct {
	WorkflowID         *string              `json:"workflow_id" doc:"The job that ran the newest recorded attempt: its kind and ID."`
	DefinitionSHA      *string              `json:"definition_sha" doc:"Full commit ID of the source that worker was built from."`
	BuildSHA           *string              `json:"build_sha" doc:"SHA-256 of that worker's executable."`
	WorkflowBuild      *string              `json:"workflow_build" doc:"That worker's build version."`
	ToolVersion        string               `json:"tool_version"`
	RunnerRelease      string               `json:"runner_release"`
	SandboxBaseProfile *string              `json:"sandbox_base_profile" doc:"Derived from the attempts' recorded sandbox profiles (the weakest isolation that ran user code): <driver>-namespaces, <driver>-unisolated or <driver>-isolation-unavailable. Null until an attempt recorded one."`
	Protocol           *string              `json:"protocol" doc:"The state protocol that worker's runner speaks."`
	PolicyEngine       *string              `json:"policy_engine" doc:"The policy engine of the worker of the newest recorded plan attempt, which evaluated the policies."`
	Attempts           []AttemptView        `json:"attempts"`
	RegistryModules    []RegistryModuleView `json:"registry_modules" doc:"The private registry module versions the run's attempts downloaded, in download order; kept when a version is later revoked or deleted."`
}

// RegistryModuleView is one registry module version one attempt
// downloaded, as it was then.
type RegistryModuleView struct {
	AttemptID         string    `json:"attempt_id"`
	Phase             string    `json:"phase" enum:"plan,apply"`
	Address           string    `json:"address" doc:"namespace/name/provider"`
	Version           string    `json:"version"`
	VersionID         string    `json:"version_id"`
	ArchiveSHA256     string    `json:"archive_sha256"`
	Deprecated        bool      `json:"deprecated" doc:"The version was deprecated when downloaded; the phase's log warns about it."`
	DeprecationReason *string   `json:"deprecation_reason"`
	DownloadedAt      time.Time `json:"downloaded_at"`
}

// SourceProvenanceView is the source chain of a code-host run.
type SourceProvenanceView struct {
	Provider               string  `json:"provider" enum:"github"`
	CommitSHA              string  `json:"commit_sha"`
	CommitMessage          string  `json:"commit_message"`
	Ref                    string  `json:"ref"`
	Repository             string  `json:"repository" doc:"owner/name"`
	PullRequestNumber      *int    `json:"pull_request_number"`
	WorkingDirectory       string  `json:"working_directory"`
	SourceIngestionID      string  `json:"source_ingestion_id"`
	SourceIngestionStatus  string  `json:"source_ingestion_status"`
	WorkflowID             string  `json:"workflow_id"`
	DeliveryID             string  `json:"delivery_id"`
	ConfigurationVersionID string  `json:"configuration_version_id"`
	ArchiveSHA256          string  `json:"archive_sha256" doc:"SHA-256 of the normalized archive."`
	ConfigurationArtifact  string  `json:"configuration_artifact_id"`
	Fork                   bool    `json:"fork" doc:"The pull request's head repository is not the base repository."`
	PlanApprovedBy         *string `json:"plan_approved_by" doc:"The user who planned a held pull request from a fork for its exact head commit; null when the code-host event started the run by itself."`
}

// RunView is a run's whole review.
type RunView struct {
	RunSummaryView
	ProjectID        string                `json:"project_id"`
	SourceProvenance *SourceProvenanceView `json:"source_provenance" doc:"Code-host runs only: the verified chain from delivery to configuration. Null for uploaded runs, and for a code-host run whose chain is incomplete or ambiguous (then listed in not_recorded)."`
	AutoApply        bool                  `json:"auto_apply" doc:"Always false."`
	IsDestroy        bool                  `json:"is_destroy" doc:"Always false."`
	RunOptionsView
	Pinned                PinnedView      `json:"pinned"`
	Plan                  PlanPhaseView   `json:"plan"`
	Policy                PolicyStageView `json:"policy"`
	ApprovalDeadline      *time.Time      `json:"approval_deadline"`
	Apply                 ApplyPhaseView  `json:"apply"`
	Decision              *DecisionView   `json:"decision"`
	TerminalReason        *string         `json:"terminal_reason"`
	LogTruncated          bool            `json:"log_truncated" doc:"Some output was dropped at a log cap; the log says where."`
	LeaseExpiresAt        *time.Time      `json:"lease_expires_at" doc:"Set only while a prepared recovery lease is active."`
	LeaseRemainingSeconds *int            `json:"lease_remaining_seconds" doc:"0–900, from the database clock."`
	Recovery              *RecoveryView   `json:"recovery" doc:"Set while the run waits for recovery: the evidence a recover request names."`
	ForceExecuteDiscards  []string        `json:"force_execute_discards" doc:"The runs a force_execute would discard, oldest first; empty unless available_actions offers force_execute."`
	Overrides             OverridesView   `json:"overrides"`
	Evidence              EvidenceView    `json:"evidence"`
	NotRecorded           []string        `json:"not_recorded" doc:"Review fields with no recorded value yet."`
	Initiator             string          `json:"initiator" enum:"user,agent,service_account,code_host,operator,trigger" doc:"Who started the run; a run released from an agent's keeps agent. Workload-identity tokens carry it as run_initiator."`
	Untrusted             *UntrustedView  `json:"untrusted" doc:"Set for a run whose configuration no trusted person has looked at; null for every other run."`
	ReleasedFromRunID     *string         `json:"released_from_run_id" doc:"The agent's run a person released as this one."`
	TriggeredByRunID      *string         `json:"triggered_by_run_id" doc:"The applied run of another workspace whose run trigger created this run (initiator trigger; created_by names the trigger)."`
}

// RunOptionsView are the options the run was created with; the tool
// version it asked for, if any, is its pinned tool_version.
type RunOptionsView struct {
	TargetAddrs     []string          `json:"target_addrs" doc:"Resources the plan was narrowed to (-target); empty for the whole configuration."`
	ReplaceAddrs    []string          `json:"replace_addrs" doc:"Resources the plan replaces (-replace)."`
	Refresh         bool              `json:"refresh" doc:"False when the plan did not refresh the state first."`
	RefreshOnly     bool              `json:"refresh_only"`
	AllowEmptyApply bool              `json:"allow_empty_apply"`
	SavePlan        bool              `json:"save_plan" doc:"A saved plan: it holds the workspace queue only once approved."`
	Variables       []RunVariableBody `json:"variables" doc:"Run variables, as given; they override workspace variables of the same key."`
}

func runOptionsView(o run.RunOptions) RunOptionsView {
	v := RunOptionsView{TargetAddrs: append([]string{}, o.TargetAddrs...), ReplaceAddrs: append([]string{}, o.ReplaceAddrs...),
		Refresh: o.Refresh, RefreshOnly: o.RefreshOnly, AllowEmptyApply: o.AllowEmptyApply, SavePlan: o.SavePlan,
		Variables: make([]RunVariableBody, 0, len(o.Variables))}
	for _, x := range o.Variables {
		v.Variables = append(v.Variables, RunVariableBody{Key: x.Key, Value: x.Value})
	}
	return v
}

// runView is a run's review, read through q: inside a mutation's
// transaction it shows what the mutation wrote.
func (a *API) runView(ctx context.Context, q sqlx.QueryerContext, p access.Principal, r run.Run) (RunView, error) {
	runs := a.deps.Services.Runs
	queues, err := runs.QueuesAhead(ctx, q, r)
	if err != nil {
		return RunView{}, err
	}
	names, err := a.deps.Services.Workspaces.Names(ctx, q, r.OrganizationID, []string{r.WorkspaceID})
	if err != nil {
		return RunView{}, err
	}
	v := RunView{
		RunSummaryView: runSummary(r, names[r.WorkspaceID], queues[r.ID], p), ProjectID: r.ProjectID, AutoApply: r.AutoApply, IsDestroy: r.IsDestroy,
		RunOptionsView: runOptionsView(r.RunOptions),
		Pinned: PinnedView{ConfigurationVersionID: r.ConfigurationVersionID, ConfigurationDigest: run.HexDigest(r.ConfigurationDigest),
			InputSnapshotDigest: run.HexDigest(r.InputSnapshotDigest), DependencyLockDigest: run.HexDigest(r.DependencyLockDigest),
			SettingsVersion: r.SettingsVersion, ToolVersion: r.ToolVersion, Region: r.Region, Platform: r.Platform,
			RunnerRelease: r.RunnerRelease},
		Plan: PlanPhaseView{Status: r.PlanStatus, HasChanges: r.HasChanges, ResourceAdditions: r.ResourceAdditions,
			ResourceChanges: r.ResourceChanges, ResourceDestructions: r.ResourceDestructions, PlanDigest: hexOrNil(r.PlanDigest),
			PredecessorStateVersionID: r.PredecessorStateVersionID},
		Policy:           PolicyStageView{Outcome: r.PolicyOutcome, ResultDigest: hexOrNil(r.PolicyResultDigest)},
		ApprovalDeadline: r.ApprovalDeadline,
		Apply:            ApplyPhaseView{Status: r.ApplyStatus, StateVersionID: r.StateVersionID},
		TerminalReason:   r.TerminalReason,
		LogTruncated:     r.LogTruncated,
		Overrides:        OverridesView{Records: []PolicyOverrideView{}},
		Evidence: EvidenceView{ToolVersion: r.ToolVersion, RunnerRelease: r.RunnerRelease, Attempts: []AttemptView{},
			RegistryModules: []RegistryModuleView{}},
		NotRecorded:          []string{},
		ForceExecuteDiscards: []string{},
		Initiator:            r.Initiator,
		ReleasedFromRunID:    r.ReleasedFromRunID,
		TriggeredByRunID:     r.TriggeredByRunID,
	}
	if r.UntrustedReason != nil {
		v.Untrusted = &UntrustedView{Reason: *r.UntrustedReason, Withheld: slices.Clone(run.Withheld)}
		if r.ReleasedRunID != nil && r.ReleasedByID != nil && r.ReleasedAt != nil {
			kind := ""
			if r.ReleasedByKind != nil {
				kind = *r.ReleasedByKind
			}
			name, err := runs.ActorName(ctx, q, r.OrganizationID, kind, *r.ReleasedByID)
			if err != nil {
				return RunView{}, err
			}
			v.Untrusted.Release = &ReleaseView{RunID: *r.ReleasedRunID, ActorID: *r.ReleasedByID,
				ActorName: name, ReleasedAt: *r.ReleasedAt}
		}
	}
	if slices.Contains(v.AvailableActions, run.ActionForceExecute) {
		for _, ahead := range queues[r.ID] {
			v.ForceExecuteDiscards = append(v.ForceExecuteDiscards, ahead.ID)
		}
	}
	if r.DecisionAction != nil && r.DecidedAt != nil && r.DecisionActorID != nil {
		kind := ""
		if r.DecisionActorKind != nil {
			kind = *r.DecisionActorKind
		}
		name, err := runs.ActorName(ctx, q, r.OrganizationID, kind, *r.DecisionActorID)
		if err != nil {
			return RunView{}, err
		}
		v.Decision = &DecisionView{Action: *r.DecisionAction, ActorID: *r.DecisionActorID,
			ActorName: name, DecidedAt: *r.DecidedAt,
			Reason: r.DecisionReason}
	}
	review, err := runs.PolicyOf(ctx, q, r)
	if err != nil {
		return RunView{}, err
	}
	pv := runPolicyView(review, time.Now())
	v.Policy.Status, v.Policy.Gate, v.Policy.Attachments, v.Policy.Findings = pv.Status, pv.Gate, pv.Results, []FindingView{}
	for _, res := range pv.Results {
		v.Policy.Findings = append(v.Policy.Findings, res.Findings...)
	}
	v.Overrides = OverridesView{Records: pv.Overrides, Truncated: pv.OverridesTruncated}
	attempts, err := runs.Attempts(ctx, q, r)
	if err != nil {
		return RunView{}, err
	}
	for _, at := range attempts {
		v.Evidence.Attempts = append(v.Evidence.Attempts, AttemptView{ID: at.ID, Phase: at.Phase, Attempt: at.Number,
			SandboxID: at.SandboxID, SandboxName: at.SandboxName, SandboxDriver: at.SandboxDriver,
			SandboxProfile: sandboxProfileView(at.SandboxProfile), Worker: workerIdentityView(at.Worker),
			Region: at.Region, Status: at.Status, TerminalClassification: at.TerminalClassification, QueuedAt: at.QueuedAt,
			StartedAt: at.StartedAt, FinishedAt: at.FinishedAt, TimingsMS: at.Timings})
	}
	if latest, plan := run.RecordedWorkers(attempts); latest != nil {
		v.Evidence.WorkflowID, v.Evidence.DefinitionSHA, v.Evidence.BuildSHA = recorded(latest.WorkflowID), recorded(latest.DefinitionSHA), recorded(latest.BuildSHA)
		v.Evidence.WorkflowBuild, v.Evidence.Protocol = recorded(latest.Version), recorded(latest.Protocol)
		if plan != nil {
			v.Evidence.PolicyEngine = recorded(plan.PolicyEngine)
		}
	}
	if base, ok := run.BaseProfile(attempts); ok {
		v.Evidence.SandboxBaseProfile = &base
	}
	modules, err := runs.RegistryModulesOf(ctx, q, r)
	if err != nil {
		return RunView{}, err
	}
	for _, m := range modules {
		v.Evidence.RegistryModules = append(v.Evidence.RegistryModules, RegistryModuleView{AttemptID: m.AttemptID, Phase: m.Phase,
			Address: m.Address, Version: m.Version, VersionID: m.VersionID, ArchiveSHA256: m.ArchiveSHA256, Deprecated: m.Deprecated,
			DeprecationReason: m.DeprecationReason, DownloadedAt: m.DownloadedAt})
	}
	rec, err := runs.RecoveryOf(ctx, q, r.ID)
	if err != nil {
		return RunView{}, err
	}
	if rec != nil && rec.Status == "prepared" && rec.LeaseRemaining > 0 {
		expires, remaining := rec.LeaseExpiresAt, rec.LeaseRemaining
		v.LeaseExpiresAt, v.LeaseRemainingSeconds = &expires, &remaining
	}
	evidence, err := runs.EvidenceOf(ctx, q, r)
	if err != nil {
		return RunView{}, err
	}
	if evidence.EmergencyState != nil {
		v.Apply.EmergencyStateDigest = hexOrNil(evidence.EmergencyState.SHA256)
	}
	if r.Status == run.StatusRecoveryRequired {
		v.Recovery = &RecoveryView{CurrentStateVersionID: evidence.CurrentStateVersionID,
			CurrentStateDigest: run.HexDigest(evidence.CurrentStateDigest), EmergencyStateDigest: v.Apply.EmergencyStateDigest}
	}
	if src := run.CodeHostSourceOf(r); src != nil || r.Source == run.SourceVCS {
		pr, err := github.ProvenanceOf(ctx, q, r.ID, r.ConfigurationVersionID, r.ConfigurationDigest, src)
		if err != nil {
			return RunView{}, err
		}
		if pr == nil {
			v.NotRecorded = append(v.NotRecorded, "source_provenance")
		} else {
			v.SourceProvenance = &SourceProvenanceView{Provider: pr.Provider, CommitSHA: pr.CommitSHA,
				CommitMessage: pr.CommitMessage, Ref: pr.Ref, Repository: pr.RepositoryOwner + "/" + pr.RepositoryName,
				PullRequestNumber: pr.PullNumber, WorkingDirectory: pr.WorkingDirectory, SourceIngestionID: pr.IngestionID,
				SourceIngestionStatus: pr.IngestionStatus, WorkflowID: pr.WorkflowID, DeliveryID: pr.DeliveryID,
				ConfigurationVersionID: pr.ConfigurationVersionID, ArchiveSHA256: pr.ArchiveSHA256,
				ConfigurationArtifact: pr.ConfigurationArtifact, Fork: pr.Fork, PlanApprovedBy: pr.PlanApprovedBy}
		}
	}
	for name, missing := range map[string]bool{
		"plan.has_changes": r.HasChanges == nil, "plan.plan_digest": len(r.PlanDigest) == 0,
		"policy.outcome": r.PolicyOutcome == nil, "apply.state_version_id": r.StateVersionID == nil,
		"decision": v.Decision == nil, "evidence.sandbox_base_profile": v.Evidence.SandboxBaseProfile == nil,
		"evidence.workflow_id": v.Evidence.WorkflowID == nil, "evidence.definition_sha": v.Evidence.DefinitionSHA == nil,
		"evidence.build_sha": v.Evidence.BuildSHA == nil, "evidence.workflow_build": v.Evidence.WorkflowBuild == nil,
		"evidence.protocol": v.Evidence.Protocol == nil, "evidence.policy_engine": v.Evidence.PolicyEngine == nil,
	} {
		if missing {
			v.NotRecorded = append(v.NotRecorded, name)
		}
	}
	slices.Sort(v.NotRecorded)
	return v, nil
}

// workspaceIDs are the distinct workspaces of runs.
func workspaceIDs(runs []run.Run) []string {
	ids := make([]string, 0, len(runs))
	for _, r := range runs {
		if !slices.Contains(ids, r.WorkspaceID) {
			ids = append(ids, r.WorkspaceID)
		}
	}
	return ids
}
