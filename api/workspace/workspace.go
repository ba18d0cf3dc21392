package workspace

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Project groups workspaces inside an organization.
type Project struct {
	ID             string    `db:"id"`
	OrganizationID string    `db:"organization_id"`
	Name           string    `db:"name"`
	Description    string    `db:"description"`
	CreatedBy      string    `db:"created_by"`
	CreatedAt      time.Time `db:"created_at"`
}

// ExecutionSettings say how a workspace's runs execute. They are stored as
// immutable numbered versions.
type ExecutionSettings struct {
	ToolVersion string `db:"tool_version" json:"tool_version"`
	Region      string `db:"region" json:"region"`
	Platform    string `db:"platform" json:"platform"`
}

// Workspace is one unit of state and runs.
type Workspace struct {
	ID              string    `db:"id"`
	OrganizationID  string    `db:"organization_id"`
	ProjectID       string    `db:"project_id"`
	Name            string    `db:"name"`
	Slug            string    `db:"slug"`
	CloudName       string    `db:"cloud_name"`
	SettingsVersion int       `db:"current_settings_version"`
	CreatedBy       string    `db:"created_by"`
	CreatedAt       time.Time `db:"created_at"`
	UpdatedAt       time.Time `db:"updated_at"`
	// ExecutionMode is how the remote-backend CLI runs operations.
	ExecutionMode string `db:"execution_mode"`
	// GlobalRemoteState shares the workspace's state with the runs of every
	// workspace of its organization (sharing.go).
	GlobalRemoteState bool `db:"global_remote_state"`
	Lock
	ExecutionSettings
	// CurrentRun is the workspace's current run (nil: none), filled only
	// where CurrentRunRead says so: lists read it in the same query.
	CurrentRun     *CurrentRun `db:"-"`
	CurrentRunRead bool        `db:"-"`
}

// CurrentRun names a workspace's current run: its newest unfinished run
// that is not a saved plan waiting to be applied (the run package decides;
// see Service.ReadCurrentRuns).
type CurrentRun struct {
	ID     string
	Status string
}

// Lock is who holds a workspace's state lock, if anyone.
type Lock struct {
	LockedByKind *string    `db:"locked_by_kind"`
	LockedByID   *string    `db:"locked_by_id"`
	LockReason   string     `db:"lock_reason"`
	LockedAt     *time.Time `db:"locked_at"`
}

// Locked reports whether anyone holds the lock.
func (l Lock) Locked() bool { return l.LockedByID != nil }

// HeldBy reports whether the lock is held by exactly this holder.
func (l Lock) HeldBy(kind, id string) bool {
	return l.LockedByKind != nil && l.LockedByID != nil && *l.LockedByKind == kind && *l.LockedByID == id
}

// Execution modes of the remote-backend protocol.
const (
	ExecutionLocal  = "local"
	ExecutionRemote = "remote"
)

// DefaultProjectName is the project that workspaces created without one
// (through the remote-backend API) land in.
const DefaultProjectName = "Default Project"

// maxProjectDescription bounds a project's description (bytes).
const maxProjectDescription = 2000

// Regions a workspace may pin. Only "us" launches today; an "eu"
// workspace is accepted but never runs anywhere else.
var Regions = []string{"us", "eu"}

// Platforms a workspace may select.
var Platforms = []string{"linux_amd64", "linux_arm64"}

const (
	maxNameChars = 200
	// MaxSlugLength bounds slugs and cloud names.
	MaxSlugLength = 90
)

var (
	semver          = regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	cloudNameUnsafe = regexp.MustCompile(`[^A-Za-z0-9_-]+`)
	slugUnsafe      = regexp.MustCompile(`[^a-z0-9]+`)
)

// ValidateName checks a display name and returns it trimmed.
func ValidateName(raw string) (string, error) {
	name := strings.TrimSpace(raw)
	if name == "" || utf8.RuneCountInString(name) > maxNameChars || !utf8.ValidString(name) {
		return "", fmt.Errorf("%w: name must be 1-%d characters", ErrInvalid, maxNameChars)
	}
	return name, nil
}

// Validate checks settings against the exact offered tool versions, as
// they are pinned (ToolVersions.Pinned).
func (s ExecutionSettings) Validate(toolVersions []string) error {
	if _, v := ToolOf(s.ToolVersion); !semver.MatchString(v) || !slices.Contains(toolVersions, s.ToolVersion) {
		return fmt.Errorf("%w: tool_version must be one of %v", ErrToolVersionUnlisted, toolVersions)
	}
	if !slices.Contains(Regions, s.Region) {
		return fmt.Errorf("%w: region must be one of %v", ErrInvalid, Regions)
	}
	if !slices.Contains(Platforms, s.Platform) {
		return fmt.Errorf("%w: platform must be one of %v", ErrInvalid, Platforms)
	}
	return nil
}

// BaseSlug derives the lowercase URL slug of a name: runs of anything but
// letters and digits become one dash, at most 90 characters.
func BaseSlug(name string) string {
	s := strings.Trim(slugUnsafe.ReplaceAllString(strings.ToLower(name), "-"), "-")
	s = strings.Trim(truncate(s, MaxSlugLength), "-")
	if s == "" {
		return "workspace"
	}
	return s
}

// BaseCloudName derives the remote-backend selector of a name: the name
// itself where it is already valid for the compatibility contract
// (^[A-Za-z0-9_-]+$), otherwise with each invalid run replaced by a dash.
func BaseCloudName(name string) string {
	s := strings.Trim(cloudNameUnsafe.ReplaceAllString(name, "-"), "-")
	s = strings.Trim(truncate(s, MaxSlugLength), "-")
	if s == "" {
		return "workspace"
	}
	return s
}

// WithSuffix returns base with "-n" appended (n ≥ 2), shortened so the
// result stays within MaxSlugLength; n < 2 returns base.
func WithSuffix(base string, n int) string {
	if n < 2 {
		return base
	}
	suffix := fmt.Sprintf("-%d", n)
	return strings.TrimRight(truncate(base, MaxSlugLength-len(suffix)), "-") + suffix
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
