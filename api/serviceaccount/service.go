package serviceaccount

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
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
	"github.com/cairnhq/cairn/api/team"
)

// Service is service accounts and their tokens.
type Service struct {
	db       *sqlx.DB
	tokenKey []byte
	now      func() time.Time
}

// NewService returns the service; tokenKey keys the stored token hashes.
func NewService(conn *sqlx.DB, tokenKey []byte) *Service {
	return &Service{db: conn, tokenKey: tokenKey, now: time.Now}
}

func (s *Service) hash(plaintext string) []byte {
	m := hmac.New(sha256.New, s.tokenKey)
	m.Write([]byte(plaintext))
	return m.Sum(nil)
}

var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Create creates a service account.
func (s *Service) Create(ctx context.Context, tx *sqlx.Tx, p access.Principal, name, description string) (ServiceAccount, error) {
	if err := p.Require(access.PermServiceAccountManage); err != nil {
		return ServiceAccount{}, err
	}
	name, err := validateName(name)
	if err != nil {
		return ServiceAccount{}, err
	}
	if len(description) > 2000 {
		return ServiceAccount{}, fmt.Errorf("%w: description is over 2000 characters", ErrInvalid)
	}
	a := ServiceAccount{ID: id.New("sa"), OrganizationID: p.OrganizationID, Name: name, Description: strings.TrimSpace(description),
		CreatedBy: p.ID, CreatedAt: s.now().UTC().Truncate(time.Microsecond)}
	if err := insertServiceAccount(ctx, tx, a); err != nil {
		return ServiceAccount{}, err
	}
	return a, audit.Record(ctx, tx, p, "service_account.created", "service_account", a.ID, map[string]any{"name": a.Name})
}

// List reads one page of the organization's service accounts.
func (s *Service) List(ctx context.Context, p access.Principal, page cursor.Page) ([]ServiceAccount, error) {
	if err := p.Require(access.PermServiceAccountManage); err != nil {
		return nil, err
	}
	return listServiceAccounts(ctx, s.db, p.OrganizationID, page)
}

// Get reads one of the organization's service accounts with the tokens
// issued to it, without plaintexts (only their keyed hashes are stored):
// the live ones first, then the revoked and expired ones, newest first
// within each, at most MaxTokensShown. Tokens have no list of their own
// (SPEC §2); this is where a manager sees what to revoke.
func (s *Service) Get(ctx context.Context, p access.Principal, accountID string) (Account, error) {
	if err := p.Require(access.PermServiceAccountManage); err != nil {
		return Account{}, err
	}
	a, err := serviceAccountByID(ctx, s.db, p.OrganizationID, accountID)
	if err != nil {
		return Account{}, err
	}
	tokens, err := tokensOf(ctx, s.db, p.OrganizationID, accountID, MaxTokensShown+1)
	if err != nil {
		return Account{}, err
	}
	out := Account{ServiceAccount: a, Tokens: tokens}
	if len(tokens) > MaxTokensShown {
		out.Tokens, out.TokensTruncated = tokens[:MaxTokensShown], true
	}
	return out, nil
}

// Issued is a new token and its plaintext, which exists only in this value.
type Issued struct {
	Token     Token
	Plaintext string
}

