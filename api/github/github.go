package github

import (
	"time"

	"github.com/lib/pq"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/cairnhq/cairn/api/dispatch"
)

// Installation statuses (SPEC §2). A revoked installation reads as
// not_installed.
const (
	StatusConnected    = "connected"
	StatusSuspended    = "suspended"
	StatusRevoked      = "revoked"
	StatusNotInstalled = "not_installed"
)

// Installation is an installation bound to an organization.
type Installation struct {
	InstallationID int64      `db:"installation_id"`
	OrganizationID string     `db:"organization_id"`
	AccountLogin   string     `db:"account_login"`
	AccountID      int64      `db:"account_id"`
	Status         string     `db:"status"`
	ConnectedAt    time.Time  `db:"connected_at"`
	SuspendedAt    *time.Time `db:"suspended_at"`
	RevokedAt      *time.Time `db:"revoked_at"`
	UpdatedAt      time.Time  `db:"updated_at"`
}

// InstallationStatus is what GET /v1/github/installation reports.
type InstallationStatus struct {
	Status         string
	InstallationID *int64
	AccountLogin   *string
	ConnectedAt    *time.Time
}

// Repository is a repository granted to a bound installation.
type Repository struct {
	RepositoryID   int64     `db:"repository_id"`
	InstallationID int64     `db:"installation_id"`
	OrganizationID string    `db:"organization_id"`
	Owner          string    `db:"owner"`
	Name           string    `db:"name"`
	Selected       bool      `db:"selected"`
	UpdatedAt      time.Time `db:"updated_at"`
}

// SourceSettings is one immutable version of a workspace's source.
type SourceSettings struct {
	ID                             string         `db:"id"`
	OrganizationID                 string         `db:"organization_id"`
	WorkspaceID                    string         `db:"workspace_id"`
	Version                        int            `db:"version"`
	InstallationID                 int64          `db:"installation_id"`
	RepositoryID                   int64          `db:"repository_id"`
	RepositoryOwner                string         `db:"repository_owner"`
	RepositoryName                 string         `db:"repository_name"`
	TrackedBranch                  string         `db:"tracked_branch"`
	WorkingDirectory               string         `db:"working_directory"`
	TriggerPaths                   pq.StringArray `db:"trigger_paths"`
	SpeculativeCredentialVersionID *string        `db:"speculative_credential_version_id"`
	ForkPullRequests               string         `db:"fork_pull_requests"`
	CreatedByKind                  string         `db:"created_by_kind"`
	CreatedByID                    string         `db:"created_by_id"`
	CreatedAt                      time.Time      `db:"created_at"`
}

// SourceInput is what a person saves as a workspace's source.
type SourceInput struct {
	RepositoryID                   int64
	TrackedBranch                  string
	WorkingDirectory               string
	TriggerPaths                   []string
	SpeculativeCredentialVersionID *string
	// ForkPullRequests is ForksHold (also when empty) or ForksPlan.
	ForkPullRequests string
}

// What a workspace does with pull requests from forks: hold them for a
// person to plan (the default), or plan them automatically, throttled per
// repository.
const (
	ForksHold = "hold"
	ForksPlan = "plan"
)

// Source ingestion statuses. A held ingestion waits for a person: nothing
// was downloaded and no run exists until someone plans its exact commit.
const (
	IngestionPending = "pending"
	IngestionHeld    = "held"
	IngestionReady   = "ready"
	IngestionSkipped = "skipped"
	IngestionFailed  = "failed"
)

// Why an ingestion is held (safe reason codes).
const (
	// HeldForkPullRequest: a pull request from a fork, and the workspace
	// does not plan those automatically.
	HeldForkPullRequest = "fork_pull_request"
	// HeldForkRunsThrottled: fork plans are allowed, but the repository
	// reached its fork-triggered runs of the last hour.
	HeldForkRunsThrottled = "fork_runs_throttled"
)

// ForkRunWindow is the rolling window of the per-repository fork-run
// throttle.
const ForkRunWindow = time.Hour

// Triggers of source ingestions.
const (
	TriggerPush        = "push"
	TriggerPullRequest = "pull_request"
)

