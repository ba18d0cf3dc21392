package policy

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"time"
)

// Version statuses (SPEC §3): pending until the build's completion is
// verified, then published or failed for good.
const (
	VersionPending   = "pending"
	VersionPublished = "published"
	VersionFailed    = "failed"
)

// Enforcement modes of an attachment.
const (
	ModeAdvisory      = "advisory"
	ModeSoftMandatory = "soft_mandatory"
	ModeHardMandatory = "hard_mandatory"
)

// Modes lists the enforcement modes.
var Modes = []string{ModeAdvisory, ModeSoftMandatory, ModeHardMandatory}

// Scopes of an attachment, in evaluation order.
const (
	ScopeOrganization = "organization"
	ScopeProject      = "project"
	ScopeWorkspace    = "workspace"
)

// Attachment statuses.
const (
	AttachmentActive   = "active"
	AttachmentDetached = "detached"
)

// Outcomes of a run's policy stage, weakest first. Only pass and
// advisory_failed leave the gate open by themselves.
const (
	OutcomePass           = "pass"
	OutcomeAdvisoryFailed = "advisory_failed"
	OutcomeSoftFailed     = "soft_failed"
	OutcomeHardFailed     = "hard_failed"
	OutcomeError          = "error"
)

// Result statuses of one attachment's evaluation.
const (
	ResultPassed = "passed"
	ResultFailed = "failed"
	ResultError  = "error"
)

// MaxAttachmentsPerRun bounds a run's effective list (SPEC §8).
const MaxAttachmentsPerRun = 256

// GateAlwaysOpen is the gate expiry of an outcome that needs no override.
var GateAlwaysOpen = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// Set is a stable named identity; versions carry the code.
type Set struct {
	ID             string    `db:"id"`
	OrganizationID string    `db:"organization_id"`
	Name           string    `db:"name"`
	Description    string    `db:"description"`
	LatestVersion  int       `db:"latest_version"`
	CreatedByKind  string    `db:"created_by_kind"`
	CreatedByID    string    `db:"created_by_id"`
	CreatedAt      time.Time `db:"created_at"`
}

// Version is one numbered, immutable build of a set.
type Version struct {
	ID              string  `db:"id"`
	OrganizationID  string  `db:"organization_id"`
	PolicySetID     string  `db:"policy_set_id"`
	Number          int     `db:"number"`
	WorkspaceID     string  `db:"workspace_id"`
	SettingsVersion int     `db:"settings_version"`
	ToolVersion     string  `db:"tool_version"`
	Region          string  `db:"region"`
	Status          string  `db:"status"`
	FailureCode     *string `db:"failure_code"`
	SourceIdentity  string  `db:"source_identity"`
	SourceSHA256    []byte  `db:"source_sha256"`
	SourceSize      int64   `db:"source_size"`
	// SourceArtifactID is read, never written: the source artifact row
	// carries the version's ID.
	SourceArtifactID   string     `db:"source_artifact_id"`
	BundleSHA256       []byte     `db:"bundle_sha256"`
	TestResultsSHA256  []byte     `db:"test_results_sha256"`
	TestsPassed        *int       `db:"tests_passed"`
	EngineVersion      string     `db:"engine_version"`
	CapabilitiesID     string     `db:"capabilities_id"`
	CapabilitiesSHA256 string     `db:"capabilities_sha256"`
	Entrypoint         string     `db:"entrypoint"`
	CreatedByKind      string     `db:"created_by_kind"`
	CreatedByID        string     `db:"created_by_id"`
	CreatedAt          time.Time  `db:"created_at"`
	FinishedAt         *time.Time `db:"finished_at"`
}

// Artifact kinds of a version.
const (
	ArtifactSource      = "source"
	ArtifactBundle      = "bundle"
	ArtifactTestResults = "test_results"
)

// Artifact is a sealed object of a version.
type Artifact struct {
	ID              string    `db:"id"`
	OrganizationID  string    `db:"organization_id"`
	PolicyVersionID string    `db:"policy_version_id"`
	Kind            string    `db:"kind"`
	BlobKey         string    `db:"blob_key"`
	SizeBytes       int64     `db:"size_bytes"`
	SHA256          []byte    `db:"sha256"`
	CreatedAt       time.Time `db:"created_at"`
}

