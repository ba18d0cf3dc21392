package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/team"
	"github.com/cairnhq/cairn/api/workspace"
)

func insertUser(ctx context.Context, q sqlx.ExtContext, u User, passwordHash string) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO users (id, email, name, password_hash, created_at) VALUES ($1, $2, $3, $4, $5)`,
		u.ID, u.Email, u.Name, passwordHash, u.CreatedAt)
	if db.IsUniqueViolation(err, "users_email_key") {
		return ErrEmailTaken
	}
	if err != nil {
		return fmt.Errorf("inserting user: %w", err)
	}
	return nil
}

type userWithHash struct {
	User
	PasswordHash string `db:"password_hash"`
}

// userForSignIn returns a user who may sign in (not banned), with the hash.
func userForSignIn(ctx context.Context, q sqlx.QueryerContext, email string) (userWithHash, error) {
	var u userWithHash
	err := sqlx.GetContext(ctx, q, &u, `
		SELECT id, email, name, created_at, password_hash FROM users
		WHERE email = $1 AND banned_at IS NULL`, email)
	if errors.Is(err, sql.ErrNoRows) {
		return u, fault.ErrNotFound
	}
	if err != nil {
		return u, fmt.Errorf("reading user: %w", err)
	}
	return u, nil
}

func userByID(ctx context.Context, q sqlx.QueryerContext, userID string) (userWithHash, error) {
	var u userWithHash
	err := sqlx.GetContext(ctx, q, &u, `
		SELECT id, email, name, created_at, password_hash FROM users
		WHERE id = $1 AND banned_at IS NULL`, userID)
	if errors.Is(err, sql.ErrNoRows) {
		return u, fault.ErrNotFound
	}
	if err != nil {
		return u, fmt.Errorf("reading user: %w", err)
	}
	return u, nil
}

func insertSession(ctx context.Context, q sqlx.ExtContext, s Session, tokenHash []byte) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO sessions (id, token_hash, user_id, active_organization_id, created_at, expires_at, reauthenticated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		s.ID, tokenHash, s.UserID, s.ActiveOrganizationID, s.CreatedAt, s.ExpiresAt, s.ReauthenticatedAt)
	if err != nil {
		return fmt.Errorf("inserting session: %w", err)
	}
	return nil
}

// liveSession is a session that is neither revoked nor expired, of a user
// who is not banned, with the user's role in the active organization (nil
// when there is no active organization or the membership is gone).
type liveSession struct {
	Session
	UserEmail string  `db:"user_email"`
	UserName  string  `db:"user_name"`
	Role      *string `db:"role"`
}

// liveSessionQuery reads the unrevoked, unexpired session of a token hash
// ($1) whose user is not banned, with the user's role in the session's
// active organization and any extra columns: the one place these
// conditions are written, for both session reads.
func liveSessionQuery(extraColumns string) string {
	return `
		SELECT s.id, s.user_id, s.active_organization_id, s.created_at, s.expires_at, s.reauthenticated_at,
		       u.email AS user_email, u.name AS user_name, m.role` + extraColumns + `
		FROM sessions s
		JOIN users u ON u.id = s.user_id AND u.banned_at IS NULL
		LEFT JOIN memberships m ON m.organization_id = s.active_organization_id AND m.user_id = s.user_id
		WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now()`
}

func sessionByTokenHash(ctx context.Context, q sqlx.QueryerContext, tokenHash []byte) (liveSession, error) {
	var s liveSession
	err := sqlx.GetContext(ctx, q, &s, liveSessionQuery(""), tokenHash)
	if errors.Is(err, sql.ErrNoRows) {
		return s, fault.ErrUnauthenticated
	}
	if err != nil {
		return s, fmt.Errorf("reading session: %w", err)
	}
	return s, nil
}

// sessionWithGrantsQuery is built once: every request with a session
// runs it.
var sessionWithGrantsQuery = liveSessionQuery(`,
		       ` + team.MemberGrantsColumn("s.active_organization_id", "s.user_id") + ` AS team_grants`)

// sessionWithGrants is sessionByTokenHash with the team grants of the
// session's member in its active organization, read in the same query.
func sessionWithGrants(ctx context.Context, q sqlx.QueryerContext, tokenHash []byte) (liveSession, []byte, error) {
	var row struct {
		liveSession
		Grants []byte `db:"team_grants"`
	}
	err := sqlx.GetContext(ctx, q, &row, sessionWithGrantsQuery, tokenHash)
	if errors.Is(err, sql.ErrNoRows) {
		return row.liveSession, nil, fault.ErrUnauthenticated
	}
	if err != nil {
		return row.liveSession, nil, fmt.Errorf("reading session: %w", err)
	}
	return row.liveSession, row.Grants, nil
}

func revokeSession(ctx context.Context, q sqlx.ExtContext, sessionID string) error {
	_, err := q.ExecContext(ctx, `UPDATE sessions SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL`, sessionID)
	if err != nil {
		return fmt.Errorf("revoking session: %w", err)
	}
	return nil
}

func setActiveOrganization(ctx context.Context, q sqlx.ExtContext, sessionID, organizationID string) error {
	_, err := q.ExecContext(ctx, `UPDATE sessions SET active_organization_id = $2 WHERE id = $1`, sessionID, organizationID)
	if err != nil {
		return fmt.Errorf("setting active organization: %w", err)
	}
	return nil
}

func markReauthenticated(ctx context.Context, q sqlx.ExtContext, sessionID string, at time.Time) error {
	_, err := q.ExecContext(ctx, `UPDATE sessions SET reauthenticated_at = $2 WHERE id = $1`, sessionID, at)
	if err != nil {
		return fmt.Errorf("recording reauthentication: %w", err)
	}
	return nil
}

// insertOrganization inserts an organization with its Default Project (HCP
// Terraform creates one with every organization); createdBy is the
// creator's ID.
func insertOrganization(ctx context.Context, tx *sqlx.Tx, o Organization, createdBy string) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO organizations (id, name, slug, created_at, email, default_execution_mode, allow_force_delete_workspaces)
		VALUES ($1, $2, $3, $4, $5, COALESCE(NULLIF($6, ''), 'remote'), $7)`,
		o.ID, o.Name, o.Slug, o.CreatedAt, o.Email, o.DefaultExecutionMode, o.AllowForceDeleteWorkspaces)
	if db.IsUniqueViolation(err, "organizations_slug_key") {
		return ErrSlugTaken
	}
	if err != nil {
		return fmt.Errorf("inserting organization: %w", err)
	}
	_, err = workspace.CreateDefaultProject(ctx, tx, o.ID, createdBy, o.CreatedAt)
	return err
}

