package oauth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/team"
)

type clientRow struct {
	Client
	RedirectURIs pq.StringArray `db:"redirect_uris"`
	GrantTypes   pq.StringArray `db:"grant_types"`
	Scopes       pq.StringArray `db:"scopes"`
	SecretHash   []byte         `db:"secret_hash"`
}

func (r clientRow) client() Client {
	c := r.Client
	c.RedirectURIs, c.GrantTypes, c.Scopes, c.secretHash = r.RedirectURIs, r.GrantTypes, r.Scopes, r.SecretHash
	return c
}

const clientColumns = `id, kind, name, client_uri, redirect_uris, grant_types, scopes, token_endpoint_auth_method, secret_hash, created_at, refresh_after`

func insertClient(ctx context.Context, q sqlx.ExtContext, c Client, secretHash []byte) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO oauth_clients (id, kind, name, client_uri, redirect_uris, grant_types, scopes, token_endpoint_auth_method, secret_hash, created_at, refresh_after)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		c.ID, c.Kind, c.Name, c.URI, pq.Array(c.RedirectURIs), pq.Array(c.GrantTypes), pq.Array(c.Scopes),
		c.TokenEndpointAuthMethod, secretHash, c.CreatedAt, c.RefreshAfter)
	if err != nil {
		return fmt.Errorf("inserting oauth client: %w", err)
	}
	return nil
}

// saveMetadataClient stores or refreshes a metadata-document client.
func saveMetadataClient(ctx context.Context, q sqlx.ExtContext, c Client) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO oauth_clients (id, kind, name, client_uri, redirect_uris, grant_types, scopes, token_endpoint_auth_method, created_at, refresh_after)
		VALUES ($1, 'metadata_document', $2, $3, $4, $5, $6, 'none', $7, $8)
		ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, client_uri = EXCLUDED.client_uri,
			redirect_uris = EXCLUDED.redirect_uris, grant_types = EXCLUDED.grant_types, scopes = EXCLUDED.scopes,
			refresh_after = EXCLUDED.refresh_after
		WHERE oauth_clients.kind = 'metadata_document'`,
		c.ID, c.Name, c.URI, pq.Array(c.RedirectURIs), pq.Array(c.GrantTypes), pq.Array(c.Scopes), c.CreatedAt, c.RefreshAfter)
	if err != nil {
		return fmt.Errorf("saving client metadata: %w", err)
	}
	return nil
}

func clientByID(ctx context.Context, q sqlx.QueryerContext, clientID string) (Client, error) {
	var r clientRow
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+clientColumns+` FROM oauth_clients WHERE id = $1`, clientID)
	if errors.Is(err, sql.ErrNoRows) {
		return Client{}, fault.ErrNotFound
	}
	if err != nil {
		return Client{}, fmt.Errorf("reading oauth client: %w", err)
	}
	return r.client(), nil
}

type grantRow struct {
	Grant
	Scopes pq.StringArray `db:"scopes"`
}

func (r grantRow) grant() Grant {
	g := r.Grant
	g.Scopes = r.Scopes
	return g
}

const grantColumns = `g.id, g.client_id, g.organization_id, g.user_id, g.scopes, g.resource, g.created_at, g.last_used_at, g.expires_at, g.revoked_at`

func insertGrant(ctx context.Context, q sqlx.ExtContext, g Grant) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO oauth_grants (id, client_id, organization_id, user_id, scopes, resource, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		g.ID, g.ClientID, g.OrganizationID, g.UserID, pq.Array(g.Scopes), g.Resource, g.CreatedAt, g.ExpiresAt)
	if err != nil {
		return fmt.Errorf("inserting oauth grant: %w", err)
	}
	return nil
}

func lockGrant(ctx context.Context, q sqlx.QueryerContext, grantID string) (Grant, error) {
	var r grantRow
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+grantColumns+` FROM oauth_grants g WHERE g.id = $1 FOR UPDATE`, grantID)
	if errors.Is(err, sql.ErrNoRows) {
		return Grant{}, fault.ErrNotFound
	}
	if err != nil {
		return Grant{}, fmt.Errorf("reading oauth grant: %w", err)
	}
	return r.grant(), nil
}

func revokeGrantRow(ctx context.Context, q sqlx.ExtContext, grantID, reason string, at time.Time) error {
	_, err := q.ExecContext(ctx, `
		UPDATE oauth_grants SET revoked_at = $2, revoked_reason = $3 WHERE id = $1 AND revoked_at IS NULL`, grantID, at, reason)
	if err != nil {
		return fmt.Errorf("revoking oauth grant: %w", err)
	}
	return nil
}

// touchGrant records an issuance: the grant was used now and lives until
// its newest code or token expires.
func touchGrant(ctx context.Context, q sqlx.ExtContext, grantID string, at, expiresAt time.Time) error {
	_, err := q.ExecContext(ctx, `
		UPDATE oauth_grants SET last_used_at = $2, expires_at = greatest(expires_at, $3) WHERE id = $1`, grantID, at, expiresAt)
	if err != nil {
		return fmt.Errorf("updating oauth grant: %w", err)
	}
	return nil
}

func insertCode(ctx context.Context, q sqlx.ExtContext, code codeRow, codeHash []byte) error {
	var nonce *string
	if code.Nonce != "" {
		nonce = &code.Nonce
	}
	_, err := q.ExecContext(ctx, `
		INSERT INTO oauth_authorization_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at, nonce, auth_time)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, codeHash, code.GrantID, code.RedirectURI, code.CodeChallenge, code.ExpiresAt, nonce, code.AuthTime)
	if err != nil {
		return fmt.Errorf("inserting authorization code: %w", err)
	}
	return nil
}

