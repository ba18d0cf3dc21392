package sso

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
)

type providerRow struct {
	Provider
	SecretSealed []byte         `db:"oidc_client_secret_sealed"`
	ScopesRaw    pq.StringArray `db:"oidc_scopes"`
	DomainsRaw   pq.StringArray `db:"domains"`
	GroupsAttr   string         `db:"groups_attribute"`
	EmailAttr    string         `db:"email_attribute"`
	NameAttr     string         `db:"name_attribute"`
	ClientIDRaw  *string        `db:"client_id"`
	MetadataRaw  *string        `db:"metadata"`
}

func (r providerRow) provider() Provider {
	p := r.Provider
	p.Scopes = []string(r.ScopesRaw)
	p.Domains = []string(r.DomainsRaw)
	p.Mapping = Mapping{Groups: r.GroupsAttr, Email: r.EmailAttr, Name: r.NameAttr}
	if r.ClientIDRaw != nil {
		p.ClientID = *r.ClientIDRaw
	}
	if r.MetadataRaw != nil {
		p.MetadataXML = *r.MetadataRaw
	}
	return p
}

const providerColumns = `p.id, p.organization_id, p.type, p.issuer, p.oidc_client_id AS client_id,
	p.oidc_client_secret_sealed, p.oidc_scopes, p.saml_metadata_xml AS metadata, p.groups_attribute,
	p.email_attribute, p.name_attribute, p.default_role, p.created_by, p.created_at,
	ARRAY(SELECT d.domain FROM sso_domains d WHERE d.provider_id = p.id ORDER BY d.domain) AS domains
	FROM sso_providers p`

func insertProvider(ctx context.Context, tx *sqlx.Tx, p Provider, secretSealed []byte) error {
	var clientID, metadata *string
	if p.Type == TypeOIDC {
		clientID = &p.ClientID
	} else {
		metadata = &p.MetadataXML
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO sso_providers (id, organization_id, type, issuer, oidc_client_id, oidc_client_secret_sealed, oidc_scopes,
			saml_metadata_xml, groups_attribute, email_attribute, name_attribute, default_role, created_by, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		p.ID, p.OrganizationID, p.Type, p.Issuer, clientID, secretSealed, pq.Array(nonNil(p.Scopes)), metadata,
		p.Mapping.Groups, p.Mapping.Email, p.Mapping.Name, p.DefaultRole, p.CreatedBy, p.CreatedAt); err != nil {
		return fmt.Errorf("inserting SSO provider: %w", err)
	}
	for _, d := range p.Domains {
		_, err := tx.ExecContext(ctx, `INSERT INTO sso_domains (domain, provider_id, organization_id) VALUES ($1, $2, $3)`,
			d, p.ID, p.OrganizationID)
		if db.IsUniqueViolation(err, "sso_domains_pkey") {
			return fmt.Errorf("%s: %w", d, ErrDomainTaken)
		}
		if err != nil {
			return fmt.Errorf("inserting SSO domain: %w", err)
		}
	}
	return nil
}

func readProvider(ctx context.Context, q sqlx.QueryerContext, where string, args ...any) (providerRow, error) {
	var r providerRow
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+providerColumns+` WHERE `+where, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrUnknownProvider
	}
	if err != nil {
		return r, fmt.Errorf("reading SSO provider: %w", err)
	}
	return r, nil
}

func providerByID(ctx context.Context, q sqlx.QueryerContext, providerID string) (providerRow, error) {
	return readProvider(ctx, q, `p.id = $1`, providerID)
}

func providerByDomain(ctx context.Context, q sqlx.QueryerContext, domain string) (providerRow, error) {
	return readProvider(ctx, q, `p.id = (SELECT provider_id FROM sso_domains WHERE domain = $1)`, domain)
}

// providerBySlug picks an organization's provider for a sign-in by slug:
// its oldest, when it has several.
func providerBySlug(ctx context.Context, q sqlx.QueryerContext, slug string) (providerRow, error) {
	return readProvider(ctx, q, `p.organization_id = (SELECT id FROM organizations WHERE slug = $1)
		ORDER BY p.created_at, p.id LIMIT 1`, slug)
}

