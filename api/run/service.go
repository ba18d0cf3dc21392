package run

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/state"
	"github.com/cairnhq/cairn/api/varset"
	"github.com/cairnhq/cairn/api/workspace"
)

// JobInserter inserts River jobs inside a caller's transaction.
type JobInserter interface {
	InsertTx(ctx context.Context, tx *sql.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// Options tune the run service.
type Options struct {
	// ApprovalTimeout is how long a plan waits for a decision before the
	// run expires.
	ApprovalTimeout time.Duration
	// TokenKey keys the hashes of run tokens.
	TokenKey []byte
	// TokenTTL bounds a run token's life.
	TokenTTL time.Duration
	// PlanMaxAttempts bounds the attempts of a plan whose worker dies or
	// stops under it, or whose connection is cut off; the run then errors
	// (plan_attempts_exhausted).
	PlanMaxAttempts int
	// LogSegmentBytes is how much of a phase's log stays in table rows
	// before it is sealed into a blob segment (DefaultLogSegmentBytes when
	// zero).
	LogSegmentBytes int64
	// RunLogMaxBytes caps the command output one run keeps, across phases
	// and attempts (DefaultRunLogMaxBytes when zero).
	RunLogMaxBytes int64
	// Observer, when set, sees every run write inside its transaction
	// (the code-host check runs follow the run this way).
	Observer Observer
	// ToolVersions are the exact tool versions a plan-only run may ask for
	// instead of its workspace's, as workspace.ToolVersions.Pinned lists
	// them (CAIRN_TOOL_VERSIONS, CAIRN_TERRAFORM_VERSIONS).
	ToolVersions []string
}

// Observer learns of every write of a run, inside the writing transaction,
// so the side effects it implies commit or roll back with it.
type Observer interface {
	RunSaved(ctx context.Context, tx *sqlx.Tx, r Run) error
}

// DefaultPlanMaxAttempts is how many attempts a plan gets when workers die
// or stop under it.
const DefaultPlanMaxAttempts = 3

// Service holds the run use cases: configuration versions, runs, their
// reviews and decisions (service.go), and the execution steps the runner
// takes (execution.go).
type Service struct {
	db         *sqlx.DB
	blobs      *blob.Store
	workspaces *workspace.Service
	state      *state.Service
	launch     *launch.Service
	policies   *policy.Service
	creds      *credential.Service
	jobs       JobInserter
	logger     *slog.Logger
	opts       Options
	now        func() time.Time
}

// NewService returns the run service. blobs may be nil (no master key):
// everything that stores or reads artifacts then fails closed.
func NewService(conn *sqlx.DB, blobs *blob.Store, workspaces *workspace.Service, states *state.Service,
	admission *launch.Service, policies *policy.Service, creds *credential.Service, jobs JobInserter, logger *slog.Logger, opts Options) *Service {
	if opts.ApprovalTimeout <= 0 {
		opts.ApprovalTimeout = 24 * time.Hour
	}
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = 2 * time.Hour
	}
	if opts.LogSegmentBytes <= 0 {
		opts.LogSegmentBytes = DefaultLogSegmentBytes
	}
	if opts.RunLogMaxBytes <= 0 {
		opts.RunLogMaxBytes = DefaultRunLogMaxBytes
	}
	if opts.PlanMaxAttempts <= 0 {
		opts.PlanMaxAttempts = DefaultPlanMaxAttempts
	}
	return &Service{db: conn, blobs: blobs, workspaces: workspaces, state: states, launch: admission, policies: policies, creds: creds, jobs: jobs,
		logger: logger, opts: opts, now: time.Now}
}

// WithClock returns a copy of the service that reads the time from now, so
// a test can let time pass (an override expire) without waiting.
func (s *Service) WithClock(now func() time.Time) *Service {
	c := *s
	c.now = now
	return &c
}

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// CreateInput is a request for a new run.
type CreateInput struct {
	WorkspaceID            string
	ConfigurationVersionID string
	Kind                   Kind
	Message                string
	Source                 string
	AutoApply              bool
	IsDestroy              bool
	// LatestConfiguration, with no ConfigurationVersionID, runs the
	// workspace's current configuration version (the remote-backend
	// protocol's run without a configuration version).
	LatestConfiguration bool
	// CodeHost, set for runs a code-host event creates, pins their source
	// and their credential rule, and fixes the run's identity.
	CodeHost *CodeHostSource
	// Options are the run's own options; nil for none (DefaultRunOptions).
	Options *RunOptions
	// ToolVersion, when set, is the OpenTofu version a plan-only run uses
	// instead of its workspace's; it must be one the API offers.
	ToolVersion string
	// ReleasedFrom is the agent's run a person releases as this one: the
	// new run keeps its initiator and trusts its configuration.
	ReleasedFrom *Run
	// TriggeredByRunID is the applied run of a source workspace whose run
	// trigger creates this run (see TriggerArgs).
	TriggeredByRunID string
}

const maxMessageChars = 2000

func (in CreateInput) validate() error {
	switch {
	case in.AutoApply:
		return ErrAutoApply
	case in.IsDestroy:
		return ErrDestroy
	case !slices.Contains(Kinds, in.Kind):
		return fmt.Errorf("%w: kind must be one of plan_and_apply, plan_only, speculative", ErrInvalid)
	case len([]rune(in.Message)) > maxMessageChars:
		return fmt.Errorf("%w: message is over %d characters", ErrInvalid, maxMessageChars)
	case in.WorkspaceID == "" || (in.ConfigurationVersionID == "" && !in.LatestConfiguration):
		return fmt.Errorf("%w: workspace_id and configuration_version_id are required", ErrInvalid)
	}
	return in.options().Validate(in.Kind)
}

// options are the run's options, the defaults when none were given.
func (in CreateInput) options() RunOptions {
	if in.Options == nil {
		return DefaultRunOptions()
	}
	return *in.Options
}

// toolVersion is the tool version the run pins: the one it asked for, or
// the workspace's. A run that could apply never gets one of its own: its
// state must stay the workspace tool's.
func (s *Service) toolVersion(in CreateInput, w workspace.Workspace) (string, error) {
	switch {
	case in.ToolVersion == "":
		return w.ToolVersion, nil
	case in.Kind == KindPlanAndApply:
		return "", &OptionError{Field: "tool_version", Kind: ErrToolVersionPlanOnly,
			Reason: "a run's own tool version is only valid for a plan-only run"}
	case !slices.Contains(s.opts.ToolVersions, in.ToolVersion):
		return "", &OptionError{Field: "tool_version", Kind: ErrToolVersionUnsupported,
			Reason: "must be one of the offered tool versions (CAIRN_TOOL_VERSIONS for OpenTofu, CAIRN_TERRAFORM_VERSIONS for Terraform): " +
				strings.Join(s.opts.ToolVersions, ", ")}
	}
	return in.ToolVersion, nil
}

// inputSnapshot is what a run pins besides its configuration: the
// workspace settings version, every effective variable (the workspace's
// and its variable sets' winners) by identity and digest (the values are
// copied beside it, see workspace.PinValues) and the exact
// credential profile versions (by identity and the names they set; their
// secrets stay sealed with the version until a sandbox redeems them).
type inputSnapshot struct {
	SettingsVersion int                     `json:"settings_version"`
	ToolVersion     string                  `json:"tool_version"`
	Region          string                  `json:"region"`
	Platform        string                  `json:"platform"`
	Variables       []workspace.VariableRef `json:"variables"` // read only by variableRefs
	Credentials     []credential.Ref        `json:"credentials,omitempty"`
	Source          *CodeHostSource         `json:"source,omitempty"`
	// Options are the run's own options; absent for a run without any.
	Options *optionsSnapshot `json:"options,omitempty"`
}

// CreateRun creates a run and, when the workspace's queue is free, makes
// its plan due, all in the caller's transaction. The new-run admission
// checks run here, inside the same transaction: a refusal persists nothing.
func (s *Service) CreateRun(ctx context.Context, tx *sqlx.Tx, p access.Principal, in CreateInput) (Run, error) {
	if err := in.validate(); err != nil {
		return Run{}, err
	}
	w, err := s.workspaces.WorkspaceForWrite(ctx, tx, p, in.WorkspaceID, access.PermRunCreate)
	if err != nil {
		return Run{}, err
	}
	toolVersion, err := s.toolVersion(in, w)
	if err != nil {
		return Run{}, err
	}
	cv, err := s.runConfiguration(ctx, tx, w, in)
	if err != nil {
		return Run{}, err
	}
	unfinished, err := countUnfinished(ctx, tx, w.ID)
	if err != nil {
		return Run{}, err
	}
	rule := launch.AdmitNewRun(launch.NewRun{Region: w.Region, RunnerRelease: launch.RunnerRelease, Unfinished: unfinished})
	if _, err := s.launch.RequireBy(ctx, tx, launch.Subject{OrganizationID: w.OrganizationID, WorkspaceID: w.ID}, rule); err != nil {
		return Run{}, err
	}
	// The effective variables: the workspace's own and its variable sets',
	// one winner per category and key (varset.Tier).
	vars, err := varset.SnapshotForRun(ctx, tx, w.OrganizationID, w.ID, w.ProjectID)
	if err != nil {
		return Run{}, err
	}
	untrusted := untrustedReason(p, in, cv)
	// A pull request's speculative snapshot names no sensitive variable
	// (SPEC §6), and code no trusted person has looked at gets nothing
	// secret at all. A person's own speculative plan (the CLI's `tofu
	// plan`, as HCP Terraform gives it the workspace's variables) is
	// trusted as their applies are.
	if untrusted != nil || (in.Kind == KindSpeculative && in.CodeHost != nil) {
		vars = vars.WithoutSensitive()
	}
	// The current verified versions of the workspace's credential profiles
	// are pinned now; a profile runs need that has none usable fails the
	// snapshot, and the plan ends plan_credentials_required.
	var creds []credential.Ref
	var credErr string
	if untrusted == nil {
		if creds, credErr, err = s.snapshotCredentials(ctx, tx, w, in); err != nil {
			return Run{}, err
		}
	}
	opts := in.options()
	snapshot, err := json.Marshal(inputSnapshot{SettingsVersion: w.SettingsVersion, ToolVersion: toolVersion,
		Region: w.Region, Platform: w.Platform, Variables: vars.Refs(), Credentials: creds, Source: in.CodeHost,
		Options: snapshotOptions(opts, in.ToolVersion)})
	if err != nil {
		return Run{}, fmt.Errorf("encoding input snapshot: %w", err)
	}
	now := s.stamp()
	runID := id.New("run")
	if in.CodeHost != nil {
		runID = in.CodeHost.RunID()
	}
	r := Run{
		ID: runID, OrganizationID: w.OrganizationID, ProjectID: w.ProjectID, WorkspaceID: w.ID, Kind: in.Kind,
		Status: StatusPending, Message: in.Message, Source: in.Source, ConfigurationVersionID: cv.ID,
		ConfigurationDigest: cv.SHA256, DependencyLockDigest: lockDigest(cv), InputSnapshot: snapshot,
		InputSnapshotDigest: Digest(snapshot), SettingsVersion: w.SettingsVersion, ToolVersion: toolVersion,
		Region: w.Region, Platform: w.Platform, RunnerRelease: launch.RunnerRelease, CreatedByKind: p.Kind,
		CreatedByID: p.ID, PlanStatus: PhasePending, ApplyStatus: PhasePending,
		StatusTimestamps: Timestamps{string(StatusPending): now}, CreatedAt: now, UpdatedAt: now, RunOptions: opts,
		Initiator: InitiatorOf(p), UntrustedReason: untrusted,
	}
	if in.ReleasedFrom != nil {
		r.Initiator, r.ReleasedFromRunID = in.ReleasedFrom.Initiator, &in.ReleasedFrom.ID
	}
	if in.TriggeredByRunID != "" {
		r.TriggeredByRunID = &in.TriggeredByRunID
	}
	if credErr != "" {
		r.CredentialSnapshotError = &credErr
	}
	if err := insertRun(ctx, tx, r); err != nil {
		return Run{}, err
	}
	// A provisional version becomes the workspace's current configuration
	// once a run uses it.
	if cv.CurrentSince == nil {
		if err := promoteConfiguration(ctx, tx, cv.ID, now); err != nil {
			return Run{}, err
		}
	}
	// The values themselves are copied too: editing or deleting a variable
	// later never changes or breaks this run.
	if err := s.workspaces.PinValues(ctx, tx, r.OrganizationID, r.ID, vars); err != nil {
		return Run{}, err
	}
	// The effective policy attachments are captured now: later attachment
	// or publication changes reach only runs created after them.
	snapshotErr, err := s.policies.SnapshotRun(ctx, tx, r.OrganizationID, r.ProjectID, r.WorkspaceID, r.ID)
	if err != nil {
		return Run{}, err
	}
	if snapshotErr != "" {
		r.PolicySnapshotError = &snapshotErr
		if err := s.save(ctx, tx, r); err != nil {
			return Run{}, err
		}
	}
	// A speculative run and a saved plan plan at once: neither holds the
	// workspace queue while it plans. Any other waits while one is held.
	planNow := r.Speculative() || r.SavePlan
	if !planNow {
		held, err := queueHeld(ctx, tx, w.ID, r.ID)
		if err != nil {
			return Run{}, err
		}
		planNow = !held
	}
	if planNow {
		if r, err = s.queuePlan(ctx, tx, r, 1); err != nil {
			return Run{}, err
		}
	}
	// A run that waits behind another was not saved since its insert.
	if err := s.observe(ctx, tx, r); err != nil {
		return Run{}, err
	}
	evidence := map[string]any{"workspace_id": w.ID, "kind": string(r.Kind), "configuration_version_id": cv.ID, "source": in.Source,
		"initiator": r.Initiator}
	if untrusted != nil {
		evidence["untrusted_reason"] = *untrusted
	}
	if in.ReleasedFrom != nil {
		evidence["released_from_run_id"] = in.ReleasedFrom.ID
	}
	if in.TriggeredByRunID != "" {
		evidence["triggered_by_run_id"] = in.TriggeredByRunID
	}
	if !opts.IsDefault() || in.ToolVersion != "" {
		// Counts and flags only: addresses and values stay on the run.
		evidence["options"] = map[string]any{"target_addrs": len(opts.TargetAddrs), "replace_addrs": len(opts.ReplaceAddrs),
			"refresh": opts.Refresh, "refresh_only": opts.RefreshOnly, "allow_empty_apply": opts.AllowEmptyApply,
			"save_plan": opts.SavePlan, "variables": len(opts.Variables), "tool_version": toolVersion}
	}
	return r, audit.Record(ctx, tx, p, "run.created", "run", r.ID, evidence)
}

// runConfiguration is the configuration version a new run evaluates: the
// one named, or the workspace's current one; it must be uploaded.
func (s *Service) runConfiguration(ctx context.Context, tx *sqlx.Tx, w workspace.Workspace, in CreateInput) (ConfigurationVersion, error) {
	if in.ConfigurationVersionID == "" {
		cv, err := currentConfiguration(ctx, tx, w.OrganizationID, w.ID)
		if err != nil {
			return ConfigurationVersion{}, err
		}
		if cv == nil || cv.Status != ConfigurationUploaded {
			return ConfigurationVersion{}, ErrConfigurationNotReady
		}
		return *cv, nil
	}
	cv, err := configurationVersionByID(ctx, tx, w.OrganizationID, in.ConfigurationVersionID)
	if err != nil || cv.WorkspaceID != w.ID {
		return ConfigurationVersion{}, fault.ErrNotFound
	}
	if cv.Status != ConfigurationUploaded {
		return ConfigurationVersion{}, ErrConfigurationNotReady
	}
	return cv, nil
}

// lockDigest is the dependency-lock digest a run binds: the lock file's
// SHA-256, or the digest of nothing when the archive has no lock file.
func lockDigest(cv ConfigurationVersion) []byte {
	if cv.LockFileSHA256 != nil {
		return cv.LockFileSHA256
	}
	return Digest(nil)
}

// queuePlan makes attempt n of the plan due: the attempt row and its job
// commit with the caller's transaction.
func (s *Service) queuePlan(ctx context.Context, tx *sqlx.Tx, r Run, n int) (Run, error) {
	if err := s.queueAttempt(ctx, tx, r, PhasePlan, n); err != nil {
		return Run{}, err
	}
	// The workspace's active run holds its lock until it ends, as HCP
	// Terraform clients expect (a free lock only: a user's lock stays, and
	// the approval then waits for it). A saved plan takes it only when it
	// is applied.
	if !r.Speculative() && !r.SavePlan {
		if _, err := workspace.LockForRun(ctx, tx, r.OrganizationID, r.WorkspaceID, r.ID, s.stamp()); err != nil {
			return Run{}, err
		}
	}
	r = s.transition(r, StatusPlanQueued)
	return r, s.save(ctx, tx, r)
}

func (s *Service) queueAttempt(ctx context.Context, tx *sqlx.Tx, r Run, phase string, n int) error {
	a := Attempt{ID: id.New("att"), OrganizationID: r.OrganizationID, RunID: r.ID, Phase: phase, Number: n,
		Status: AttemptQueued, Region: r.Region, QueuedAt: s.stamp()}
	if err := insertAttempt(ctx, tx, a); err != nil {
		return err
	}
	if s.jobs == nil {
		return fmt.Errorf("no job inserter: %w", fault.ErrUnavailable)
	}
	// Phases go on the queue launch control routes runs to.
	opts := &river.InsertOpts{Queue: s.launch.Queue(ctx, tx, launch.WorkflowRun)}
	if _, err := s.jobs.InsertTx(ctx, tx.Tx, PhaseArgs{RunID: r.ID, AttemptID: a.ID, Phase: phase}, opts); err != nil {
		return fmt.Errorf("inserting %s job: %w", phase, err)
	}
	return nil
}

// transition moves r to status, stamping when it got there.
func (s *Service) transition(r Run, status Status) Run {
	now := s.stamp()
	if r.StatusTimestamps == nil {
		r.StatusTimestamps = Timestamps{}
	}
	r.Status, r.UpdatedAt = status, now
	r.StatusTimestamps[string(status)] = now
	return r
}

// save writes r and tells the observer, in the caller's transaction.
func (s *Service) save(ctx context.Context, tx *sqlx.Tx, r Run) error {
	if err := saveRun(ctx, tx, r); err != nil {
		return err
	}
	return s.observe(ctx, tx, r)
}

func (s *Service) observe(ctx context.Context, tx *sqlx.Tx, r Run) error {
	if s.opts.Observer == nil {
		return nil
	}
	return s.opts.Observer.RunSaved(ctx, tx, r)
}

// finish ends a run and hands the workspace queue to the next pending run.
// A run that applied fires its workspace's run triggers.
func (s *Service) finish(ctx context.Context, tx *sqlx.Tx, r Run, status Status, reason string) (Run, error) {
	r, err := s.end(ctx, tx, r, status, reason)
	if err != nil || r.Speculative() {
		return r, err
	}
	if status == StatusApplied {
		if err := s.fireTriggers(ctx, tx, r); err != nil {
			return Run{}, err
		}
	}
	return r, s.advanceQueue(ctx, tx, r.WorkspaceID)
}

// fireTriggers inserts the fan-out job of an applied run when some
// workspace subscribes to its workspace. It commits with the apply, and
// its identity is the run's: a run fans out at most once.
func (s *Service) fireTriggers(ctx context.Context, tx *sqlx.Tx, r Run) error {
	subscribed, err := hasOutboundTriggers(ctx, tx, r.OrganizationID, r.WorkspaceID)
	if err != nil || !subscribed {
		return err
	}
	if s.jobs == nil {
		return fmt.Errorf("no job inserter: %w", fault.ErrUnavailable)
	}
	if _, err := s.jobs.InsertTx(ctx, tx.Tx, TriggerArgs{RunID: r.ID}, nil); err != nil {
		return fmt.Errorf("inserting run trigger job: %w", err)
	}
	return nil
}

// end ends a run and lets go of what it held (pinned values, the
// workspace lock, run tokens); who goes next in the workspace's queue is
// the caller's decision.
func (s *Service) end(ctx context.Context, tx *sqlx.Tx, r Run, status Status, reason string) (Run, error) {
	r = s.transition(r, status)
	if reason != "" {
		r.TerminalReason = &reason
	}
	if err := s.save(ctx, tx, r); err != nil {
		return Run{}, err
	}
	if err := workspace.DropPinnedValues(ctx, tx, r.ID); err != nil {
		return Run{}, err
	}
	// Whatever lock the run or its CLI took ends with the run.
	if err := workspace.ReleaseRunLock(ctx, tx, r.OrganizationID, r.WorkspaceID, r.ID); err != nil {
		return Run{}, err
	}
	if r.Speculative() {
		return r, nil
	}
	return r, revokeRunTokens(ctx, tx, r.ID)
}

// advanceQueue starts the oldest pending run of a workspace whose queue
// just became free.
func (s *Service) advanceQueue(ctx context.Context, tx *sqlx.Tx, workspaceID string) error {
	held, err := queueHeld(ctx, tx, workspaceID, "")
	if err != nil || held {
		return err
	}
	next, err := nextPendingRun(ctx, tx, workspaceID)
	if err != nil || next == nil {
		return err
	}
	_, err = s.queuePlan(ctx, tx, *next, 1)
	return err
}

// boundary is a token's project and workspace limits and the workspaces
// its teams reach.
type boundary struct {
	projectID, workspaceID string
	scope                  access.Scope
}

func boundaryOf(p access.Principal) boundary {
	return boundary{projectID: p.ProjectID, workspaceID: p.WorkspaceID, scope: p.WorkspaceScope()}
}

func (b boundary) admits(r Run) bool {
	return (b.projectID == "" || b.projectID == r.ProjectID) && (b.workspaceID == "" || b.workspaceID == r.WorkspaceID)
}

// visibleRun loads a run of the principal's organization in a workspace it
// can read, inside its token boundaries; anything else is not found, like
// a missing run. A readable run without perm in its workspace is
// forbidden.
func visibleRun(ctx context.Context, q sqlx.QueryerContext, p access.Principal, runID string, perm access.Permission, forUpdate bool) (Run, error) {
	if err := p.Require(perm); err != nil {
		return Run{}, err
	}
	r, err := runByID(ctx, q, p.OrganizationID, runID, forUpdate)
	if err != nil {
		return Run{}, err
	}
	if p.OrganizationID == "" || !boundaryOf(p).admits(r) {
		return Run{}, fault.ErrNotFound
	}
	if err := p.RequireIn(r.WorkspaceID, r.ProjectID, perm); err != nil {
		return Run{}, err
	}
	return r, nil
}

// requireIn checks permissions in a loaded run's workspace, where the
// principal's teams may grant less than they do elsewhere.
func requireIn(p access.Principal, r Run, perms ...access.Permission) error {
	for _, perm := range perms {
		if err := p.RequireIn(r.WorkspaceID, r.ProjectID, perm); err != nil {
			return err
		}
	}
	return nil
}

// GetRun reads one run.
func (s *Service) GetRun(ctx context.Context, p access.Principal, runID string) (Run, error) {
	return visibleRun(ctx, s.db, p, runID, access.PermRunRead, false)
}

// RunOwner reads a run by ID alone, for admission of capability URLs.
func (s *Service) RunOwner(ctx context.Context, runID string) (Run, error) {
	return runByID(ctx, s.db, "", runID, false)
}

// ListRuns reads a page of the organization's runs, newest first.
func (s *Service) ListRuns(ctx context.Context, p access.Principal, f RunFilter, page cursor.Page) ([]Run, error) {
	if err := p.Require(access.PermRunRead); err != nil {
		return nil, err
	}
	return listRuns(ctx, s.db, p.OrganizationID, f, boundaryOf(p), page)
}

// CurrentRun is the workspace's newest non-terminal run, or nil.
func (s *Service) CurrentRun(ctx context.Context, organizationID, workspaceID string) (*Run, error) {
	r, err := currentRun(ctx, s.db, workspaceID)
	if err != nil || r == nil || r.OrganizationID != organizationID {
		return nil, err
	}
	return r, nil
}

// CurrentRuns returns the current run of each of the organization's
// workspaces in workspaceIDs that has one, keyed by workspace ID, read
// through q. The caller checks who may see them.
func (s *Service) CurrentRuns(ctx context.Context, q sqlx.QueryerContext, organizationID string, workspaceIDs []string) (map[string]Run, error) {
	if len(workspaceIDs) == 0 {
		return map[string]Run{}, nil
	}
	return currentRuns(ctx, q, organizationID, workspaceIDs)
}

// Attempts lists a run's phase attempts in order, read through q.
func (s *Service) Attempts(ctx context.Context, q sqlx.QueryerContext, r Run) ([]Attempt, error) {
	return attemptsOf(ctx, q, r.ID)
}

// Approve records an approval of exactly the bound review and makes the
// apply due. The apply gate is checked here and again when the runner
// starts.
func (s *Service) Approve(ctx context.Context, tx *sqlx.Tx, p access.Principal, runID string, b Binding) (Run, error) {
	if err := p.RequireHuman(); err != nil {
		return Run{}, err
	}
	r, err := s.decidable(ctx, tx, p, runID, b)
	if err != nil {
		return Run{}, err
	}
	if r.PastApprovalDeadline(s.stamp()) {
		// The run expired at its deadline; its expiry job has not run yet.
		return Run{}, ErrActionNotAllowed
	}
	if !r.GateOpen(s.stamp()) {
		return Run{}, ErrPolicyGateClosed
	}
	if _, err := s.launch.RequireBy(ctx, tx, launch.Subject{OrganizationID: r.OrganizationID, WorkspaceID: r.WorkspaceID}, launch.AdmitApply); err != nil {
		return Run{}, err
	}
	current, err := s.currentStateID(ctx, tx, r)
	if err != nil {
		return Run{}, err
	}
	if !sameStateID(current, r.PredecessorStateVersionID) {
		// The state moved on since the plan: the plan no longer describes
		// what an apply would do.
		return Run{}, ErrStaleBinding
	}
	if r.SavePlan {
		// A saved plan joins the workspace queue only now, and only when
		// no other run holds it: it never applies beside another.
		busy, err := queueHeld(ctx, tx, r.WorkspaceID, r.ID)
		if err != nil {
			return Run{}, err
		}
		if busy {
			return Run{}, workspace.ErrLocked
		}
	}
	// The apply writes state, so the run must hold the workspace lock: a
	// lock someone else took meanwhile is released before approving.
	held, err := workspace.LockForRun(ctx, tx, r.OrganizationID, r.WorkspaceID, r.ID, s.stamp())
	if err != nil {
		return Run{}, err
	}
	if !held {
		return Run{}, workspace.ErrLocked
	}
	r = s.decide(r, p, DecisionApproved)
	approved := BindingOf(r)
	r.ApprovedBinding = &approved
	if err := s.queueAttempt(ctx, tx, r, PhaseApply, 1); err != nil {
		return Run{}, err
	}
	r = s.transition(r, StatusApplyQueued)
	if err := s.save(ctx, tx, r); err != nil {
		return Run{}, err
	}
	return r, audit.Record(ctx, tx, p, "run.approved", "run", r.ID, bindingEvidence(r))
}

// Reject records a rejection (a discard) of exactly the bound review; the
// run ends. reason is optional (the CLI gives none); when given it is
// trimmed, bounded like every reason, kept on the run and audited.
func (s *Service) Reject(ctx context.Context, tx *sqlx.Tx, p access.Principal, runID string, b Binding, reason string) (Run, error) {
	var kept *string
	if strings.TrimSpace(reason) != "" {
		valid, err := ReasonOf(reason)
		if err != nil {
			return Run{}, err
		}
		kept = &valid
	}
	r, err := s.decidable(ctx, tx, p, runID, b)
	if err != nil {
		return Run{}, err
	}
	if r, err = s.discard(ctx, tx, p, r, kept, "rejected", bindingEvidence(r)); err != nil {
		return Run{}, err
	}
	return r, s.advanceQueue(ctx, tx, r.WorkspaceID)
}

// discard ends r, which waits for a decision or for its turn and has
// nothing running, as rejected by p (HCP Terraform's discard), keeping
// reason (nil for none) on the run and in the audit event beside
// evidence. A plan that never started is canceled with its queued
// attempts. The workspace's queue is left to the caller.
func (s *Service) discard(ctx context.Context, tx *sqlx.Tx, p access.Principal, r Run, reason *string, terminalReason string, evidence map[string]any) (Run, error) {
	r = s.decide(r, p, DecisionRejected)
	r.DecisionReason = reason
	if r.PlanStatus == PhasePending {
		r.PlanStatus = PhaseCanceled
	}
	if err := cancelQueuedAttempts(ctx, tx, r.ID, s.stamp()); err != nil {
		return Run{}, err
	}
	r, err := s.end(ctx, tx, r, StatusRejected, terminalReason)
	if err != nil {
		return Run{}, err
	}
	if reason != nil {
		evidence = withReason(evidence, *reason)
	}
	return r, audit.Record(ctx, tx, p, "run.rejected", "run", r.ID, evidence)
}

// ReasonForceExecuted is the terminal reason of a run discarded because a
// later run of its workspace was force-executed.
const ReasonForceExecuted = "discarded_by_force_execute"

// ForceExecute starts a pending run at once (HCP Terraform's "Run this
// plan now"): every run ahead of it in its workspace's queue is discarded
// as a person discarding each would (decision, reason naming the forced
// run, audit event, lock release, token revocation), then its plan is
// queued, all in tx. A run ahead that is planning or applying cannot be
// skipped: ErrQueueNotDiscardable, and nothing changes. Starting a plan
// passes the new-run admission rule as creating a run does.
func (s *Service) ForceExecute(ctx context.Context, tx *sqlx.Tx, p access.Principal, runID string) (Run, error) {
	if err := p.Require(access.PermRunApprove); err != nil {
		return Run{}, err
	}
	// Visibility is read without a lock; the queue's rows are then locked
	// oldest first, the order finishing a run locks the next pending one
	// in, so a racing decision, expiry or advance waits for this one (or
	// this one for it, and then sees what it did) instead of deadlocking.
	target, err := visibleRun(ctx, tx, p, runID, access.PermRunCreate, false)
	if err != nil {
		return Run{}, err
	}
	if err := requireIn(p, target, access.PermRunApprove); err != nil {
		return Run{}, err
	}
	if target.Speculative() {
		return Run{}, ErrActionNotAllowed
	}
	queue, err := unfinishedRuns(ctx, tx, []string{target.WorkspaceID}, true)
	if err != nil {
		return Run{}, err
	}
	i := slices.IndexFunc(queue, func(r Run) bool { return r.ID == target.ID })
	if i < 0 {
		// It ended meanwhile.
		return Run{}, ErrActionNotAllowed
	}
	target = queue[i]
	ahead := Ahead(target, queue)
	if err := ForceExecutable(target, ahead); err != nil {
		return Run{}, err
	}
	// Nothing will be left ahead of it, so the workspace's ceiling counts
	// no unfinished run before it.
	rule := launch.AdmitNewRun(launch.NewRun{Region: target.Region, RunnerRelease: target.RunnerRelease})
	if _, err := s.launch.RequireBy(ctx, tx, launch.Subject{OrganizationID: target.OrganizationID, WorkspaceID: target.WorkspaceID}, rule); err != nil {
		return Run{}, err
	}
	reason := "Discarded by a force-execute of " + target.ID
	discarded := make([]string, 0, len(ahead))
	for _, r := range ahead {
		evidence := map[string]any{"workspace_id": r.WorkspaceID, "status": string(r.Status), "force_executed_run_id": target.ID}
		if _, err := s.discard(ctx, tx, p, r, &reason, ReasonForceExecuted, evidence); err != nil {
			return Run{}, err
		}
		discarded = append(discarded, r.ID)
	}
	if target, err = s.queuePlan(ctx, tx, target, 1); err != nil {
		return Run{}, err
	}
	return target, audit.Record(ctx, tx, p, "run.force_executed", "run", target.ID, map[string]any{
		"workspace_id": target.WorkspaceID, "discarded_run_ids": discarded,
	})
}

// QueuesAhead reads, through q, what stands ahead of each pending run
// among rs in its workspace's queue (see Ahead), keyed by run ID, with
// one query for all their workspaces.
func (s *Service) QueuesAhead(ctx context.Context, q sqlx.QueryerContext, rs ...Run) (map[string][]Run, error) {
	var workspaces []string
	for _, r := range rs {
		if r.Status == StatusPending && !r.Speculative() && !slices.Contains(workspaces, r.WorkspaceID) {
			workspaces = append(workspaces, r.WorkspaceID)
		}
	}
	out := map[string][]Run{}
	if len(workspaces) == 0 {
		return out, nil
	}
	unfinished, err := unfinishedRuns(ctx, q, workspaces, false)
	if err != nil {
		return nil, err
	}
	byWorkspace := map[string][]Run{}
	for _, r := range unfinished {
		byWorkspace[r.WorkspaceID] = append(byWorkspace[r.WorkspaceID], r)
	}
	for _, r := range rs {
		if r.Status == StatusPending && !r.Speculative() {
			out[r.ID] = Ahead(r, byWorkspace[r.WorkspaceID])
		}
	}
	return out, nil
}

func (s *Service) decidable(ctx context.Context, tx *sqlx.Tx, p access.Principal, runID string, b Binding) (Run, error) {
	r, err := visibleRun(ctx, tx, p, runID, access.PermRunApprove, true)
	if err != nil {
		return Run{}, err
	}
	if r.Status != StatusAwaitingApproval && r.Status != StatusPolicyOverride {
		return Run{}, ErrActionNotAllowed
	}
	if !b.Matches(r) {
		return Run{}, ErrStaleBinding
	}
	return r, nil
}

func (s *Service) currentStateID(ctx context.Context, q sqlx.QueryerContext, r Run) (*string, error) {
	current, err := currentState(ctx, q, r.WorkspaceID)
	return current.ID, err
}

func sameStateID(a, b *string) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func bindingEvidence(r Run) map[string]any {
	b := BindingOf(r)
	ev := map[string]any{"plan_digest": b.PlanDigest, "policy_result_digest": b.PolicyResultDigest,
		"dependency_lock_digest": b.DependencyLockDigest}
	if b.PredecessorStateVersionID != nil {
		ev["predecessor_state_version_id"] = *b.PredecessorStateVersionID
	}
	return ev
}

func (s *Service) decide(r Run, p access.Principal, action string) Run {
	now := s.stamp()
	kind := p.Kind
	r.DecisionAction, r.DecisionActorKind, r.DecisionActorID, r.DecidedAt = &action, &kind, &p.ID, &now
	return r
}

// Cancel ends a non-terminal run. A running plan's sandbox notices within
// a heartbeat and is stopped. A running apply is interrupted instead: the
// run stays applying until the runner has recorded what the interrupted
// apply left (the run then goes to recovery, never claiming nothing
// changed), and its run tokens are revoked here, so from now on the CLI
// cannot write state and keeps what it has as errored.tfstate, which the
// runner seals as the run's emergency state.
func (s *Service) Cancel(ctx context.Context, tx *sqlx.Tx, p access.Principal, runID string) (Run, error) {
	r, err := visibleRun(ctx, tx, p, runID, access.PermRunCancel, true)
	if err != nil {
		return Run{}, err
	}
	return s.cancel(ctx, tx, p, r)
}

// cancel cancels r, locked by the caller, as p.
func (s *Service) cancel(ctx context.Context, tx *sqlx.Tx, p access.Principal, r Run) (Run, error) {
	if !Cancelable(r.Status) || r.CancelRequested() {
		return Run{}, ErrActionNotAllowed
	}
	var err error
	r = s.decide(r, p, DecisionCanceled)
	if err := cancelQueuedAttempts(ctx, tx, r.ID, s.stamp()); err != nil {
		return Run{}, err
	}
	switch r.Status {
	case StatusApplying:
		r.UpdatedAt = s.stamp()
		if err = s.save(ctx, tx, r); err == nil {
			err = revokeRunTokens(ctx, tx, r.ID)
		}
	default:
		if r.PlanStatus == PhasePending || r.PlanStatus == PhaseRunning {
			r.PlanStatus = PhaseCanceled
		}
		if r.Status == StatusApplyQueued {
			r.ApplyStatus = PhaseCanceled
		}
		r, err = s.finish(ctx, tx, r, StatusCanceled, "canceled")
	}
	if err != nil {
		return Run{}, err
	}
	return r, audit.Record(ctx, tx, p, "run.canceled", "run", r.ID, map[string]any{"workspace_id": r.WorkspaceID, "status": string(r.Status)})
}

// ReleaseRun is a person's "Run with credentials" for a run an agent
// started: a new run of the same configuration, kind, message and options,
// created by the person (so it passes the same permission and admission
// checks as any run they start) and trusted, so it pins the workspace's
// sensitive variables and credentials and plans against its state. The
// agent's run records who released it as which run; if it has not ended,
// it is canceled first, so the two never run side by side. It keeps its
// initiator: workload-identity tokens still say an agent proposed it.
func (s *Service) ReleaseRun(ctx context.Context, tx *sqlx.Tx, p access.Principal, runID string) (Run, error) {
	if err := p.RequireHuman(); err != nil {
		return Run{}, err
	}
	if p.Kind != access.KindUser {
		return Run{}, fmt.Errorf("%w: releasing a run needs a person with run:create", fault.ErrForbidden)
	}
	r, err := visibleRun(ctx, tx, p, runID, access.PermRunRead, true)
	if err != nil {
		return Run{}, err
	}
	if !ReleasePermitted(p, r) {
		return Run{}, fmt.Errorf("%w: releasing a run needs a person with run:create", fault.ErrForbidden)
	}
	switch {
	case r.UntrustedReason == nil || *r.UntrustedReason != UntrustedAgent:
		return Run{}, ErrNotReleasable
	case r.ReleasedRunID != nil:
		return Run{}, ErrAlreadyReleased
	}
	if Cancelable(r.Status) && !r.CancelRequested() {
		if err := requireIn(p, r, access.PermRunCancel); err != nil {
			return Run{}, err
		}
		if r, err = s.cancel(ctx, tx, p, r); err != nil {
			return Run{}, err
		}
	}
	var snap inputSnapshot
	if err := json.Unmarshal(r.InputSnapshot, &snap); err != nil {
		return Run{}, fmt.Errorf("decoding input snapshot: %w", err)
	}
	toolVersion := ""
	if snap.Options != nil {
		toolVersion = snap.Options.ToolVersion
	}
	opts := r.RunOptions
	released, err := s.CreateRun(ctx, tx, p, CreateInput{WorkspaceID: r.WorkspaceID, ConfigurationVersionID: r.ConfigurationVersionID,
		Kind: r.Kind, Message: r.Message, Source: r.Source, Options: &opts, ToolVersion: toolVersion, ReleasedFrom: &r})
	if err != nil {
		return Run{}, err
	}
	now := s.stamp()
	r.ReleasedRunID, r.ReleasedByKind, r.ReleasedByID, r.ReleasedAt = &released.ID, &p.Kind, &p.ID, &now
	if err := saveRelease(ctx, tx, r); err != nil {
		return Run{}, err
	}
	return released, audit.Record(ctx, tx, p, "run.released", "run", r.ID, map[string]any{"workspace_id": r.WorkspaceID,
		"released_run_id": released.ID, "initiator": r.Initiator, "configuration_version_id": r.ConfigurationVersionID})
}

// ForceCancel ends a run whose cancel has not taken effect within
// ForceCancelCoolOff: the worker holding its attempt kills the sandbox at
// once, without the interrupt grace. An apply killed so still ends in
// recovery, never in a guess at what it changed.
func (s *Service) ForceCancel(ctx context.Context, tx *sqlx.Tx, p access.Principal, runID string) (Run, error) {
	r, err := visibleRun(ctx, tx, p, runID, access.PermRunCancel, true)
	if err != nil {
		return Run{}, err
	}
	now := s.stamp()
	if !r.ForceCancelable(now) {
		return Run{}, ErrActionNotAllowed
	}
	r.ForceCanceledAt, r.UpdatedAt = &now, now
	if err := saveRun(ctx, tx, r); err != nil {
		return Run{}, err
	}
	return r, audit.Record(ctx, tx, p, "run.force_canceled", "run", r.ID, map[string]any{"workspace_id": r.WorkspaceID, "status": string(r.Status)})
}

// revokeRunTokens ends every run token of the run at once.
func revokeRunTokens(ctx context.Context, tx *sqlx.Tx, runID string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE run_tokens SET revoked_at = now() WHERE run_id = $1 AND revoked_at IS NULL`, runID); err != nil {
		return fmt.Errorf("revoking run tokens: %w", err)
	}
	return nil
}

// cancelQueuedAttempts marks attempts that have not started as canceled;
// their jobs find that and do nothing.
func cancelQueuedAttempts(ctx context.Context, tx *sqlx.Tx, runID string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE run_attempts SET status = 'canceled', finished_at = $2,
		terminal_classification = 'canceled' WHERE run_id = $1 AND status = 'queued'`, runID, now)
	if err != nil {
		return fmt.Errorf("canceling queued attempts: %w", err)
	}
	return nil
}