// codeRow is an authorization code's row. Nonce and AuthTime are what an
// ID token needs (codes from before OpenID Connect have neither).
type codeRow struct {
	GrantID       string     `db:"grant_id"`
	RedirectURI   string     `db:"redirect_uri"`
	CodeChallenge string     `db:"code_challenge"`
	ExpiresAt     time.Time  `db:"expires_at"`
	UsedAt        *time.Time `db:"used_at"`
	Nonce         string     `db:"nonce"`
	AuthTime      *time.Time `db:"auth_time"`
}

func lockCode(ctx context.Context, q sqlx.QueryerContext, codeHash []byte) (codeRow, error) {
	var r codeRow
	err := sqlx.GetContext(ctx, q, &r, `
		SELECT grant_id, redirect_uri, code_challenge, expires_at, used_at, coalesce(nonce, '') AS nonce, auth_time
		FROM oauth_authorization_codes WHERE code_hash = $1 FOR UPDATE`, codeHash)
	if errors.Is(err, sql.ErrNoRows) {
		return codeRow{}, fault.ErrNotFound
	}
	if err != nil {
		return codeRow{}, fmt.Errorf("reading authorization code: %w", err)
	}
	return r, nil
}

func markCodeUsed(ctx context.Context, q sqlx.ExtContext, codeHash []byte, at time.Time) error {
	if _, err := q.ExecContext(ctx, `UPDATE oauth_authorization_codes SET used_at = $2 WHERE code_hash = $1`, codeHash, at); err != nil {
		return fmt.Errorf("using authorization code: %w", err)
	}
	return nil
}

func insertAccessToken(ctx context.Context, q sqlx.ExtContext, tokenID string, tokenHash []byte, grantID string, scopes []string, at, expiresAt time.Time) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO oauth_access_tokens (id, token_hash, grant_id, scopes, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, tokenID, tokenHash, grantID, pq.Array(scopes), at, expiresAt)
	if err != nil {
		return fmt.Errorf("inserting access token: %w", err)
	}
	return nil
}

func insertRefreshToken(ctx context.Context, q sqlx.ExtContext, tokenID string, tokenHash []byte, grantID string, scopes []string, at, expiresAt time.Time) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO oauth_refresh_tokens (id, token_hash, grant_id, scopes, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, tokenID, tokenHash, grantID, pq.Array(scopes), at, expiresAt)
	if err != nil {
		return fmt.Errorf("inserting refresh token: %w", err)
	}
	return nil
}