// insertMembership makes a user a member; invitationID, when not empty,
// is the invitation accepted, which names the membership on /api/v2, and
// via records how they arrived.
func insertMembership(ctx context.Context, q sqlx.ExtContext, organizationID, userID string, role access.Role, invitationID string, via JoinedVia) error {
	_, err := q.ExecContext(ctx, `INSERT INTO memberships (organization_id, user_id, role, invitation_id, joined_via)
		VALUES ($1, $2, $3, nullif($4, ''), $5)`, organizationID, userID, role, invitationID, via)
	if db.IsUniqueViolation(err, "memberships_pkey") {
		return ErrMemberExists
	}
	if err != nil {
		return fmt.Errorf("inserting membership: %w", err)
	}
	return nil
}

func organizationsOfUser(ctx context.Context, q sqlx.QueryerContext, userID string) ([]OrganizationMembership, error) {
	var out []OrganizationMembership
	err := sqlx.SelectContext(ctx, q, &out, `
		SELECT o.id, o.name, o.slug, o.created_at, m.role
		FROM memberships m JOIN organizations o ON o.id = m.organization_id
		WHERE m.user_id = $1
		ORDER BY o.created_at, o.id`, userID)
	if err != nil {
		return nil, fmt.Errorf("listing organizations: %w", err)
	}
	return out, nil
}

