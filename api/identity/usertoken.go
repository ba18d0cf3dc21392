package identity

import (
	"context"
	"database/sql"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/secret"
	"github.com/cairnhq/cairn/api/team"
)

// UserTokenPrefix starts every user API token.
const UserTokenPrefix = "cut_"

// ErrInvalidToken means a presented token is unknown, revoked or expired,
// or its user no longer belongs to its organization.
var ErrInvalidToken = errors.New("invalid token")

// UserToken is a member's API token for the remote-backend protocol (what
// `tofu login` stores). It acts as the member, with the member's current
// role, in the organization it was created in; an account-wide token
// (OrganizationID empty) acts in every organization its person is a member
// of, each with that membership's live role and teams.
type UserToken struct {
	ID             string     `db:"id"`
	OrganizationID string     `db:"organization_id"`
	UserID         string     `db:"user_id"`
	Description    string     `db:"description"`
	ExpiresAt      *time.Time `db:"expires_at"`
	CreatedAt      time.Time  `db:"created_at"`
	RevokedAt      *time.Time `db:"revoked_at"`
}

var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func (s *Service) userTokenHash(plaintext string) []byte {
	return secret.TokenHash(s.opts.TokenKey, "user-token", plaintext)
}

// CreateUserToken issues a token for the signed-in member, bound to the
// active organization or, accountWide, to none. The plaintext is returned
// once and only its hash is kept.
func (s *Service) CreateUserToken(ctx context.Context, tx *sqlx.Tx, p access.Principal, description string, expiresAt *time.Time, accountWide bool) (UserToken, string, error) {
	if p.Kind != access.KindUser || p.Agent != nil {
		return UserToken{}, "", fmt.Errorf("only people hold user tokens: %w", fault.ErrForbidden)
	}
	description = strings.TrimSpace(description)
	if len(description) > 200 {
		return UserToken{}, "", fmt.Errorf("%w: description is over 200 characters", ErrInvalidInput)
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	if expiresAt != nil && !expiresAt.After(now) {
		return UserToken{}, "", fmt.Errorf("%w: expires_at must be in the future", ErrInvalidInput)
	}
	plaintext, err := secret.NewToken(UserTokenPrefix)
	if err != nil {
		return UserToken{}, "", err
	}
	t := UserToken{ID: id.New("ut"), OrganizationID: p.OrganizationID, UserID: p.ID, Description: description, ExpiresAt: expiresAt, CreatedAt: now}
	if accountWide {
		t.OrganizationID = ""
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO user_tokens (id, organization_id, user_id, token_hash, description, expires_at, created_at)
		VALUES ($1, NULLIF($2, ''), $3, $4, $5, $6, $7)`,
		t.ID, t.OrganizationID, t.UserID, s.userTokenHash(plaintext), t.Description, t.ExpiresAt, t.CreatedAt); err != nil {
		return UserToken{}, "", fmt.Errorf("inserting user token: %w", err)
	}
	return t, plaintext, audit.Record(ctx, tx, p, "user_token.created", "user_token", t.ID, map[string]any{"account_wide": accountWide})
}

// ListUserTokens reads one page of the caller's own tokens in the active
// organization and account-wide ones, revoked ones included, newest first,
// one row beyond the page. Nobody lists another member's tokens.
func (s *Service) ListUserTokens(ctx context.Context, p access.Principal, page cursor.Page) ([]UserToken, error) {
	if p.Kind != access.KindUser {
		return nil, fmt.Errorf("only people hold user tokens: %w", fault.ErrForbidden)
	}
	query := `SELECT ` + userTokenColumns + ` FROM user_tokens
		WHERE user_id = $1 AND (organization_id = $2 OR organization_id IS NULL)`
	keyset, args := page.Keyset([]any{p.ID, p.OrganizationID}, "created_at", "id")
	var out []UserToken
	if err := sqlx.SelectContext(ctx, s.db, &out, query+keyset+page.OrderLimit("created_at", "id"), args...); err != nil {
		return nil, fmt.Errorf("listing user tokens: %w", err)
	}
	return out, nil
}

// RevokeUserToken revokes one of the caller's own tokens at once.
func (s *Service) RevokeUserToken(ctx context.Context, tx *sqlx.Tx, p access.Principal, tokenID string) (UserToken, error) {
	var t UserToken
	err := tx.GetContext(ctx, &t, `
		SELECT `+userTokenColumns+` FROM user_tokens
		WHERE id = $1 AND user_id = $2 AND (organization_id = $3 OR organization_id IS NULL) FOR UPDATE`,
		tokenID, p.ID, p.OrganizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return UserToken{}, fault.ErrNotFound
	}
	if err != nil {
		return UserToken{}, fmt.Errorf("reading user token: %w", err)
	}
	if t.RevokedAt == nil {
		now := s.now().UTC().Truncate(time.Microsecond)
		if _, err := tx.ExecContext(ctx, `UPDATE user_tokens SET revoked_at = $2 WHERE id = $1`, t.ID, now); err != nil {
			return UserToken{}, fmt.Errorf("revoking user token: %w", err)
		}
		t.RevokedAt = &now
	}
	return t, audit.Record(ctx, tx, p, "user_token.revoked", "user_token", t.ID, nil)
}

// userTokenColumns reads a token row; an account-wide token's organization
// is empty.
const userTokenColumns = `id, COALESCE(organization_id, '') AS organization_id, user_id, description, expires_at, created_at, revoked_at`

// userTokenQuery is built once: every request with a user token runs it.
var userTokenQuery = `
		SELECT k.id, COALESCE(k.organization_id, '') AS organization_id, k.user_id, k.expires_at, u.name AS user_name, m.role,
		       ` + team.MemberGrantsColumn("k.organization_id", "k.user_id") + ` AS team_grants
		FROM user_tokens k
		JOIN users u ON u.id = k.user_id AND u.banned_at IS NULL
		LEFT JOIN memberships m ON m.organization_id = k.organization_id AND m.user_id = k.user_id
		WHERE k.token_hash = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
		  AND (k.organization_id IS NULL OR m.user_id IS NOT NULL)`

// AuthenticateUserToken resolves a cut_ plaintext to the member it acts as,
// with the member's live role in the token's organization. An account-wide
// token resolves to an unbound principal (Account set) that acts nowhere
// until BindAccount binds it to one of its person's memberships.
func (s *Service) AuthenticateUserToken(ctx context.Context, plaintext string) (access.Principal, error) {
	if !strings.HasPrefix(plaintext, UserTokenPrefix) || len(plaintext) > 128 {
		return access.Principal{}, ErrInvalidToken
	}
	var row struct {
		ID             string         `db:"id"`
		OrganizationID string         `db:"organization_id"`
		UserID         string         `db:"user_id"`
		ExpiresAt      sql.NullTime   `db:"expires_at"`
		UserName       string         `db:"user_name"`
		Role           sql.NullString `db:"role"`
		Grants         []byte         `db:"team_grants"`
	}
	// A bound token whose person left its organization is invalid, as a
	// revoked one is; an account-wide one needs no membership to exist.
	// A bound token's team grants come in the same round trip (an
	// account-wide one's organization, and so its grants, are known only
	// once a request binds it).
	hash := s.userTokenHash(plaintext)
	key := "user-token\x00" + string(hash)
	if p, ok := s.principals.Lookup(key); ok {
		return p, nil
	}
	ticket := s.principals.Ticket()
	err := sqlx.GetContext(ctx, s.db, &row, userTokenQuery, hash)
	if errors.Is(err, sql.ErrNoRows) {
		return access.Principal{}, ErrInvalidToken
	}
	if err != nil {
		return access.Principal{}, fmt.Errorf("reading user token: %w", err)
	}
	var p access.Principal
	if row.OrganizationID == "" {
		p = access.Principal{Kind: access.KindUser, ID: row.UserID, Name: row.UserName, TokenID: row.ID, Account: true}
	} else {
		grants, err := team.DecodeGrants(row.Grants)
		if err != nil {
			return access.Principal{}, err
		}
		p = withMembership(access.Principal{Kind: access.KindUser, ID: row.UserID, Name: row.UserName, TokenID: row.ID},
			row.OrganizationID, access.Role(row.Role.String), grants)
	}
	s.principals.Keep(ticket, key, p, row.ExpiresAt.Time)
	return p, nil
}

// BindAccount binds an account-wide principal to one organization through
// the membership its person holds there now: that membership's role and
// team grants, nothing more. Without a membership (or for any other
// principal) the organization is not found, exactly like a missing one.
func (s *Service) BindAccount(ctx context.Context, p access.Principal, organizationID string) (access.Principal, error) {
	if !p.Account || p.Kind != access.KindUser || organizationID == "" {
		return access.Principal{}, fault.ErrNotFound
	}
	role, err := membershipRole(ctx, s.db, organizationID, p.ID)
	if err != nil {
		return access.Principal{}, err
	}
	return s.boundPrincipal(ctx, access.Principal{Kind: access.KindUser, ID: p.ID, Name: p.Name, TokenID: p.TokenID}, organizationID, role)
}

// boundPrincipal completes a person's principal in one organization with
// the role's permissions and the person's team grants there.
func (s *Service) boundPrincipal(ctx context.Context, p access.Principal, organizationID string, role access.Role) (access.Principal, error) {
	grants, err := team.GrantsOf(ctx, s.db, organizationID, p.ID)
	if err != nil {
		return access.Principal{}, err
	}
	return withMembership(p, organizationID, role, grants), nil
}

// withMembership is p acting in one organization with its role there and
// its team grants.
func withMembership(p access.Principal, organizationID string, role access.Role, grants access.TeamGrants) access.Principal {
	p.OrganizationID, p.Role, p.Permissions, p.Grants = organizationID, role, access.PermissionsOf(role), grants
	return p
}

// AccountOrganizations lists the organizations an account-wide principal's
// person is a member of, by slug.
func (s *Service) AccountOrganizations(ctx context.Context, p access.Principal) ([]Organization, error) {
	if !p.Account {
		return nil, fault.ErrNotFound
	}
	out := []Organization{}
	if err := s.db.SelectContext(ctx, &out, `SELECT `+organizationColumns+` FROM organizations
		WHERE id IN (SELECT organization_id FROM memberships WHERE user_id = $1) ORDER BY slug`, p.ID); err != nil {
		return nil, fmt.Errorf("listing organizations: %w", err)
	}
	return out, nil
}

// Account reads the person behind an account-wide principal.
func (s *Service) Account(ctx context.Context, p access.Principal) (User, error) {
	if !p.Account {
		return User{}, fault.ErrNotFound
	}
	u, err := userByID(ctx, s.db, p.ID)
	if err != nil {
		return User{}, err
	}
	return u.User, nil
}