func providersOf(ctx context.Context, q sqlx.QueryerContext, organizationID string) ([]Provider, error) {
	var rows []providerRow
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT `+providerColumns+`
		WHERE p.organization_id = $1 ORDER BY p.created_at, p.id`, organizationID); err != nil {
		return nil, fmt.Errorf("listing SSO providers: %w", err)
	}
	out := make([]Provider, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.provider())
	}
	return out, nil
}

func deleteProvider(ctx context.Context, tx *sqlx.Tx, organizationID, providerID string) error {
	res, err := tx.ExecContext(ctx, `DELETE FROM sso_providers WHERE id = $1 AND organization_id = $2`, providerID, organizationID)
	if err != nil {
		return fmt.Errorf("deleting SSO provider: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrUnknownProvider
	}
	return nil
}

func ssoRequired(ctx context.Context, q sqlx.QueryerContext, organizationID string) (bool, error) {
	var required bool
	err := sqlx.GetContext(ctx, q, &required, `SELECT sso_required FROM organizations WHERE id = $1`, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return false, fault.ErrNotFound
	}
	if err != nil {
		return false, fmt.Errorf("reading SSO requirement: %w", err)
	}
	return required, nil
}

func setSSORequired(ctx context.Context, tx *sqlx.Tx, organizationID string, required bool) error {
	if _, err := tx.ExecContext(ctx, `UPDATE organizations SET sso_required = $2 WHERE id = $1`, organizationID, required); err != nil {
		return fmt.Errorf("writing SSO requirement: %w", err)
	}
	return nil
}

func insertFlow(ctx context.Context, q sqlx.ExtContext, f Flow) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO sign_in_flows (state_hash, kind, provider, organization_id, initiated_by, nonce, pkce_verifier_sealed,
			callback_url, binding_hash, saml_request_id, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		f.StateHash, f.Kind, f.Provider, f.OrganizationID, f.InitiatedBy, f.Nonce, f.VerifierSealed,
		f.CallbackURL, f.BindingHash, f.SAMLRequestID, f.CreatedAt, f.ExpiresAt)
	if err != nil {
		return fmt.Errorf("inserting sign-in flow: %w", err)
	}
	return nil
}

const flowColumns = `state_hash, kind, provider, organization_id, initiated_by, nonce, pkce_verifier_sealed,
	callback_url, binding_hash, saml_request_id, created_at, expires_at, consumed_at`

// consumeFlow marks a flow used and returns it as it was: a flow is
// consumed by its first callback, whatever that callback's outcome.
func consumeFlow(ctx context.Context, tx *sqlx.Tx, stateHash []byte, at time.Time) (Flow, error) {
	var f Flow
	err := tx.GetContext(ctx, &f, `SELECT `+flowColumns+` FROM sign_in_flows WHERE state_hash = $1 FOR UPDATE`, stateHash)
	if errors.Is(err, sql.ErrNoRows) {
		return f, ErrStateInvalid
	}
	if err != nil {
		return f, fmt.Errorf("reading sign-in flow: %w", err)
	}
	if f.ConsumedAt == nil {
		if _, err := tx.ExecContext(ctx, `UPDATE sign_in_flows SET consumed_at = $2 WHERE state_hash = $1`, stateHash, at); err != nil {
			return f, fmt.Errorf("consuming sign-in flow: %w", err)
		}
	}
	return f, nil
}

// externalUser returns the user an external identity is linked to;
// fault.ErrNotFound when it is not linked yet.
func externalUser(ctx context.Context, q sqlx.QueryerContext, providerKey, subject string) (string, error) {
	var userID string
	err := sqlx.GetContext(ctx, q, &userID, `SELECT user_id FROM external_identities WHERE provider_key = $1 AND subject = $2`,
		providerKey, subject)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fault.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading external identity: %w", err)
	}
	return userID, nil
}

// accountLinkable decides whether an identity provider that vouched for an
// address may take over the existing account that has it. Domains are
// claimed first come, first served (nobody proves owning one), so a
// verified address alone is not enough:
//   - an organization's provider links only an account that belongs to
//     no other organization: otherwise the owner of one organization could
//     register a provider asserting a member's address and sign in as that
//     person everywhere else they work;
//   - the instance IdP, which the operator configured, links any account
//     except one that only an organization's provider or SCIM client
//     created (passwordless and never signed in through the instance IdP),
//     so an account an organization made for an address cannot become the
//     one its real owner later uses.
func accountLinkable(ctx context.Context, q sqlx.QueryerContext, userID string, organizationID *string) error {
	var ok bool
	var err error
	if organizationID != nil {
		err = sqlx.GetContext(ctx, q, &ok, `SELECT NOT EXISTS (
			SELECT 1 FROM memberships WHERE user_id = $1 AND organization_id <> $2)`, userID, *organizationID)
	} else {
		err = sqlx.GetContext(ctx, q, &ok, `SELECT u.password_hash <> '' OR EXISTS (
			SELECT 1 FROM external_identities e WHERE e.user_id = u.id AND e.provider_key LIKE 'idp:%')
			FROM users u WHERE u.id = $1`, userID)
	}
	if err != nil {
		return fmt.Errorf("checking whether the account may be linked: %w", err)
	}
	if !ok {
		return ErrAccountNotLinkable
	}
	return nil
}

func linkExternal(ctx context.Context, tx *sqlx.Tx, providerKey, subject, userID string, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO external_identities (provider_key, subject, user_id, created_at, last_signed_in_at) VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (provider_key, subject) DO UPDATE SET last_signed_in_at = excluded.last_signed_in_at`,
		providerKey, subject, userID, at); err != nil {
		return fmt.Errorf("linking external identity: %w", err)
	}
	return nil
}