// ExpireRun ends a run whose approval deadline passed without a decision.
func (s *Service) ExpireRun(ctx context.Context, tx *sqlx.Tx, runID string) (Run, error) {
	r, err := runByID(ctx, tx, "", runID, true)
	if err != nil {
		return Run{}, err
	}
	waiting := r.Status == StatusAwaitingApproval || r.Status == StatusPolicyOverride
	if !waiting || r.ApprovalDeadline == nil {
		return r, nil
	}
	if s.now().Before(*r.ApprovalDeadline) {
		// The job is due by the database's clock, which may be ahead of
		// this process's: an error makes River run it again, where ending
		// quietly would leave the run (and its workspace's queue) waiting
		// for good.
		return r, fmt.Errorf("%w: run %s waits until %s", ErrApprovalNotDue, r.ID, r.ApprovalDeadline.Format(time.RFC3339))
	}
	if r, err = s.finish(ctx, tx, r, StatusExpired, "approval_deadline_passed"); err != nil {
		return Run{}, err
	}
	_, err = audit.Append(ctx, tx, audit.Entry{OrganizationID: r.OrganizationID, Action: "run.expired",
		Actor: audit.Actor{Type: audit.ActorSystem, ID: "approval-deadline"}, TargetType: "run", TargetID: r.ID,
		Evidence: map[string]any{"workspace_id": r.WorkspaceID}})
	return r, err
}

