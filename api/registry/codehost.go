package registry

import (
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/cairnhq/cairn/api/dispatch"
	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/platform/fault"
)

// Module ingestion statuses. An ingestion publishes the version one tag
// of a bound repository names, once.
const (
	IngestionPending   = "pending"
	IngestionPublished = "published"
	IngestionErrored   = "errored"
	IngestionSkipped   = "skipped"
)

// What created an ingestion.
const (
	TriggerTagPush = "tag_push"
	TriggerSync    = "sync"
)

// Why a tag publishes nothing (safe reason codes, also delivery outcomes).
const (
	// ReasonNoBoundModule: no module is bound to the pushed repository.
	ReasonNoBoundModule = "no_bound_module"
	// ReasonTagNotSemver: no bound module's tag prefix leaves a
	// v?MAJOR.MINOR.PATCH[-pre][+build] version of the tag.
	ReasonTagNotSemver = "tag_not_semver"
	// ReasonAlreadyIngested: the module already has an ingestion of the tag.
	ReasonAlreadyIngested = "already_ingested"
	// ReasonVersionExists: the module has the version from elsewhere (an
	// upload, another tag).
	ReasonVersionExists = "version_exists"
	// ReasonTagNotFound: the tag no longer exists at the code host.
	ReasonTagNotFound = "tag_not_found"
	// ReasonTagMoved: the tag names another object than when it was seen.
	ReasonTagMoved = "tag_moved"
	// ReasonDirectoryMissing: the bound directory has no files at the commit.
	ReasonDirectoryMissing = "directory_missing"
	// ReasonArchiveTooLarge: the commit's archive is over the limit.
	ReasonArchiveTooLarge = "archive_too_large"
	// ReasonArchiveUnreadable: the provider's archive is not a gzip tar.
	ReasonArchiveUnreadable = "archive_unreadable"
)

// MaxTagPrefixBytes bounds a binding's tag prefix.
const MaxTagPrefixBytes = 100

// Ingestion publishes one tag of a bound repository as a version of one
// module. The binding is copied from the module when it is created.
type Ingestion struct {
	ID              string     `db:"id"`
	OrganizationID  string     `db:"organization_id"`
	ModuleID        string     `db:"module_id"`
	Trigger         string     `db:"trigger"`
	DeliveryID      *string    `db:"delivery_id"`
	InstallationID  int64      `db:"installation_id"`
	RepositoryID    int64      `db:"repository_id"`
	RepositoryOwner string     `db:"repository_owner"`
	RepositoryName  string     `db:"repository_name"`
	Directory       string     `db:"directory"`
	Tag             string     `db:"tag"`
	ObjectSHA       string     `db:"object_sha"`
	CommitSHA       *string    `db:"commit_sha"`
	Version         string     `db:"version"`
	Status          string     `db:"status"`
	ErrorCode       *string    `db:"error_code"`
	ErrorMessage    *string    `db:"error_message"`
	VersionID       *string    `db:"version_id"`
	CreatedAt       time.Time  `db:"created_at"`
	SettledAt       *time.Time `db:"settled_at"`
}

// DispatchIngestion is the workflow kind of module ingestions.
const DispatchIngestion = "module-ingestion"

// IngestionWorkflowID is the deterministic dispatch identity of a module
// ingestion: module-ingestion-{id}.
func IngestionWorkflowID(ingestionID string) string {
	return dispatch.ID(DispatchIngestion, ingestionID)
}

// IngestArgs is the module-ingestion job. The ingestion row is the
// authority: a job for a settled ingestion does nothing.
type IngestArgs struct {
	IngestionID string `json:"module_ingestion_id"`
}

// Kind names the job.
func (IngestArgs) Kind() string { return "module_ingestion" }

// InsertOpts make the dispatch deterministic: one live job per ingestion
// (on the code host's queue, which every worker with the app serves).
func (IngestArgs) InsertOpts() river.InsertOpts { return github.SourceJobOpts() }

// TagVersion is the version a tag publishes under a binding's prefix:
// the tag must be the prefix followed by v?MAJOR.MINOR.PATCH[-pre][+build]
// (the leading "v" is dropped; the rest is kept byte for byte).
func TagVersion(prefix, tag string) (string, bool) {
	rest, ok := strings.CutPrefix(tag, prefix)
	if !ok {
		return "", false
	}
	rest = strings.TrimPrefix(rest, "v")
	if _, err := ParseSemver(rest); err != nil {
		return "", false
	}
	return rest, true
}

// SourceInput binds a module to a repository (RepositoryID nil unbinds).
type SourceInput struct {
	RepositoryID *int64
	Directory    string
	TagPrefix    string
}

// validateTagPrefix checks a binding's tag prefix: at most
// MaxTagPrefixBytes of what a git reference name may hold.
func validateTagPrefix(prefix string) error {
	bad := len(prefix) > MaxTagPrefixBytes || strings.HasPrefix(prefix, "/") || strings.HasPrefix(prefix, "-") ||
		strings.HasPrefix(prefix, ".") || strings.Contains(prefix, "..") || strings.Contains(prefix, "//") ||
		strings.Contains(prefix, "@{") || strings.Contains(prefix, "/.")
	for _, r := range prefix {
		if r <= 0x20 || r >= 0x7f || strings.ContainsRune("~^:?*[\\", r) {
			bad = true
		}
	}
	if bad {
		return fmt.Errorf("%w: tag_prefix must be at most %d bytes of a git tag name", ErrInvalid, MaxTagPrefixBytes)
	}
	return nil
}

// SkippedTag is a tag a sync did not start publishing, and why.
type SkippedTag struct {
	Tag    string
	Reason string
}

// SyncResult is what a sync did: the versions it started publishing (in
// semver order) and the matching tags it left alone.
type SyncResult struct {
	Published []string
	Skipped   []SkippedTag
}

var (
	// ErrNotBound: the module is not bound to a repository (sync needs
	// one).
	ErrNotBound = fmt.Errorf("module is not bound to a repository: %w", fault.ErrConflict)
	// ErrSourceUnavailable: the module's repository is no longer selected
	// in the organization's connected installation.
	ErrSourceUnavailable = fmt.Errorf("module's repository is not selected in the organization's installation: %w",
		fault.ErrConflict)
)
