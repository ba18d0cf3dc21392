package serviceaccount

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cairnhq/cairn/api/access"
)

// ServiceAccount is a non-human identity that holds tokens for the
// remote-backend API.
type ServiceAccount struct {
	ID             string    `db:"id"`
	OrganizationID string    `db:"organization_id"`
	Name           string    `db:"name"`
	Description    string    `db:"description"`
	CreatedBy      string    `db:"created_by"`
	CreatedAt      time.Time `db:"created_at"`
}

// Token is an issued sst_ token, without its plaintext.
type Token struct {
	ID               string     `db:"id"`
	OrganizationID   string     `db:"organization_id"`
	ServiceAccountID string     `db:"service_account_id"`
	Permissions      []string   `db:"permissions"`
	ProjectID        *string    `db:"project_id"`
	WorkspaceID      *string    `db:"workspace_id"`
	ExpiresAt        time.Time  `db:"expires_at"`
	CreatedBy        string     `db:"created_by"`
	CreatedAt        time.Time  `db:"created_at"`
	RevokedAt        *time.Time `db:"revoked_at"`
}

// Account is a service account as its managers read it: with the tokens
// issued to it, live ones first.
type Account struct {
	ServiceAccount
	Tokens []Token
	// TokensTruncated is set when the account has more tokens than
	// MaxTokensShown; the oldest revoked or expired ones are left out
	// first.
	TokensTruncated bool
}

// MaxTokensShown bounds the tokens an account read carries.
const MaxTokensShown = 100

// TokenPrefix starts every service-account token.
const TokenPrefix = "sst_"

// MaxTokenLifetime bounds a token's expiry.
const MaxTokenLifetime = 365 * 24 * time.Hour

// IssueInput is what a token is issued with.
type IssueInput struct {
	Permissions []string
	ProjectID   string
	WorkspaceID string
	ExpiresAt   time.Time
}

// validateIssue checks an issuance against the issuer: the permissions must
// be a non-empty subset of the issuer's, and the expiry in the future and
// at most a year ahead.
func validateIssue(issuer access.Principal, in IssueInput, now time.Time) (access.PermissionSet, error) {
	if len(in.Permissions) == 0 {
		return access.PermissionSet{}, fmt.Errorf("%w: permissions must not be empty", ErrInvalid)
	}
	perms, err := access.ParsePermissions(in.Permissions)
	if err != nil {
		return access.PermissionSet{}, err
	}
	if !issuer.Permissions.Contains(perms) {
		return access.PermissionSet{}, fmt.Errorf("%w: a token cannot hold permissions its issuer lacks", ErrPermissionsExceedIssuer)
	}
	if !in.ExpiresAt.After(now) || in.ExpiresAt.Sub(now) > MaxTokenLifetime {
		return access.PermissionSet{}, fmt.Errorf("%w: expires_at must be in the future and at most 365 days ahead", ErrInvalid)
	}
	return perms, nil
}

func validateName(raw string) (string, error) {
	name := strings.TrimSpace(raw)
	if name == "" || utf8.RuneCountInString(name) > 200 {
		return "", fmt.Errorf("%w: name must be 1-200 characters", ErrInvalid)
	}
	return name, nil
}