// membershipRole returns the role of a member, or fault.ErrNotFound when the
// user is not a member (or the organization does not exist).
func membershipRole(ctx context.Context, q sqlx.QueryerContext, organizationID, userID string) (access.Role, error) {
	var role access.Role
	err := sqlx.GetContext(ctx, q, &role, `SELECT role FROM memberships WHERE organization_id = $1 AND user_id = $2`,
		organizationID, userID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fault.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading membership: %w", err)
	}
	return role, nil
}

// lockMembershipRole is membershipRole under a share lock, so the role
// cannot change until the caller's transaction ends.
func lockMembershipRole(ctx context.Context, tx *sqlx.Tx, organizationID, userID string) (access.Role, error) {
	var role access.Role
	err := tx.GetContext(ctx, &role, `
		SELECT role FROM memberships WHERE organization_id = $1 AND user_id = $2 FOR SHARE`, organizationID, userID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fault.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading membership: %w", err)
	}
	return role, nil
}

// memberColumns reads a Member from memberships m joined with users u.
const memberColumns = `m.user_id, u.email, u.name, m.role, m.created_at, m.joined_via, u.banned_at IS NOT NULL AS deactivated`

func membersOf(ctx context.Context, q sqlx.QueryerContext, organizationID string) ([]Member, error) {
	var out []Member
	err := sqlx.SelectContext(ctx, q, &out, `
		SELECT `+memberColumns+`
		FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE m.organization_id = $1
		ORDER BY m.created_at, m.user_id`, organizationID)
	if err != nil {
		return nil, fmt.Errorf("listing members: %w", err)
	}
	return out, nil
}

func member(ctx context.Context, q sqlx.QueryerContext, organizationID, userID string) (Member, error) {
	var m Member
	err := sqlx.GetContext(ctx, q, &m, `
		SELECT `+memberColumns+`
		FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE m.organization_id = $1 AND m.user_id = $2`, organizationID, userID)
	if errors.Is(err, sql.ErrNoRows) {
		return m, fault.ErrNotFound
	}
	if err != nil {
		return m, fmt.Errorf("reading member: %w", err)
	}
	return m, nil
}

// lockOwners locks the owner memberships of an organization and returns
// their user IDs, so "is this the last owner" cannot race with another
// demotion or removal.
func lockOwners(ctx context.Context, tx *sqlx.Tx, organizationID string) ([]string, error) {
	var owners []string
	err := tx.SelectContext(ctx, &owners, `
		SELECT user_id FROM memberships WHERE organization_id = $1 AND role = 'owner' ORDER BY user_id FOR UPDATE`,
		organizationID)
	if err != nil {
		return nil, fmt.Errorf("locking owners: %w", err)
	}
	return owners, nil
}

func updateRole(ctx context.Context, q sqlx.ExtContext, organizationID, userID string, role access.Role) error {
	_, err := q.ExecContext(ctx, `UPDATE memberships SET role = $3 WHERE organization_id = $1 AND user_id = $2`,
		organizationID, userID, role)
	if err != nil {
		return fmt.Errorf("updating role: %w", err)
	}
	return nil
}

