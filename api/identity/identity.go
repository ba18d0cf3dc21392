package identity

import (
	"fmt"
	"net/mail"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cairnhq/cairn/api/access"
)

// User is an account that signs in with e-mail and password.
type User struct {
	ID        string    `db:"id" json:"id"`
	Email     string    `db:"email" json:"email"`
	Name      string    `db:"name" json:"name"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

// Session is a server-side sign-in. Its token is never stored.
type Session struct {
	ID                   string    `db:"id" json:"id"`
	UserID               string    `db:"user_id" json:"user_id"`
	ActiveOrganizationID *string   `db:"active_organization_id" json:"active_organization_id"`
	CreatedAt            time.Time `db:"created_at" json:"created_at"`
	ExpiresAt            time.Time `db:"expires_at" json:"expires_at"`
	ReauthenticatedAt    time.Time `db:"reauthenticated_at" json:"reauthenticated_at"`
}

// Organization is a tenant.
type Organization struct {
	ID        string    `db:"id" json:"id"`
	Name      string    `db:"name" json:"name"`
	Slug      string    `db:"slug" json:"slug"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
	// DefaultExecutionMode is the execution mode of a workspace created
	// without one (local or remote); read only where settings are shown.
	DefaultExecutionMode string `db:"default_execution_mode" json:"-"`
	// Email is the organization's contact address ('' when none was
	// given); the remote-backend API shows it.
	Email string `db:"email" json:"-"`
	// AllowForceDeleteWorkspaces lets workspace admins, not only owners,
	// delete a workspace that still manages resources (HCP's setting of
	// that name; off by default).
	AllowForceDeleteWorkspaces bool `db:"allow_force_delete_workspaces" json:"-"`
}

// OrganizationMembership is an organization seen by one of its members.
type OrganizationMembership struct {
	Organization
	Role access.Role `db:"role" json:"role"`
}

// JoinedVia is how a person arrived in an organization.
type JoinedVia string

const (
	// JoinedByPassword covers creating the organization and accepting an
	// invitation after signing in with a password.
	JoinedByPassword JoinedVia = "password"
	// JoinedBySSO is a just-in-time membership from an SSO sign-in.
	JoinedBySSO JoinedVia = "sso"
	// JoinedBySCIM is a person provisioned by the organization's SCIM client.
	JoinedBySCIM JoinedVia = "scim"
)

// Member is a user seen from an organization.
type Member struct {
	UserID    string      `db:"user_id" json:"user_id"`
	Email     string      `db:"email" json:"email"`
	Name      string      `db:"name" json:"name"`
	Role      access.Role `db:"role" json:"role"`
	CreatedAt time.Time   `db:"created_at" json:"created_at"`
	// JoinedVia and Deactivated are named as the dashboard reads them
	// (better-auth's camelCase). A deactivated member stays listed, so
	// owners see who their identity provider switched off.
	JoinedVia   JoinedVia `db:"joined_via" json:"joinedVia"`
	Deactivated bool      `db:"deactivated" json:"deactivated"`
}

const (
	minPasswordChars = 12
	maxPasswordBytes = 1024
	maxNameChars     = 200
)

var slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// NormalizeEmail validates an address and returns its canonical (lowercase)
// form.
func NormalizeEmail(raw string) (string, error) {
	email := strings.ToLower(strings.TrimSpace(raw))
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Address != email || len(email) > 254 {
		return "", fmt.Errorf("%w: email", ErrInvalidInput)
	}
	return email, nil
}

// ValidatePassword enforces length bounds only: long passphrases are the
// point, and composition rules mostly produce predictable passwords.
func ValidatePassword(password string) error {
	if utf8.RuneCountInString(password) < minPasswordChars || len(password) > maxPasswordBytes || !utf8.ValidString(password) {
		return fmt.Errorf("%w: password must be at least %d characters", ErrInvalidInput, minPasswordChars)
	}
	return nil
}

// ValidateName checks a display name.
func ValidateName(raw string) (string, error) {
	name := strings.TrimSpace(raw)
	if name == "" || utf8.RuneCountInString(name) > maxNameChars || !utf8.ValidString(name) {
		return "", fmt.Errorf("%w: name", ErrInvalidInput)
	}
	return name, nil
}

// ValidateSlug checks an organization slug: lowercase letters, digits and
// dashes, which is also what the remote-backend protocol accepts as an
// organization name.
func ValidateSlug(slug string) error {
	if !slugPattern.MatchString(slug) {
		return fmt.Errorf("%w: slug", ErrInvalidInput)
	}
	return nil
}