func insertCode(ctx context.Context, tx *sqlx.Tx, codeHash []byte, userID, sessionID string, tokenSealed, binding []byte, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO sign_in_codes (code_hash, user_id, session_id, token_sealed, binding_hash, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, codeHash, userID, sessionID, tokenSealed, binding, at, at.Add(codeTTL)); err != nil {
		return fmt.Errorf("inserting sign-in code: %w", err)
	}
	return nil
}

type codeRow struct {
	UserID      string     `db:"user_id"`
	SessionID   string     `db:"session_id"`
	TokenSealed []byte     `db:"token_sealed"`
	BindingHash []byte     `db:"binding_hash"`
	ExpiresAt   time.Time  `db:"expires_at"`
	ConsumedAt  *time.Time `db:"consumed_at"`
}

// consumeCode marks a code used (its sealed token dropped) and returns it
// as it was; a code is spent by its first redemption, right or wrong.
func consumeCode(ctx context.Context, tx *sqlx.Tx, codeHash []byte, at time.Time) (codeRow, error) {
	var c codeRow
	err := tx.GetContext(ctx, &c, `SELECT user_id, session_id, token_sealed, binding_hash, expires_at, consumed_at
		FROM sign_in_codes WHERE code_hash = $1 FOR UPDATE`, codeHash)
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrCodeInvalid
	}
	if err != nil {
		return c, fmt.Errorf("reading sign-in code: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sign_in_codes SET consumed_at = coalesce(consumed_at, $2), token_sealed = NULL
		WHERE code_hash = $1`, codeHash, at); err != nil {
		return c, fmt.Errorf("consuming sign-in code: %w", err)
	}
	return c, nil
}

func insertTestResult(ctx context.Context, q sqlx.ExtContext, providerID, organizationID, testedBy string, r TestResult, at time.Time) error {
	if _, err := q.ExecContext(ctx, `
		INSERT INTO sso_test_results (id, provider_id, organization_id, tested_by, email, email_verified, groups, teams, error,
			created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		r.ID, providerID, organizationID, testedBy, r.Email, r.EmailVerified, pq.Array(nonNil(r.Groups)),
		pq.Array(nonNil(r.Teams)), r.Error, at, at.Add(testResultTTL)); err != nil {
		return fmt.Errorf("recording SSO test result: %w", err)
	}
	return nil
}

func testResult(ctx context.Context, q sqlx.QueryerContext, organizationID, id string, now time.Time) (TestResult, error) {
	var row struct {
		TestResult
		GroupsRaw pq.StringArray `db:"groups"`
		TeamsRaw  pq.StringArray `db:"teams"`
	}
	err := sqlx.GetContext(ctx, q, &row, `SELECT id, email, email_verified, groups, teams, error FROM sso_test_results
		WHERE id = $1 AND organization_id = $2 AND expires_at > $3`, id, organizationID, now)
	if errors.Is(err, sql.ErrNoRows) {
		return TestResult{}, fault.ErrNotFound
	}
	if err != nil {
		return TestResult{}, fmt.Errorf("reading SSO test result: %w", err)
	}
	r := row.TestResult
	r.Groups, r.Teams = nonNil(row.GroupsRaw), nonNil(row.TeamsRaw)
	return r, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