// deleteMembership removes a member and detaches the organization from the
// member's sessions, so access ends on the very next request.
func deleteMembership(ctx context.Context, q sqlx.ExtContext, organizationID, userID string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM memberships WHERE organization_id = $1 AND user_id = $2`,
		organizationID, userID); err != nil {
		return fmt.Errorf("deleting membership: %w", err)
	}
	if _, err := q.ExecContext(ctx, `
		UPDATE sessions SET active_organization_id = NULL
		WHERE user_id = $1 AND active_organization_id = $2`, userID, organizationID); err != nil {
		return fmt.Errorf("detaching sessions: %w", err)
	}
	return nil
}

// invitationColumns reads an invitation with its organization's and its
// inviter's names (aliases i, o, u).
const invitationColumns = `
	i.id, i.organization_id, o.name AS organization_name, i.email, i.role, coalesce(i.inviter_id, '') AS inviter_id,
	coalesce(u.name, 'operator') AS inviter_name,
	i.status, i.created_at, i.expires_at
	FROM invitations i
	JOIN organizations o ON o.id = i.organization_id
	LEFT JOIN users u ON u.id = i.inviter_id`

func insertInvitation(ctx context.Context, q sqlx.ExtContext, inv Invitation, tokenHash []byte) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO invitations (id, organization_id, email, role, token_hash, inviter_id, status, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, nullif($6, ''), $7, $8, $9)`,
		inv.ID, inv.OrganizationID, inv.Email, inv.Role, tokenHash, inv.InviterID, inv.Status, inv.CreatedAt, inv.ExpiresAt)
	if db.IsUniqueViolation(err, "invitations_pending_key") {
		return ErrInvitationPending
	}
	if err != nil {
		return fmt.Errorf("inserting invitation: %w", err)
	}
	return nil
}

// expireInvitations closes the pending invitations of an address that are
// past their expiry, so the address can be invited again.
func expireInvitations(ctx context.Context, q sqlx.ExtContext, organizationID, email string, now time.Time) error {
	_, err := q.ExecContext(ctx, `
		UPDATE invitations SET status = 'expired', closed_at = expires_at
		WHERE organization_id = $1 AND email = $2 AND status = 'pending' AND expires_at <= $3`, organizationID, email, now)
	if err != nil {
		return fmt.Errorf("expiring invitations: %w", err)
	}
	return nil
}

func countOpenInvitations(ctx context.Context, q sqlx.QueryerContext, organizationID string, now time.Time) (int, error) {
	var n int
	err := sqlx.GetContext(ctx, q, &n, `
		SELECT count(*) FROM invitations WHERE organization_id = $1 AND status = 'pending' AND expires_at > $2`,
		organizationID, now)
	if err != nil {
		return 0, fmt.Errorf("counting invitations: %w", err)
	}
	return n, nil
}

func isMemberByEmail(ctx context.Context, q sqlx.QueryerContext, organizationID, email string) (bool, error) {
	var member bool
	err := sqlx.GetContext(ctx, q, &member, `
		SELECT EXISTS (SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id
		               WHERE m.organization_id = $1 AND u.email = $2)`, organizationID, email)
	if err != nil {
		return false, fmt.Errorf("checking membership: %w", err)
	}
	return member, nil
}

func pendingInvitationsOf(ctx context.Context, q sqlx.QueryerContext, organizationID string, limit int) ([]Invitation, error) {
	out := []Invitation{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+invitationColumns+`
		WHERE i.organization_id = $1 AND i.status = 'pending'
		ORDER BY i.created_at DESC, i.id LIMIT $2`, organizationID, limit)
	if err != nil {
		return nil, fmt.Errorf("listing invitations: %w", err)
	}
	return out, nil
}

func openInvitationsFor(ctx context.Context, q sqlx.QueryerContext, email string, now time.Time, limit int) ([]Invitation, error) {
	out := []Invitation{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+invitationColumns+`
		WHERE i.email = $1 AND i.status = 'pending' AND i.expires_at > $2
		ORDER BY i.created_at DESC, i.id LIMIT $3`, email, now, limit)
	if err != nil {
		return nil, fmt.Errorf("listing invitations: %w", err)
	}
	return out, nil
}

// lockInvitation reads an invitation and its token hash under a row lock;
// a missing one is fault.ErrNotFound.
func lockInvitation(ctx context.Context, tx *sqlx.Tx, invitationID string) (Invitation, []byte, error) {
	var row struct {
		Invitation
		TokenHash []byte `db:"token_hash"`
	}
	err := tx.GetContext(ctx, &row, `SELECT i.token_hash, `+invitationColumns+`
		WHERE i.id = $1 FOR UPDATE OF i`, invitationID)
	if errors.Is(err, sql.ErrNoRows) {
		return Invitation{}, nil, fault.ErrNotFound
	}
	if err != nil {
		return Invitation{}, nil, fmt.Errorf("reading invitation: %w", err)
	}
	return row.Invitation, row.TokenHash, nil
}

