package team

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/secret"
)

// TokenPrefix starts every team API token.
const TokenPrefix = "ctt_"

// tokenYears is how long a team token lives when no expiry is asked for
// (HCP Terraform's default).
const tokenYears = 2

// tokenHashPurpose separates team token hashes from every other token
// hashed with the same key.
const tokenHashPurpose = "team-token"

// Token is a team's API token (HCP's single "team token"): it acts as the
// team, with exactly the team's grants as they are at each request. The
// plaintext is shown once, when it is created; only its keyed hash is
// kept.
type Token struct {
	ID             string     `db:"id"`
	OrganizationID string     `db:"organization_id"`
	TeamID         string     `db:"team_id"`
	CreatedByKind  string     `db:"created_by_kind"`
	CreatedBy      string     `db:"created_by"`
	CreatedAt      time.Time  `db:"created_at"`
	ExpiresAt      time.Time  `db:"expires_at"`
	LastUsedAt     *time.Time `db:"last_used_at"`
}

// Tokens issues, revokes and authenticates team API tokens.
type Tokens struct {
	db    *sqlx.DB
	teams *Service
	key   []byte
	now   func() time.Time
}

// NewTokens returns the team token service; key keys the stored hashes.
func NewTokens(conn *sqlx.DB, teams *Service, key []byte) *Tokens {
	return &Tokens{db: conn, teams: teams, key: key, now: time.Now}
}

func (s *Tokens) hash(plaintext string) []byte {
	return secret.TokenHash(s.key, tokenHashPurpose, plaintext)
}

// tokenTeam loads (and with forUpdate locks) a team whose token the
// principal may manage: the owners team's only an owner's (its token holds
// every permission); another team's a team:manage holder's, or a member's
// when the team allows member token management. Agents never hold
// credentials of their own making.
func (s *Tokens) tokenTeam(ctx context.Context, q sqlx.QueryerContext, p access.Principal, teamID string, forUpdate bool) (Team, error) {
	if err := p.RequireHuman(); err != nil {
		return Team{}, err
	}
	t, err := s.teams.visibleTeam(ctx, q, p, teamID, forUpdate)
	if err != nil {
		return Team{}, err
	}
	if t.Owners {
		return t, requireOwner(ctx, q, p, t)
	}
	if p.Require(access.PermTeamManage) == nil {
		return t, nil
	}
	if p.Kind == access.KindUser && t.AllowMemberTokenManagement {
		in, err := isTeamMember(ctx, q, t.ID, p.ID)
		if err != nil || in {
			return t, err
		}
	}
	return Team{}, fmt.Errorf("%w: missing %s", fault.ErrForbidden, access.PermTeamManage)
}