type refreshRow struct {
	ID        string         `db:"id"`
	GrantID   string         `db:"grant_id"`
	Scopes    pq.StringArray `db:"scopes"`
	ExpiresAt time.Time      `db:"expires_at"`
	UsedAt    *time.Time     `db:"used_at"`
	RevokedAt *time.Time     `db:"revoked_at"`
}

func lockRefreshToken(ctx context.Context, q sqlx.QueryerContext, tokenHash []byte) (refreshRow, error) {
	var r refreshRow
	err := sqlx.GetContext(ctx, q, &r, `
		SELECT id, grant_id, scopes, expires_at, used_at, revoked_at
		FROM oauth_refresh_tokens WHERE token_hash = $1 FOR UPDATE`, tokenHash)
	if errors.Is(err, sql.ErrNoRows) {
		return refreshRow{}, fault.ErrNotFound
	}
	if err != nil {
		return refreshRow{}, fmt.Errorf("reading refresh token: %w", err)
	}
	return r, nil
}

func markRefreshUsed(ctx context.Context, q sqlx.ExtContext, tokenID string, at time.Time) error {
	if _, err := q.ExecContext(ctx, `UPDATE oauth_refresh_tokens SET used_at = $2 WHERE id = $1`, tokenID, at); err != nil {
		return fmt.Errorf("using refresh token: %w", err)
	}
	return nil
}

type accessRow struct {
	ID        string     `db:"id"`
	GrantID   string     `db:"grant_id"`
	RevokedAt *time.Time `db:"revoked_at"`
}

func lockAccessToken(ctx context.Context, q sqlx.QueryerContext, tokenHash []byte) (accessRow, error) {
	var r accessRow
	err := sqlx.GetContext(ctx, q, &r, `
		SELECT id, grant_id, revoked_at FROM oauth_access_tokens WHERE token_hash = $1 FOR UPDATE`, tokenHash)
	if errors.Is(err, sql.ErrNoRows) {
		return accessRow{}, fault.ErrNotFound
	}
	if err != nil {
		return accessRow{}, fmt.Errorf("reading access token: %w", err)
	}
	return r, nil
}