func closeInvitation(ctx context.Context, q sqlx.ExtContext, invitationID, status, by string, at time.Time) error {
	_, err := q.ExecContext(ctx, `
		UPDATE invitations SET status = $2, closed_by = nullif($3, ''), closed_at = $4 WHERE id = $1 AND status = 'pending'`,
		invitationID, status, by, at)
	if err != nil {
		return fmt.Errorf("closing invitation: %w", err)
	}
	return nil
}

// SweepInvitations deletes invitations that closed or expired before
// olderThan; the audit events keep their evidence.
func SweepInvitations(ctx context.Context, q sqlx.ExecerContext, olderThan time.Time) (int64, error) {
	res, err := q.ExecContext(ctx, `
		DELETE FROM invitations WHERE coalesce(closed_at, expires_at) < $1`, olderThan)
	if err != nil {
		return 0, fmt.Errorf("sweeping invitations: %w", err)
	}
	return res.RowsAffected()
}

// lockThrottles creates missing throttle rows and locks them all, in the
// given (sorted) order, returning their states by subject.
func lockThrottles(ctx context.Context, tx *sqlx.Tx, subjects []string, now time.Time) (map[string]throttleState, error) {
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO sign_in_throttles (subject, level, updated_at)
		SELECT subject, 0, $2 FROM unnest($1::text[]) AS subject
		ON CONFLICT (subject) DO NOTHING`, pq.Array(subjects), now); err != nil {
		return nil, fmt.Errorf("creating throttles: %w", err)
	}
	var rows []throttleState
	if err := tx.SelectContext(ctx, &rows, `
		SELECT subject, level, updated_at FROM sign_in_throttles
		WHERE subject = ANY($1) ORDER BY subject FOR UPDATE`, pq.Array(subjects)); err != nil {
		return nil, fmt.Errorf("locking throttles: %w", err)
	}
	out := make(map[string]throttleState, len(rows))
	for _, r := range rows {
		out[r.Subject] = r
	}
	return out, nil
}

func saveThrottle(ctx context.Context, q sqlx.ExtContext, st throttleState) error {
	if _, err := q.ExecContext(ctx, `UPDATE sign_in_throttles SET level = $2, updated_at = $3 WHERE subject = $1`,
		st.Subject, st.Level, st.UpdatedAt); err != nil {
		return fmt.Errorf("counting attempt: %w", err)
	}
	return nil
}

func refundThrottles(ctx context.Context, q sqlx.ExtContext, subjects []string) error {
	if _, err := q.ExecContext(ctx, `
		UPDATE sign_in_throttles SET level = greatest(level - 1, 0) WHERE subject = ANY($1)`, pq.Array(subjects)); err != nil {
		return fmt.Errorf("refunding attempt: %w", err)
	}
	return nil
}

func deleteThrottles(ctx context.Context, q sqlx.ExtContext, subjects []string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM sign_in_throttles WHERE subject = ANY($1)`, pq.Array(subjects)); err != nil {
		return fmt.Errorf("clearing throttle: %w", err)
	}
	return nil
}

// SweepThrottles deletes throttle rows untouched since olderThan: every
// policy has drained by then, so they would admit anyway.
func SweepThrottles(ctx context.Context, q sqlx.ExecerContext, olderThan time.Time) (int64, error) {
	res, err := q.ExecContext(ctx, `DELETE FROM sign_in_throttles WHERE updated_at < $1`, olderThan)
	if err != nil {
		return 0, fmt.Errorf("sweeping sign-in throttles: %w", err)
	}
	return res.RowsAffected()
}