// Ingestion is a workspace-scoped source ingestion.
type Ingestion struct {
	ID                     string         `db:"id"`
	OrganizationID         string         `db:"organization_id"`
	WorkspaceID            string         `db:"workspace_id"`
	Identity               string         `db:"identity"`
	SourceSettingsID       string         `db:"source_settings_id"`
	Trigger                string         `db:"trigger"`
	InstallationID         int64          `db:"installation_id"`
	RepositoryID           int64          `db:"repository_id"`
	RepositoryOwner        string         `db:"repository_owner"`
	RepositoryName         string         `db:"repository_name"`
	Ref                    string         `db:"ref"`
	HeadSHA                string         `db:"head_sha"`
	PushedPaths            pq.StringArray `db:"pushed_paths"`
	PullNumber             *int           `db:"pull_number"`
	BaseRef                *string        `db:"base_ref"`
	HeadRef                *string        `db:"head_ref"`
	Fork                   bool           `db:"fork"`
	HeadRepositoryOwner    *string        `db:"head_repository_owner"`
	HeadRepositoryName     *string        `db:"head_repository_name"`
	Status                 string         `db:"status"`
	HeldReason             *string        `db:"held_reason"`
	HeldAt                 *time.Time     `db:"held_at"`
	PlanApprovedBy         *string        `db:"plan_approved_by"`
	PlanApprovedAt         *time.Time     `db:"plan_approved_at"`
	FailureCode            *string        `db:"failure_code"`
	CommitSHA              *string        `db:"commit_sha"`
	CommitMessage          *string        `db:"commit_message"`
	ConfigurationVersionID *string        `db:"configuration_version_id"`
	ArchiveSHA256          []byte         `db:"archive_sha256"`
	// ConfigurationArtifactID is the public ID of the sealed archive: it
	// is random, so unlike the storage key it reveals no object's place.
	ConfigurationArtifactID string     `db:"configuration_artifact_id"`
	RunID                   *string    `db:"run_id"`
	CreatedAt               time.Time  `db:"created_at"`
	SettledAt               *time.Time `db:"settled_at"`
}

// WorkflowID is the ingestion's deterministic dispatch identity.
func (i Ingestion) WorkflowID() string { return WorkflowIDOf(i.ID) }

// DispatchIngestion is the workflow kind of source ingestions.
const DispatchIngestion = "source-ingestion"

// WorkflowIDOf is the dispatch identity of an ingestion ID.
func WorkflowIDOf(ingestionID string) string { return dispatch.ID(DispatchIngestion, ingestionID) }

// Plannable reports whether a person may plan the ingestion's exact head
// commit now: a held pull request from a fork.
func (i Ingestion) Plannable() bool { return i.Status == IngestionHeld && i.Fork }

// mustHold decides whether a pending ingestion is held for a person before
// anything is downloaded: a pull request from a fork that no person
// approved, in a workspace that does not plan forks automatically.
func (i Ingestion) mustHold(st SourceSettings) bool {
	return i.Fork && i.PlanApprovedBy == nil && st.ForkPullRequests != ForksPlan
}

// throttled decides whether a fork-triggered run would pass the
// repository's limit, given how many it had in the last ForkRunWindow: a
// person-approved ingestion never is.
func (i Ingestion) throttled(recent, limit int) bool {
	return i.Fork && i.PlanApprovedBy == nil && recent >= limit
}

// IngestArgs is the source-ingestion job. The ingestion row is the
// authority: a job for a settled ingestion does nothing.
type IngestArgs struct {
	IngestionID string `json:"source_ingestion_id"`
}

// QueueSources is the River queue of source ingestions.
const QueueSources = "sources"

// Kind names the job.
func (IngestArgs) Kind() string { return "source_ingestion" }

// InsertOpts makes the dispatch deterministic: one live job per
// ingestion. A finished job does not count, so a held ingestion a person
// plans, or a lost one the reconciler redelivers, gets a job again.
func (IngestArgs) InsertOpts() river.InsertOpts { return SourceJobOpts() }

// SourceJobOpts are the insert options of a job that ingests from the code
// host (a workspace's source, a registry module's tag): on the sources
// queue, retried, and unique while live by its arguments.
func SourceJobOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueSources, MaxAttempts: 12, UniqueOpts: river.UniqueOpts{ByArgs: true,
		ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
			rivertype.JobStateRunning, rivertype.JobStateScheduled}}}
}

// Delivery kinds and results of the tenant-free delivery record.
const (
	KindSource    = "source"
	KindLifecycle = "lifecycle"
	KindOther     = "other"

	ResultAccepted = "accepted"
	ResultIgnored  = "ignored"
)

// Delivery is the tenant-free record of one signed delivery.
type Delivery struct {
	DeliveryID     string         `db:"delivery_id"`
	Kind           string         `db:"kind"`
	Event          string         `db:"event"`
	Action         *string        `db:"action"`
	InstallationID *int64         `db:"installation_id"`
	RepositoryID   *int64         `db:"repository_id"`
	PayloadSHA256  []byte         `db:"payload_sha256"`
	Result         string         `db:"result"`
	Outcome        string         `db:"outcome"`
	IngestionIDs   pq.StringArray `db:"ingestion_ids"`
	ReceivedAt     time.Time      `db:"received_at"`
	SettledAt      time.Time      `db:"settled_at"`
}

// CheckTarget is where a code-host run's check run belongs: everything the
// check-run publisher needs, read from the run's source ingestion.
type CheckTarget struct {
	OrganizationID string `db:"organization_id"`
	RunID          string `db:"run_id"`
	InstallationID int64  `db:"installation_id"`
	RepositoryID   int64  `db:"repository_id"`
	Owner          string `db:"repository_owner"`
	Name           string `db:"repository_name"`
	HeadSHA        string `db:"commit_sha"`
	IngestionID    string `db:"id"`
}
