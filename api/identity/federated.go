package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
)

// The functions here serve sign-ins that an identity provider vouched for
// (api/sso): they run inside the caller's transaction, which also links
// the external identity, syncs teams and issues the one-time code.

// FederatedAccount is an account found by e-mail for a federated sign-in,
// banned or not: a banned one must refuse the sign-in, not be recreated.
type FederatedAccount struct {
	User
	Banned bool `db:"banned"`
}

// AccountByEmail reads the account of an address, banned or not;
// fault.ErrNotFound when there is none.
func AccountByEmail(ctx context.Context, q sqlx.QueryerContext, email string) (FederatedAccount, error) {
	return readAccount(ctx, q, `email = $1`, email)
}

// AccountByID reads an account by ID, banned or not.
func AccountByID(ctx context.Context, q sqlx.QueryerContext, userID string) (FederatedAccount, error) {
	return readAccount(ctx, q, `id = $1`, userID)
}

func readAccount(ctx context.Context, q sqlx.QueryerContext, where string, arg string) (FederatedAccount, error) {
	var a FederatedAccount
	err := sqlx.GetContext(ctx, q, &a, `SELECT id, email, name, created_at, banned_at IS NOT NULL AS banned
		FROM users WHERE `+where, arg)
	if errors.Is(err, sql.ErrNoRows) {
		return a, fault.ErrNotFound
	}
	if err != nil {
		return a, fmt.Errorf("reading account: %w", err)
	}
	return a, nil
}

// CreateFederatedUser creates an account without a password: it signs in
// only through an identity provider (a password sign-in for it fails like
// one for an unknown address).
func CreateFederatedUser(ctx context.Context, tx *sqlx.Tx, email, name string, at time.Time) (User, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return User{}, err
	}
	if name, err = ValidateName(name); err != nil {
		name = email
	}
	u := User{ID: id.New("usr"), Email: email, Name: name, CreatedAt: at.UTC().Truncate(time.Microsecond)}
	return u, insertUser(ctx, tx, u, "")
}

// JoinBySSO makes a user a member with role unless they already are one,
// recording that SSO brought them; it reports whether they joined now.
func JoinBySSO(ctx context.Context, tx *sqlx.Tx, organizationID, userID string, role access.Role) (bool, error) {
	_, err := membershipRole(ctx, tx, organizationID, userID)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, fault.ErrNotFound) {
		return false, err
	}
	if err := insertMembership(ctx, tx, organizationID, userID, role, "", JoinedBySSO); err != nil {
		return false, err
	}
	return true, nil
}

// RoleIn returns a user's role in an organization; fault.ErrNotFound when
// they are not a member.
func RoleIn(ctx context.Context, q sqlx.QueryerContext, organizationID, userID string) (access.Role, error) {
	return membershipRole(ctx, q, organizationID, userID)
}

// StartFederatedSession starts a session for a user an identity provider
// vouched for, inside the caller's transaction. activeOrg nil resumes in
// the user's only organization, as a password sign-in does.
func (s *Service) StartFederatedSession(ctx context.Context, tx *sqlx.Tx, userID string, activeOrg *string) (Session, string, error) {
	if activeOrg == nil {
		orgs, err := organizationsOfUser(ctx, tx, userID)
		if err != nil {
			return Session{}, "", err
		}
		if len(orgs) == 1 {
			activeOrg = &orgs[0].ID
		}
	}
	return s.startSession(ctx, tx, userID, activeOrg)
}

// SessionByID reads a live session for answering a redeemed sign-in code.
func SessionByID(ctx context.Context, q sqlx.QueryerContext, sessionID string) (Session, error) {
	var s Session
	err := sqlx.GetContext(ctx, q, &s, `
		SELECT s.id, s.user_id, s.active_organization_id, s.created_at, s.expires_at, s.reauthenticated_at
		FROM sessions s JOIN users u ON u.id = s.user_id AND u.banned_at IS NULL
		WHERE s.id = $1 AND s.revoked_at IS NULL AND s.expires_at > now()`, sessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return s, fault.ErrUnauthenticated
	}
	if err != nil {
		return s, fmt.Errorf("reading session: %w", err)
	}
	return s, nil
}

// SSORequiredFor reports whether any organization the user is a non-owner
// member of requires SSO: such a person signs in through the
// organization's identity provider, never with a password nor through the
// instance IdP.
func SSORequiredFor(ctx context.Context, q sqlx.QueryerContext, userID string) (bool, error) {
	var required bool
	err := sqlx.GetContext(ctx, q, &required, `
		SELECT EXISTS (SELECT 1 FROM memberships m JOIN organizations o ON o.id = m.organization_id
		               WHERE m.user_id = $1 AND m.role <> 'owner' AND o.sso_required)`, userID)
	if err != nil {
		return false, fmt.Errorf("checking SSO requirement: %w", err)
	}
	return required, nil
}
