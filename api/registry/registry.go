package registry

import (
	"fmt"
	"net/url"
	"regexp"
	"time"
	"unicode/utf8"
)

// Registry names. Private modules live in the organization's own
// namespace; "public" is accepted only where HCP's API names it with an
// explicit namespace.
const (
	RegistryPrivate = "private"
	RegistryPublic  = "public"
)

// Module statuses.
const (
	// ModulePending has no published version yet.
	ModulePending = "pending"
	// ModuleSetupComplete has a published (ok) version.
	ModuleSetupComplete = "setup_complete"
	// ModuleSetupFailed has versions, none of them published.
	ModuleSetupFailed = "setup_failed"
	// ModuleNoVersionTags is bound to a repository in which a sync found
	// no tag to publish.
	ModuleNoVersionTags = "no_version_tags"
)

// Version statuses.
const (
	VersionPending = "pending"
	VersionOK      = "ok"
	VersionErrored = "errored"
)

// Version origins.
const (
	OriginUpload = "upload"
	OriginTag    = "tag"
)

// Limits on what a person writes.
const (
	MaxReasonChars = 1000
	MaxLinkBytes   = 2048
	// MaxArchiveBytes bounds a compressed module archive, as for a
	// configuration archive.
	MaxArchiveBytes = 100_000_000
)

// Module is one module of an organization's registry.
type Module struct {
	ID               string
	OrganizationID   string
	OrganizationName string
	RegistryName     string
	Namespace        string
	Name             string
	Provider         string
	Status           string
	// Source is the code-host binding, nil when versions are uploaded.
	Source        *Source
	VersionCount  int
	LatestVersion *string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Source binds a module to a repository of the organization's code-host
// installation: tags under TagPrefix publish versions of Directory.
type Source struct {
	InstallationID int64
	RepositoryID   int64
	Owner          string
	Repository     string
	Directory      string
	TagPrefix      string
}

// Version is one version of a module.
type Version struct {
	ID             string
	ModuleID       string
	OrganizationID string
	Version        string
	Status         string
	// ErrorCode and ErrorMessage say safely why an errored version's
	// archive was refused.
	ErrorCode     *string
	ErrorMessage  *string
	Deprecation   *Deprecation
	Revocation    *Revocation
	ArchiveSHA256 *string // hex
	ArchiveBytes  *int64
	Origin        string // OriginUpload | OriginTag
	Tag           *string
	CommitSHA     *string
	CreatedAt     time.Time
	PublishedAt   *time.Time
}

// Deprecation marks a version as one to move away from: still resolvable,
// with a warning.
type Deprecation struct {
	Reason string
	Link   string // "" when none
	At     time.Time
	By     string
}

// Revocation withdraws a deprecated version: never resolvable again.
type Revocation struct {
	Reason string
	At     time.Time
	By     string
}

// Resolvable reports whether a CLI may resolve the version.
func (v Version) Resolvable() bool { return v.Status == VersionOK && v.Revocation == nil }

// VersionOrigin is where a new version comes from: an upload (the zero
// value) or a code-host tag at a commit.
type VersionOrigin struct {
	Kind      string // OriginUpload ("" too) | OriginTag
	Tag       string
	CommitSHA string
}

// CreateModuleInput is a new module. Namespace defaults to the
// organization's name, which is the only namespace of the private
// registry.
type CreateModuleInput struct {
	RegistryName string // default private
	Namespace    string
	Name         string
	Provider     string
	Source       *Source
}

// ListModulesQuery filters and pages the module list.
type ListModulesQuery struct {
	Query        string // name contains, case-insensitively
	Provider     string
	RegistryName string
	Cursor       string
	Limit        int
}

// ListVersionsQuery pages a module's versions.
type ListVersionsQuery struct {
	Cursor string
	Limit  int
}

var (
	namePattern     = regexp.MustCompile(`^[0-9A-Za-z](?:[0-9A-Za-z_-]{0,62}[0-9A-Za-z])?$`)
	providerPattern = regexp.MustCompile(`^[0-9a-z]{1,64}$`)
)

// ValidateName checks a module name (HCP's rule).
func ValidateName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%w: name must be 1 to 64 letters, digits, '-' and '_', starting and ending with a letter or digit", ErrInvalid)
	}
	return nil
}

// ValidateProvider checks a module's provider name (HCP's rule).
func ValidateProvider(provider string) error {
	if !providerPattern.MatchString(provider) {
		return fmt.Errorf("%w: provider must be 1 to 64 lowercase letters and digits", ErrInvalid)
	}
	return nil
}

// validateDeprecation checks a deprecation's reason and link.
func validateDeprecation(reason, link string) error {
	if err := validateReason(reason); err != nil {
		return err
	}
	if link == "" {
		return nil
	}
	u, err := url.Parse(link)
	if len(link) > MaxLinkBytes || err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return fmt.Errorf("%w: link must be an https URL of at most %d bytes", ErrInvalid, MaxLinkBytes)
	}
	return nil
}

func validateReason(reason string) error {
	if !utf8.ValidString(reason) || utf8.RuneCountInString(reason) > MaxReasonChars {
		return fmt.Errorf("%w: reason must be at most %d characters", ErrInvalid, MaxReasonChars)
	}
	return nil
}

// The flag transitions, HCP's rules: only a published version is
// deprecated; restoring clears the deprecation, which a revoked version
// keeps; only a deprecated version is revoked; un-revoking leaves it
// deprecated.

// CanDeprecate reports why v cannot be deprecated, nil when it can.
// Deprecating a deprecated version replaces its reason and link.
func CanDeprecate(v Version) error {
	if v.Status != VersionOK {
		return ErrNotPublished
	}
	if v.Revocation != nil {
		return ErrRevoked
	}
	return nil
}

// CanRestore reports why v's deprecation cannot be cleared.
func CanRestore(v Version) error {
	if v.Revocation != nil {
		return ErrRevoked
	}
	if v.Deprecation == nil {
		return ErrNotDeprecated
	}
	return nil
}

// CanRevoke reports why v cannot be revoked.
func CanRevoke(v Version) error {
	if v.Status != VersionOK {
		return ErrNotPublished
	}
	if v.Revocation != nil {
		return ErrRevoked
	}
	if v.Deprecation == nil {
		return ErrNotDeprecated
	}
	return nil
}

// CanUnrevoke reports why v cannot be un-revoked.
func CanUnrevoke(v Version) error {
	if v.Revocation == nil {
		return ErrNotRevoked
	}
	return nil
}

// moduleStatusAfter is a module's status given whether it has a published
// version and any version at all. A binding that found no tags keeps
// saying so until a version exists.
func moduleStatusAfter(current string, hasOK, hasAny bool) string {
	switch {
	case hasOK:
		return ModuleSetupComplete
	case hasAny:
		return ModuleSetupFailed
	case current == ModuleNoVersionTags:
		return current
	}
	return ModulePending
}