func organizationByID(ctx context.Context, q sqlx.QueryerContext, organizationID string) (Organization, error) {
	var o Organization
	err := sqlx.GetContext(ctx, q, &o, `SELECT `+organizationColumns+` FROM organizations WHERE id = $1`, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return o, fault.ErrNotFound
	}
	if err != nil {
		return o, fmt.Errorf("reading organization: %w", err)
	}
	return o, nil
}

const organizationColumns = `id, name, slug, created_at, default_execution_mode, email, allow_force_delete_workspaces`

func deleteOrganizationTree(ctx context.Context, tx *sqlx.Tx, organizationID string) error {
	for _, stmt := range []string{
		`UPDATE sessions SET active_organization_id = NULL WHERE active_organization_id = $1`,
		`DELETE FROM teams WHERE organization_id = $1`,
		`DELETE FROM memberships WHERE organization_id = $1`,
		`DELETE FROM invitations WHERE organization_id = $1`,
		`DELETE FROM user_tokens WHERE organization_id = $1`,
		`DELETE FROM service_account_tokens WHERE organization_id = $1`,
		`DELETE FROM service_accounts WHERE organization_id = $1`,
		`DELETE FROM capacity_leases WHERE policy_version_id IN (SELECT id FROM policy_versions WHERE organization_id = $1)`,
		`DELETE FROM policy_attachments WHERE organization_id = $1`,
		`DELETE FROM policy_artifacts WHERE organization_id = $1`,
		`DELETE FROM policy_versions WHERE organization_id = $1`,
		`DELETE FROM policy_sets WHERE organization_id = $1`,
		`DELETE FROM workflow_dispatches WHERE organization_id = $1`,
		// A set's variables and scope rows go with it.
		`DELETE FROM variable_sets WHERE organization_id = $1`,
		`DELETE FROM workspace_tags WHERE organization_id = $1`,
		// Organization-wide configuration: credential profiles not bound to
		// a workspace, the code-host installation with its repositories
		// and pending installation states, and SSO providers (their
		// domains, keys and replay records go with them).
		`DELETE FROM credential_profile_versions WHERE organization_id = $1`,
		`DELETE FROM credential_profiles WHERE organization_id = $1`,
		`DELETE FROM github_install_states WHERE organization_id = $1`,
		`DELETE FROM github_repositories WHERE organization_id = $1`,
		`DELETE FROM github_installations WHERE organization_id = $1`,
		`DELETE FROM sso_providers WHERE organization_id = $1`,
		// Stored answers to retried requests hold the organization's data.
		`DELETE FROM idempotency_records WHERE organization_id = $1`,
		`DELETE FROM projects WHERE organization_id = $1`,
		`DELETE FROM organizations WHERE id = $1`,
	} {
		if _, err := tx.ExecContext(ctx, stmt, organizationID); err != nil {
			return fmt.Errorf("deleting organization: %w", err)
		}
	}
	return nil
}

func updateDefaultExecutionMode(ctx context.Context, q sqlx.ExtContext, organizationID, mode string) error {
	res, err := q.ExecContext(ctx, `UPDATE organizations SET default_execution_mode = $2 WHERE id = $1`, organizationID, mode)
	if err != nil {
		return fmt.Errorf("writing organization settings: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fault.ErrNotFound
	}
	return nil
}

// lastOwnersTeamMember locks the organization's owners team and reports
// whether userID is its only member: ending that membership would leave
// the team empty.
func lastOwnersTeamMember(ctx context.Context, tx *sqlx.Tx, organizationID, userID string) (bool, error) {
	var members []string
	err := sqlx.SelectContext(ctx, tx, &members, `
		SELECT m.user_id FROM teams t JOIN team_members m ON m.team_id = t.id
		WHERE t.organization_id = $1 AND t.owners
		ORDER BY m.user_id FOR UPDATE OF t`, organizationID)
	if err != nil {
		return false, fmt.Errorf("reading the owners team: %w", err)
	}
	return len(members) == 1 && members[0] == userID, nil
}
