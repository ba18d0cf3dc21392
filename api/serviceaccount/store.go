package serviceaccount

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/team"
)

func insertServiceAccount(ctx context.Context, q sqlx.ExtContext, a ServiceAccount) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO service_accounts (id, organization_id, name, description, created_by, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, a.ID, a.OrganizationID, a.Name, a.Description, a.CreatedBy, a.CreatedAt)
	if db.IsUniqueViolation(err, "service_accounts_organization_name_key") {
		return ErrNameTaken
	}
	if err != nil {
		return fmt.Errorf("inserting service account: %w", err)
	}
	return nil
}

func serviceAccountByID(ctx context.Context, q sqlx.QueryerContext, organizationID, accountID string) (ServiceAccount, error) {
	var a ServiceAccount
	err := sqlx.GetContext(ctx, q, &a, `
		SELECT id, organization_id, name, description, created_by, created_at FROM service_accounts
		WHERE organization_id = $1 AND id = $2`, organizationID, accountID)
	if errors.Is(err, sql.ErrNoRows) {
		return a, fault.ErrNotFound
	}
	if err != nil {
		return a, fmt.Errorf("reading service account: %w", err)
	}
	return a, nil
}

func insertToken(ctx context.Context, q sqlx.ExtContext, t Token, hash []byte) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO service_account_tokens
			(id, organization_id, service_account_id, token_hash, permissions, project_id, workspace_id, expires_at, created_by, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		t.ID, t.OrganizationID, t.ServiceAccountID, hash, pq.Array(t.Permissions), t.ProjectID, t.WorkspaceID,
		t.ExpiresAt, t.CreatedBy, t.CreatedAt)
	if err != nil {
		return fmt.Errorf("inserting token: %w", err)
	}
	return nil
}

const tokenColumns = `id, organization_id, service_account_id, permissions, project_id, workspace_id,
	expires_at, created_by, created_at, revoked_at`

type tokenRow struct {
	Token
	Permissions pq.StringArray `db:"permissions"`
}

func (r tokenRow) token() Token {
	t := r.Token
	t.Permissions = []string(r.Permissions)
	return t
}

func tokenByID(ctx context.Context, q sqlx.QueryerContext, organizationID, accountID, tokenID string) (Token, error) {
	var r tokenRow
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+tokenColumns+` FROM service_account_tokens
		WHERE organization_id = $1 AND service_account_id = $2 AND id = $3 FOR UPDATE`, organizationID, accountID, tokenID)
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, fault.ErrNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("reading token: %w", err)
	}
	return r.token(), nil
}

// liveTokenQuery is built once: every request with a service account's
// token runs it.
var liveTokenQuery = `SELECT ` + tokenColumns + `,
		(SELECT m.role FROM memberships m JOIN users u ON u.id = m.user_id AND u.banned_at IS NULL
		 WHERE m.organization_id = k.organization_id AND m.user_id = k.created_by) AS issuer_role,
		` + team.MemberGrantsColumn("k.organization_id", "k.created_by") + ` AS issuer_grants
		FROM service_account_tokens k
		WHERE token_hash = $1 AND revoked_at IS NULL AND expires_at > now()`

// liveTokenWithIssuer finds a token that is neither revoked nor expired,
// with its issuer's role and team grants in the token's organization, read
// in the same round trip. The role is empty when the issuer is no longer a
// member or is banned.
func liveTokenWithIssuer(ctx context.Context, q sqlx.QueryerContext, hash []byte) (Token, access.Role, []byte, error) {
	var r struct {
		tokenRow
		IssuerRole   sql.NullString `db:"issuer_role"`
		IssuerGrants []byte         `db:"issuer_grants"`
	}
	err := sqlx.GetContext(ctx, q, &r, liveTokenQuery, hash)
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, "", nil, ErrInvalidToken
	}
	if err != nil {
		return Token{}, "", nil, fmt.Errorf("reading token: %w", err)
	}
	return r.token(), access.Role(r.IssuerRole.String), r.IssuerGrants, nil
}

func revokeToken(ctx context.Context, q sqlx.ExtContext, tokenID string) error {
	_, err := q.ExecContext(ctx, `UPDATE service_account_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL`, tokenID)
	if err != nil {
		return fmt.Errorf("revoking token: %w", err)
	}
	return nil
}

// listServiceAccounts reads one page of an organization's accounts, newest
// first, one row beyond the page.
func listServiceAccounts(ctx context.Context, q sqlx.QueryerContext, organizationID string, page cursor.Page) ([]ServiceAccount, error) {
	query := `SELECT id, organization_id, name, description, created_by, created_at FROM service_accounts
		WHERE organization_id = $1`
	keyset, args := page.Keyset([]any{organizationID}, "created_at", "id")
	var out []ServiceAccount
	if err := sqlx.SelectContext(ctx, q, &out, query+keyset+page.OrderLimit("created_at", "id"), args...); err != nil {
		return nil, fmt.Errorf("listing service accounts: %w", err)
	}
	return out, nil
}

// tokensOf reads at most limit of an account's tokens: the live ones
// (neither revoked nor expired by the database clock, which
// liveTokenWithIssuer judges by too) first, newest first within each.
func tokensOf(ctx context.Context, q sqlx.QueryerContext, organizationID, accountID string, limit int) ([]Token, error) {
	var rows []tokenRow
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT `+tokenColumns+` FROM service_account_tokens
		WHERE organization_id = $1 AND service_account_id = $2
		ORDER BY (revoked_at IS NULL AND expires_at > now()) DESC, created_at DESC, id DESC
		LIMIT $3`, organizationID, accountID, limit); err != nil {
		return nil, fmt.Errorf("reading tokens: %w", err)
	}
	out := make([]Token, len(rows))
	for i, r := range rows {
		out[i] = r.token()
	}
	return out, nil
}
