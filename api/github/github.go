package github

import (
	"time"

	"github.com/lib/pq"
	"github.com/riverqueue/river"
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
}

// Source ingestion statuses.
const (
	IngestionPending = "pending"
	IngestionReady   = "ready"
	IngestionSkipped = "skipped"
	IngestionFailed  = "failed"
)

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
	Status                 string         `db:"status"`
	FailureCode            *string        `db:"failure_code"`
	CommitSHA              *string        `db:"commit_sha"`
	CommitMessage          *string        `db:"commit_message"`
	ConfigurationVersionID *string        `db:"configuration_version_id"`
	ArchiveSHA256          []byte         `db:"archive_sha256"`
	RunID                  *string        `db:"run_id"`
	CreatedAt              time.Time      `db:"created_at"`
	SettledAt              *time.Time     `db:"settled_at"`
}

// WorkflowID is the ingestion's deterministic dispatch identity.
func (i Ingestion) WorkflowID() string { return WorkflowIDOf(i.ID) }

// WorkflowIDOf is the dispatch identity of an ingestion ID.
func WorkflowIDOf(ingestionID string) string { return "source-ingestion-" + ingestionID }

// IngestArgs is the source-ingestion job. The ingestion row is the
// authority: a job for a settled ingestion does nothing.
type IngestArgs struct {
	IngestionID string `json:"source_ingestion_id"`
}

// QueueSources is the River queue of source ingestions.
const QueueSources = "sources"

// Kind names the job.
func (IngestArgs) Kind() string { return "source_ingestion" }

// InsertOpts makes the dispatch deterministic: one job per ingestion.
func (IngestArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueSources, MaxAttempts: 12, UniqueOpts: river.UniqueOpts{ByArgs: true}}
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