// Create issues a new token for a team, replacing the one it had. A nil
// expiry is two years from now. The plaintext is returned only here.
func (s *Tokens) Create(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID string, expiresAt *time.Time) (Token, string, error) {
	t, err := s.tokenTeam(ctx, tx, p, teamID, true)
	if err != nil {
		return Token{}, "", err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	expiry := now.AddDate(tokenYears, 0, 0)
	if expiresAt != nil {
		if !expiresAt.After(now) {
			return Token{}, "", fmt.Errorf("%w: expired-at must be in the future", ErrInvalid)
		}
		expiry = expiresAt.UTC()
	}
	if _, err := s.revoke(ctx, tx, p, t.ID, "replaced"); err != nil && !errors.Is(err, fault.ErrNotFound) {
		return Token{}, "", err
	}
	plaintext, err := secret.NewToken(TokenPrefix)
	if err != nil {
		return Token{}, "", err
	}
	kind, by := p.Kind, p.ID
	tok := Token{ID: id.New("at"), OrganizationID: t.OrganizationID, TeamID: t.ID, CreatedByKind: kind, CreatedBy: by,
		CreatedAt: now, ExpiresAt: expiry}
	if _, err := tx.ExecContext(ctx, `INSERT INTO team_tokens
		(id, organization_id, team_id, token_hash, created_by_kind, created_by, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		tok.ID, tok.OrganizationID, tok.TeamID, s.hash(plaintext), tok.CreatedByKind, tok.CreatedBy, tok.CreatedAt, tok.ExpiresAt); err != nil {
		return Token{}, "", fmt.Errorf("inserting team token: %w", err)
	}
	return tok, plaintext, audit.Record(ctx, tx, p, "team_token.created", "team_token", tok.ID,
		map[string]any{"team_id": t.ID, "expires_at": expiry.Format(time.RFC3339)})
}

// revoke deletes a team's token, if it has one, with its audit evidence.
func (s *Tokens) revoke(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID, reason string) (Token, error) {
	var tok Token
	err := tx.GetContext(ctx, &tok, `DELETE FROM team_tokens WHERE team_id = $1
		RETURNING id, organization_id, team_id, created_by_kind, created_by, created_at, expires_at, last_used_at`, teamID)
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, fault.ErrNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("deleting team token: %w", err)
	}
	return tok, audit.Record(ctx, tx, p, "team_token.revoked", "team_token", tok.ID,
		map[string]any{"team_id": teamID, "reason": reason})
}

// Revoke deletes a team's token at once; a team without one is not found.
func (s *Tokens) Revoke(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID string) (Token, error) {
	t, err := s.tokenTeam(ctx, tx, p, teamID, true)
	if err != nil {
		return Token{}, err
	}
	return s.revoke(ctx, tx, p, t.ID, "revoked")
}

// Get reads a team's token (never its plaintext).
func (s *Tokens) Get(ctx context.Context, p access.Principal, teamID string) (Token, error) {
	t, err := s.tokenTeam(ctx, s.db, p, teamID, false)
	if err != nil {
		return Token{}, err
	}
	var tok Token
	err = sqlx.GetContext(ctx, s.db, &tok, `SELECT id, organization_id, team_id, created_by_kind, created_by, created_at,
		expires_at, last_used_at FROM team_tokens WHERE team_id = $1`, t.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, fault.ErrNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("reading team token: %w", err)
	}
	return tok, nil
}

// tokenOrders are the sort keys of a token list (HCP's, a leading "-"
// reverses), mapped to SQL; anything else is refused.
var tokenOrders = map[string]string{
	"": "k.created_at, k.id", "team-name": "lower(t.name), k.id", "-team-name": "lower(t.name) DESC, k.id DESC",
	"expired-at": "k.expires_at, k.id", "-expired-at": "k.expires_at DESC, k.id DESC",
	"created-at": "k.created_at, k.id", "-created-at": "k.created_at DESC, k.id DESC",
}

// List reads the organization's team tokens (never a plaintext) for a
// team:manage holder: those of teams whose name contains query, in the
// order sort names.
func (s *Tokens) List(ctx context.Context, p access.Principal, query, sort string) ([]Token, error) {
	if err := p.Require(access.PermTeamManage); err != nil {
		return nil, err
	}
	order, ok := tokenOrders[sort]
	if !ok {
		return nil, fmt.Errorf("%w: sort must be one of team-name, expired-at, created-at, optionally with a leading -", ErrInvalid)
	}
	out := []Token{}
	err := sqlx.SelectContext(ctx, s.db, &out, `SELECT k.id, k.organization_id, k.team_id, k.created_by_kind, k.created_by,
		k.created_at, k.expires_at, k.last_used_at
		FROM team_tokens k JOIN teams t ON t.id = k.team_id
		WHERE k.organization_id = $1 AND ($2 = '' OR strpos(lower(t.name), lower($2)) > 0)
		ORDER BY `+order, p.OrganizationID, query)
	if err != nil {
		return nil, fmt.Errorf("listing team tokens: %w", err)
	}
	return out, nil
}

// TeamOf returns the team a token ID of the principal's organization
// belongs to; another organization's token is not found.
func (s *Tokens) TeamOf(ctx context.Context, p access.Principal, tokenID string) (string, error) {
	var teamID string
	err := sqlx.GetContext(ctx, s.db, &teamID, `SELECT team_id FROM team_tokens WHERE organization_id = $1 AND id = $2`,
		p.OrganizationID, tokenID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fault.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading team token: %w", err)
	}
	return teamID, nil
}

// nonOwnersCeiling is the most a team token other than the owners team's
// may hold: it never manages teams, whatever its team's flags.
var nonOwnersCeiling = access.NewPermissionSet(slices.DeleteFunc(access.AllPermissions(), func(p access.Permission) bool {
	return p == access.PermTeamManage || p == access.PermTeamOrganizationAccess
})...)

// ErrInvalidToken means a presented team token is unknown, expired or
// revoked, or its team is gone.
var ErrInvalidToken = errors.New("invalid team token")

// teamTokenQuery is built once: every request with a team token runs it.
var teamTokenQuery = `SELECT k.id, k.organization_id, k.team_id, t.name, t.owners,
		       ` + teamGrantsColumn("k.organization_id", "k.team_id") + ` AS team_grants
		FROM team_tokens k JOIN teams t ON t.id = k.team_id AND t.organization_id = k.organization_id
		WHERE k.token_hash = $1 AND k.expires_at > now()`

// Authenticate resolves a team token to its team: a principal with no role
// baseline (only organization:read) whose permissions are the team's
// grants and organization access, read now (a revoked grant or a deleted team narrows or ends it
// on the next request).
func (s *Tokens) Authenticate(ctx context.Context, plaintext string) (access.Principal, error) {
	if !strings.HasPrefix(plaintext, TokenPrefix) || len(plaintext) > 128 || len(s.key) == 0 {
		return access.Principal{}, ErrInvalidToken
	}
	var row struct {
		ID             string `db:"id"`
		OrganizationID string `db:"organization_id"`
		TeamID         string `db:"team_id"`
		Name           string `db:"name"`
		Owners         bool   `db:"owners"`
		Grants         []byte `db:"team_grants"`
	}
	err := sqlx.GetContext(ctx, s.db, &row, teamTokenQuery, s.hash(plaintext))
	if errors.Is(err, sql.ErrNoRows) {
		return access.Principal{}, ErrInvalidToken
	}
	if err != nil {
		return access.Principal{}, fmt.Errorf("reading team token: %w", err)
	}
	grants, err := DecodeGrants(row.Grants)
	if err != nil {
		return access.Principal{}, err
	}
	if !row.Owners {
		grants = grants.Within(nonOwnersCeiling)
	}
	// organization:read is what belonging to the organization means (the
	// CLI reads the entitlement set first); it reaches no workspace.
	return access.Principal{Kind: access.KindTeam, ID: row.TeamID, Name: row.Name, OrganizationID: row.OrganizationID,
		Permissions: access.NewPermissionSet(access.PermOrganizationRead), Grants: grants, TokenID: row.ID}, nil
}