// ReasonStateChanged is the terminal reason of a run discarded because
// its workspace's state moved after its plan.
const ReasonStateChanged = "state_changed_since_plan"

// StateFinalized implements state.Observer. Every run of the workspace
// whose plan waits for a decision was made against an older state than v
// (CommitPlan checks the state under the lock v was finalized under), so
// each is discarded in v's transaction, as HCP Terraform discards a stale
// saved plan: the plan no longer describes what its apply would do, and
// approving it would be refused anyway. The workspace queue then moves on.
func (s *Service) StateFinalized(ctx context.Context, tx *sqlx.Tx, v state.Version) error {
	waiting, err := awaitingDecision(ctx, tx, v.OrganizationID, v.WorkspaceID)
	if err != nil {
		return err
	}
	// Each was planned before v existed, so against another state.
	for _, r := range waiting {
		// The system discards; whoever published the state caused it.
		evidence := map[string]any{"workspace_id": r.WorkspaceID, "reason": ReasonStateChanged, "state_version_id": v.ID,
			"published_by_kind": v.CreatedByKind, "published_by_id": v.CreatedByID}
		if r.PredecessorStateVersionID != nil {
			evidence["predecessor_state_version_id"] = *r.PredecessorStateVersionID
		}
		if r, err = s.finish(ctx, tx, r, StatusRejected, ReasonStateChanged); err != nil {
			return err
		}
		_, err = audit.Append(ctx, tx, audit.Entry{OrganizationID: r.OrganizationID, Action: "run.discarded",
			Actor: audit.Actor{Type: audit.ActorSystem, ID: "state-change"}, TargetType: "run", TargetID: r.ID,
			Evidence: evidence})
		if err != nil {
			return err
		}
	}
	return nil
}