func revokeAccessTokenRow(ctx context.Context, q sqlx.ExtContext, tokenID string, at time.Time) error {
	_, err := q.ExecContext(ctx, `UPDATE oauth_access_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, tokenID, at)
	if err != nil {
		return fmt.Errorf("revoking access token: %w", err)
	}
	return nil
}

// liveAccessToken is an access token row that still works, with what /v1
// needs to act: the grant, its client, the person and the person's role
// in the grant's organization now (nil when the membership ended).
type liveAccessToken struct {
	TokenID        string         `db:"token_id"`
	Scopes         pq.StringArray `db:"scopes"`
	GrantID        string         `db:"grant_id"`
	ClientID       string         `db:"client_id"`
	ExpiresAt      time.Time      `db:"expires_at"`
	OrganizationID string         `db:"organization_id"`
	UserID         string         `db:"user_id"`
	UserName       string         `db:"user_name"`
	Role           *string        `db:"role"`
	// TeamGrants are the person's team grants in the organization
	// (team.DecodeGrants), read with the token: one round trip per call.
	TeamGrants []byte `db:"team_grants"`
}

// accessTokenQuery is built once: every agent request runs it.
var accessTokenQuery = `
		SELECT t.id AS token_id, t.scopes, t.expires_at, g.id AS grant_id, g.client_id, g.organization_id, g.user_id,
		       u.name AS user_name, m.role, ` + team.MemberGrantsColumn("g.organization_id", "g.user_id") + ` AS team_grants
		FROM oauth_access_tokens t
		JOIN oauth_grants g ON g.id = t.grant_id AND g.revoked_at IS NULL
		JOIN users u ON u.id = g.user_id AND u.banned_at IS NULL
		LEFT JOIN memberships m ON m.organization_id = g.organization_id AND m.user_id = g.user_id
		WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND t.expires_at > now()`

// accessTokenByHash resolves a presented token's keyed hash to its row. A
// revoked or expired token, a revoked or ended grant, or a banned person
// find nothing; a membership that ended finds a row without a role.
func accessTokenByHash(ctx context.Context, q sqlx.QueryerContext, tokenHash []byte) (liveAccessToken, error) {
	var r liveAccessToken
	err := sqlx.GetContext(ctx, q, &r, accessTokenQuery, tokenHash)
	if errors.Is(err, sql.ErrNoRows) {
		return liveAccessToken{}, ErrInvalidToken
	}
	if err != nil {
		return liveAccessToken{}, fmt.Errorf("reading access token: %w", err)
	}
	return r, nil
}

// membershipRole is the person's live role in an organization, or
// fault.ErrNotFound when they are not a member (or are banned).
func membershipRole(ctx context.Context, q sqlx.QueryerContext, organizationID, userID string) (string, error) {
	var role string
	err := sqlx.GetContext(ctx, q, &role, `
		SELECT m.role FROM memberships m JOIN users u ON u.id = m.user_id AND u.banned_at IS NULL
		WHERE m.organization_id = $1 AND m.user_id = $2`, organizationID, userID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fault.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading membership: %w", err)
	}
	return role, nil
}

// GrantView is a grant as the authorized-clients page lists it.
type GrantView struct {
	ID          string     `db:"id" json:"id"`
	ClientID    string     `db:"client_id" json:"client_id"`
	ClientName  string     `db:"client_name" json:"client_name"`
	ClientKind  string     `db:"client_kind" json:"client_kind"`
	ClientURI   *string    `db:"client_uri" json:"client_uri"`
	UserID      string     `db:"user_id" json:"user_id"`
	UserName    string     `db:"user_name" json:"user_name"`
	Scopes      []string   `db:"-" json:"scopes"`
	CreatedAt   time.Time  `db:"created_at" json:"created_at"`
	LastUsedAt  *time.Time `db:"last_used_at" json:"last_used_at"`
	ExpiresAt   time.Time  `db:"expires_at" json:"expires_at"`
	scopesArray pq.StringArray
}

// maxListedGrants bounds the page: an organization with more live grants
// than this sees its newest.
const maxListedGrants = 500

// listLiveGrants lists an organization's grants that still work, newest
// first; with userID only that person's.
func listLiveGrants(ctx context.Context, q sqlx.QueryerContext, organizationID, userID string) ([]GrantView, error) {
	rows, err := q.QueryxContext(ctx, `
		SELECT g.id, g.client_id, c.name AS client_name, c.kind AS client_kind, c.client_uri, g.user_id, u.name AS user_name,
		       g.scopes, g.created_at, g.last_used_at, g.expires_at
		FROM oauth_grants g
		JOIN oauth_clients c ON c.id = g.client_id
		JOIN users u ON u.id = g.user_id
		WHERE g.organization_id = $1 AND ($2 = '' OR g.user_id = $2) AND g.revoked_at IS NULL AND g.expires_at > now()
		ORDER BY g.created_at DESC, g.id DESC
		LIMIT $3`, organizationID, userID, maxListedGrants)
	if err != nil {
		return nil, fmt.Errorf("listing oauth grants: %w", err)
	}
	defer rows.Close()
	out := []GrantView{}
	for rows.Next() {
		var v GrantView
		if err := rows.Scan(&v.ID, &v.ClientID, &v.ClientName, &v.ClientKind, &v.ClientURI, &v.UserID, &v.UserName,
			&v.scopesArray, &v.CreatedAt, &v.LastUsedAt, &v.ExpiresAt); err != nil {
			return nil, fmt.Errorf("reading oauth grant: %w", err)
		}
		v.Scopes = v.scopesArray
		out = append(out, v)
	}
	return out, rows.Err()
}

// Person is what the OpenID provider tells about a person.
type Person struct {
	ID    string `db:"id"`
	Email string `db:"email"`
	Name  string `db:"name"`
}

// personByID reads a person who is not banned.
func personByID(ctx context.Context, q sqlx.QueryerContext, userID string) (Person, error) {
	var p Person
	err := sqlx.GetContext(ctx, q, &p, `SELECT id, email, name FROM users WHERE id = $1 AND banned_at IS NULL`, userID)
	if errors.Is(err, sql.ErrNoRows) {
		return Person{}, fault.ErrNotFound
	}
	if err != nil {
		return Person{}, fmt.Errorf("reading person: %w", err)
	}
	return p, nil
}