// Attachment puts one published version of a set in force at a scope.
type Attachment struct {
	ID              string     `db:"id"`
	OrganizationID  string     `db:"organization_id"`
	PolicySetID     string     `db:"policy_set_id"`
	PolicyVersionID string     `db:"policy_version_id"`
	Scope           string     `db:"scope"`
	ScopeID         string     `db:"scope_id"`
	EnforcementMode string     `db:"enforcement_mode"`
	Status          string     `db:"status"`
	CreatedByKind   string     `db:"created_by_kind"`
	CreatedByID     string     `db:"created_by_id"`
	CreatedAt       time.Time  `db:"created_at"`
	DetachedAt      *time.Time `db:"detached_at"`
}

// SnapshotEntry is one attachment as a run captured it at creation.
type SnapshotEntry struct {
	RunID           string `db:"run_id"`
	Sequence        int    `db:"sequence"`
	AttachmentID    string `db:"attachment_id"`
	PolicySetID     string `db:"policy_set_id"`
	PolicyVersionID string `db:"policy_version_id"`
	Scope           string `db:"scope"`
	EnforcementMode string `db:"enforcement_mode"`
	BundleSHA256    []byte `db:"bundle_sha256"`
}

// Check statuses (SPEC §3): a check is reserved running with the plan
// evidence and completed once by the policy commit, never changed after.
const (
	CheckRunning   = "running"
	CheckCompleted = "completed"
)

// Check is a run's policy stage: the composition of its results.
type Check struct {
	ID             string `db:"id"`
	OrganizationID string `db:"organization_id"`
	RunID          string `db:"run_id"`
	// AttemptID is the plan attempt whose plan commit reserved the check;
	// nil for checks recorded before checks were reserved.
	AttemptID *string `db:"attempt_id"`
	Status    string  `db:"status"`
	// PlanDigest is the plan the check is bound to from its reservation.
	PlanDigest []byte `db:"plan_digest"`
	// InputDigest, CompositionDigest and Outcome are empty while the check
	// is running; the input digest stays nil for a check evaluated without
	// an input (no attachments, a configuration error).
	InputDigest        []byte     `db:"input_digest"`
	CompositionDigest  []byte     `db:"composition_digest"`
	Outcome            string     `db:"outcome"`
	ConfigurationError *string    `db:"configuration_error"`
	Attachments        int        `db:"attachments"`
	DurationMS         int        `db:"duration_ms"`
	ReservedAt         time.Time  `db:"reserved_at"`
	EvaluatedAt        *time.Time `db:"evaluated_at"`
}

// Completed reports whether the check's evaluation was recorded.
func (c Check) Completed() bool { return c.Status == CheckCompleted }

// Result is one attachment's persisted evaluation.
type Result struct {
	ID              string          `db:"id"`
	CheckID         string          `db:"check_id"`
	RunID           string          `db:"run_id"`
	Sequence        int             `db:"sequence"`
	AttachmentID    string          `db:"attachment_id"`
	PolicySetID     string          `db:"policy_set_id"`
	PolicyVersionID string          `db:"policy_version_id"`
	Scope           string          `db:"scope"`
	EnforcementMode string          `db:"enforcement_mode"`
	Status          string          `db:"status"`
	ErrorCode       *string         `db:"error_code"`
	Findings        json.RawMessage `db:"findings"`
	InputDigest     []byte          `db:"input_digest"`
	ResultDigest    []byte          `db:"result_digest"`
	DurationMS      int             `db:"duration_ms"`
}

// Override is an immutable, expiring waiver of one soft-failed result.
type Override struct {
	ID                 string    `db:"id"`
	OrganizationID     string    `db:"organization_id"`
	RunID              string    `db:"run_id"`
	PolicyResultID     string    `db:"policy_result_id"`
	PlanDigest         []byte    `db:"plan_digest"`
	PolicyVersionID    string    `db:"policy_version_id"`
	PolicyResultDigest []byte    `db:"policy_result_digest"`
	Justification      string    `db:"justification"`
	ExpiresAt          time.Time `db:"expires_at"`
	ActorKind          string    `db:"actor_kind"`
	ActorID            string    `db:"actor_id"`
	RequestID          string    `db:"request_id"`
	CreatedAt          time.Time `db:"created_at"`
}