// IssueToken issues an sst_ token with an explicit subset of the issuer's
// permissions (and never more than the issuer holds at each use), optional project and workspace boundaries, and an expiry at
// most a year ahead. Only a keyed hash of the plaintext is stored.
func (s *Service) IssueToken(ctx context.Context, tx *sqlx.Tx, p access.Principal, accountID string, in IssueInput) (Issued, error) {
	if err := p.Require(access.PermServiceAccountManage); err != nil {
		return Issued{}, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	perms, err := validateIssue(p, in, now)
	if err != nil {
		return Issued{}, err
	}
	if _, err := serviceAccountByID(ctx, tx, p.OrganizationID, accountID); err != nil {
		return Issued{}, err
	}
	t := Token{
		ID: id.New("sat"), OrganizationID: p.OrganizationID, ServiceAccountID: accountID,
		Permissions: perms.Strings(), ExpiresAt: in.ExpiresAt.UTC().Truncate(time.Microsecond), CreatedBy: p.ID, CreatedAt: now,
	}
	if err := s.checkBoundaries(ctx, tx, p.OrganizationID, in.ProjectID, in.WorkspaceID); err != nil {
		return Issued{}, err
	}
	if in.ProjectID != "" {
		t.ProjectID = &in.ProjectID
	}
	if in.WorkspaceID != "" {
		t.WorkspaceID = &in.WorkspaceID
	}
	raw := make([]byte, 25)
	if _, err := rand.Read(raw); err != nil {
		return Issued{}, fmt.Errorf("generating token: %w", err)
	}
	plaintext := TokenPrefix + tokenEncoding.EncodeToString(raw)
	if err := insertToken(ctx, tx, t, s.hash(plaintext)); err != nil {
		return Issued{}, err
	}
	evidence := map[string]any{"service_account_id": accountID, "permissions": t.Permissions, "expires_at": t.ExpiresAt}
	if t.ProjectID != nil {
		evidence["project_id"] = *t.ProjectID
	}
	if t.WorkspaceID != nil {
		evidence["workspace_id"] = *t.WorkspaceID
	}
	if err := audit.Record(ctx, tx, p, "service_account_token.issued", "service_account_token", t.ID, evidence); err != nil {
		return Issued{}, err
	}
	return Issued{Token: t, Plaintext: plaintext}, nil
}

// checkBoundaries verifies that a token's project and workspace belong to
// the organization, and that the workspace lies in the project when both
// are given. Anything else is not found.
func (s *Service) checkBoundaries(ctx context.Context, q sqlx.QueryerContext, organizationID, projectID, workspaceID string) error {
	if projectID != "" {
		var exists bool
		if err := sqlx.GetContext(ctx, q, &exists, `SELECT EXISTS (SELECT 1 FROM projects WHERE organization_id = $1 AND id = $2)`,
			organizationID, projectID); err != nil {
			return fmt.Errorf("checking project boundary: %w", err)
		}
		if !exists {
			return fault.ErrNotFound
		}
	}
	if workspaceID != "" {
		var wsProject string
		err := sqlx.GetContext(ctx, q, &wsProject, `SELECT project_id FROM workspaces WHERE organization_id = $1 AND id = $2`,
			organizationID, workspaceID)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && projectID != "" && wsProject != projectID) {
			return fault.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("checking workspace boundary: %w", err)
		}
	}
	return nil
}

// RevokeToken revokes a token; it stops working on the next request.
func (s *Service) RevokeToken(ctx context.Context, tx *sqlx.Tx, p access.Principal, accountID, tokenID string) (Token, error) {
	if err := p.Require(access.PermServiceAccountManage); err != nil {
		return Token{}, err
	}
	t, err := tokenByID(ctx, tx, p.OrganizationID, accountID, tokenID)
	if err != nil {
		return Token{}, err
	}
	if t.RevokedAt == nil {
		if err := revokeToken(ctx, tx, t.ID); err != nil {
			return Token{}, err
		}
		now := s.now().UTC()
		t.RevokedAt = &now
	}
	return t, audit.Record(ctx, tx, p, "service_account_token.revoked", "service_account_token", t.ID,
		map[string]any{"service_account_id": accountID})
}

// Authenticate resolves an sst_ plaintext to the principal it acts as. An
// unknown, revoked or expired token is ErrInvalidToken.
func (s *Service) Authenticate(ctx context.Context, plaintext string) (access.Principal, error) {
	if !strings.HasPrefix(plaintext, TokenPrefix) || len(plaintext) > 128 {
		return access.Principal{}, ErrInvalidToken
	}
	// A token never outgrows the person who issued it: it acts with what
	// they may do now (role and team grants, read with the token on every
	// request), so a demotion or a lost team narrows it at once and
	// leaving the organization ends it.
	t, issuerRole, rawGrants, err := liveTokenWithIssuer(ctx, s.db, s.hash(plaintext))
	if err != nil {
		return access.Principal{}, err
	}
	if issuerRole == "" {
		return access.Principal{}, ErrInvalidToken
	}
	perms, err := access.ParsePermissions(t.Permissions)
	if err != nil {
		return access.Principal{}, ErrInvalidToken
	}
	issuerGrants, err := team.DecodeGrants(rawGrants)
	if err != nil {
		return access.Principal{}, err
	}
	p := access.Principal{
		Kind: access.KindServiceAccount, ID: t.ServiceAccountID, OrganizationID: t.OrganizationID,
		Permissions: perms.Intersect(access.PermissionsOf(issuerRole)), Grants: issuerGrants.Within(perms), TokenID: t.ID,
	}
	if t.ProjectID != nil {
		p.ProjectID = *t.ProjectID
	}
	if t.WorkspaceID != nil {
		p.WorkspaceID = *t.WorkspaceID
	}
	return p, nil
}