// PlanChanges returns the redacted plan diff artifact of a run.
func (s *Service) PlanChanges(ctx context.Context, p access.Principal, runID string) (io.ReadCloser, error) {
	r, err := s.GetRun(ctx, p, runID)
	if err != nil {
		return nil, err
	}
	return s.openArtifact(ctx, r, ArtifactPlanDiff)
}

func (s *Service) openArtifact(ctx context.Context, r Run, kind string) (io.ReadCloser, error) {
	a, err := artifactOf(ctx, s.db, r.ID, kind)
	if err != nil {
		return nil, err
	}
	return s.openArtifactRow(ctx, a)
}

func (s *Service) openArtifactRow(ctx context.Context, a Artifact) (io.ReadCloser, error) {
	blobs, err := s.storage()
	if err != nil {
		return nil, err
	}
	return blobs.Open(ctx, a.BlobKey, artifactIdentity(a.OrganizationID, a.RunID, a.Kind))
}

func artifactIdentity(organizationID, runID, kind string) string {
	return "cairn/run-artifact/" + organizationID + "/" + runID + "/" + kind
}

// ActorName resolves a decision actor's display name through q; nil when
// the principal no longer resolves in the run's organization (a person no
// longer a member, a deleted service account, or an actor kind without a
// name). organizationID "" looks the actor up in any organization. A
// failed read is an error, never a principal that does not resolve.
func (s *Service) ActorName(ctx context.Context, q sqlx.QueryerContext, organizationID, kind, actorID string) (*string, error) {
	var query string
	switch kind {
	case access.KindUser:
		query = `SELECT u.name FROM users u WHERE u.id = $1
			AND ($2 = '' OR EXISTS (SELECT 1 FROM memberships m WHERE m.user_id = u.id AND m.organization_id = $2))`
	case access.KindServiceAccount:
		query = `SELECT name FROM service_accounts WHERE id = $1 AND ($2 = '' OR organization_id = $2)`
	default:
		return nil, nil
	}
	var name string
	if err := sqlx.GetContext(ctx, q, &name, query, actorID, organizationID); err != nil {
		if isNoRows(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("resolving actor name: %w", err)
	}
	return &name, nil
}

func pqStrings(s []string) any {
	if s == nil {
		s = []string{}
	}
	return pq.StringArray(s)
}

// HexDigest renders a digest for the review, or "" when not recorded.
func HexDigest(b []byte) string { return hex.EncodeToString(b) }

// ListRunsPage reads a numbered page of runs, newest first, with the total,
// for the remote-backend protocol's page-number lists.
func (s *Service) ListRunsPage(ctx context.Context, p access.Principal, f RunFilter, number, size int) ([]Run, int, error) {
	if err := p.Require(access.PermRunRead); err != nil {
		return nil, 0, err
	}
	if f.Nothing {
		return []Run{}, 0, nil
	}
	b := boundaryOf(p)
	names := make([]string, len(f.WorkspaceNames))
	for i, n := range f.WorkspaceNames {
		names[i] = strings.ToLower(n)
	}
	where := ` FROM runs WHERE organization_id = $1 AND ($2 = '' OR workspace_id = $2) AND ($3 = '' OR project_id = $3)
		AND ($4 = '' OR workspace_id = $4) AND (cardinality($5::text[]) = 0 OR status = ANY($5::text[]))
		AND (cardinality($6::text[]) = 0 OR kind = ANY($6::text[]))
		AND (cardinality($7::text[]) = 0 OR workspace_id IN (SELECT w.id FROM workspaces w
			WHERE w.organization_id = $1 AND lower(w.cloud_name) = ANY($7::text[])))
		AND (status <> 'awaiting_approval' OR $8 = '' OR save_plan = ($8 = 'only'))
		AND ($9 OR workspace_id = ANY($10::text[]) OR project_id = ANY($11::text[]))`
	args := []any{p.OrganizationID, f.WorkspaceID, b.projectID, b.workspaceID, pqStrings(f.Statuses), pqStrings(f.Kinds), pqStrings(names),
		string(f.SavedPlans), b.scope.All, pqStrings(b.scope.WorkspaceIDs), pqStrings(b.scope.ProjectIDs)}
	var total int
	if err := s.db.GetContext(ctx, &total, `SELECT count(*)`+where, args...); err != nil {
		return nil, 0, fmt.Errorf("counting runs: %w", err)
	}
	var out []Run
	if err := s.db.SelectContext(ctx, &out, `SELECT `+runColumns+where+` ORDER BY created_at DESC, id DESC LIMIT $12 OFFSET $13`,
		append(args, size, (number-1)*size)...); err != nil {
		return nil, 0, fmt.Errorf("listing runs: %w", err)
	}
	return out, total, nil
}

// Capacity counts the organization's runs waiting for and holding a sandbox.
// The status condition lets it read only the unfinished runs' index.
func (s *Service) Capacity(ctx context.Context, organizationID string) (pending, running int, err error) {
	err = s.db.QueryRowxContext(ctx, `SELECT
		count(*) FILTER (WHERE status IN ('pending', 'plan_queued', 'apply_queued')),
		count(*) FILTER (WHERE status IN ('planning', 'applying'))
		FROM runs WHERE organization_id = $1 AND status IN ('pending', 'plan_queued', 'apply_queued', 'planning', 'applying')`,
		organizationID).Scan(&pending, &running)
	if err != nil {
		return 0, 0, fmt.Errorf("counting capacity: %w", err)
	}
	return pending, running, nil
}

// WorkspaceRuns summarizes a workspace's runs for the remote-backend
// protocol: how many there are and the newest one's ID ("" for none).
func (s *Service) WorkspaceRuns(ctx context.Context, organizationID, workspaceID string) (count int, latestID string, err error) {
	var row struct {
		Count  int     `db:"count"`
		Latest *string `db:"latest"`
	}
	// The count is kept on the workspace row (a trigger on runs), not
	// counted over its whole history on each read; the newest run is one
	// step down the workspace's newest-first index.
	if err := s.db.GetContext(ctx, &row, `SELECT
		coalesce((SELECT run_count FROM workspaces WHERE organization_id = $1 AND id = $2), 0) AS count,
		(SELECT id FROM runs WHERE organization_id = $1 AND workspace_id = $2
			ORDER BY created_at DESC, id DESC LIMIT 1) AS latest`, organizationID, workspaceID); err != nil {
		return 0, "", fmt.Errorf("summarizing runs: %w", err)
	}
	if row.Latest != nil {
		latestID = *row.Latest
	}
	return row.Count, latestID, nil
}