// Compose is the outcome of a set of results (SPEC §3): any error wins, then
// the strongest mode with findings. A configuration error is an error.
func Compose(results []Result, configurationError bool) string {
	if configurationError {
		return OutcomeError
	}
	outcome := OutcomePass
	rank := func(o string) int {
		return slices.Index([]string{OutcomePass, OutcomeAdvisoryFailed, OutcomeSoftFailed, OutcomeHardFailed, OutcomeError}, o)
	}
	for _, r := range results {
		candidate := OutcomePass
		switch {
		case r.Status == ResultError:
			candidate = OutcomeError
		case r.Status == ResultFailed && r.EnforcementMode == ModeHardMandatory:
			candidate = OutcomeHardFailed
		case r.Status == ResultFailed && r.EnforcementMode == ModeSoftMandatory:
			candidate = OutcomeSoftFailed
		case r.Status == ResultFailed:
			candidate = OutcomeAdvisoryFailed
		}
		if rank(candidate) > rank(outcome) {
			outcome = candidate
		}
	}
	return outcome
}

// GateOpensOnItsOwn reports whether an outcome lets an applyable run go to
// approval without overrides.
func GateOpensOnItsOwn(outcome string) bool {
	return outcome == OutcomePass || outcome == OutcomeAdvisoryFailed
}

// Overridable reports whether a result is a current soft failure, the only
// kind an override may waive.
func (r Result) Overridable() bool {
	return r.Status == ResultFailed && r.EnforcementMode == ModeSoftMandatory
}

// GateUntil is until when overrides open the gate of a soft-failed check:
// every overridable result needs an unexpired override bound to the run's
// plan, and the gate closes when the first of those needed overrides
// expires. nil means closed.
func GateUntil(results []Result, overrides []Override, planDigest []byte, now time.Time) *time.Time {
	var until *time.Time
	for _, r := range results {
		if !r.Overridable() {
			continue
		}
		var best *time.Time
		for _, o := range overrides {
			if o.PolicyResultID != r.ID || string(o.PolicyResultDigest) != string(r.ResultDigest) ||
				string(o.PlanDigest) != string(planDigest) || o.PolicyVersionID != r.PolicyVersionID || !o.ExpiresAt.After(now) {
				continue
			}
			if best == nil || o.ExpiresAt.After(*best) {
				best = &o.ExpiresAt
			}
		}
		if best == nil {
			return nil
		}
		if until == nil || best.Before(*until) {
			until = best
		}
	}
	return until
}

// CompatibilityStatus is the remote-backend policy-check status of an
// outcome, given whether overrides currently open the gate.
func CompatibilityStatus(outcome string, overridden bool) string {
	switch outcome {
	case OutcomePass, OutcomeAdvisoryFailed:
		return "passed"
	case OutcomeSoftFailed:
		if overridden {
			return "overridden"
		}
		return "soft_failed"
	case OutcomeHardFailed:
		return "hard_failed"
	default:
		return "errored"
	}
}

// digest is SHA-256 over a canonical JSON document. encoding/json sorts map
// keys and keeps struct field order, which makes the bytes deterministic.
func digest(doc any) []byte {
	b, err := json.Marshal(doc)
	if err != nil {
		// Every document digested here is built from strings, numbers and
		// already-validated JSON; a failure is a programming error.
		panic("policy: digest of unencodable document: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// PublicFinding is what clients see of a finding: never its details.
type PublicFinding struct {
	ID              string `json:"id"`
	Title           string `json:"title"`
	Message         string `json:"message"`
	ResourceAddress string `json:"resource_address"`
}

// PublicFindings decodes only the shown fields of a result's stored
// findings, so details never leave the database.
func PublicFindings(raw json.RawMessage) []PublicFinding {
	out := []PublicFinding{}
	_ = json.Unmarshal(raw, &out)
	return out
}
