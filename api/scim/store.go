package scim

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
)

// TokenStatus is what an owner may know of the SCIM token: never the
// token.
type TokenStatus struct {
	Exists     bool       `json:"exists"`
	CreatedAt  *time.Time `json:"createdAt,omitempty" db:"created_at"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty" db:"last_used_at"`
}

func replaceToken(ctx context.Context, q sqlx.ExtContext, organizationID string, hash []byte, createdBy string, at time.Time) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO scim_tokens (organization_id, token_hash, created_by, created_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (organization_id) DO UPDATE
		SET token_hash = excluded.token_hash, created_by = excluded.created_by, created_at = excluded.created_at, last_used_at = NULL`,
		organizationID, hash, createdBy, at)
	if err != nil {
		return fmt.Errorf("storing SCIM token: %w", err)
	}
	return nil
}

func tokenStatus(ctx context.Context, q sqlx.QueryerContext, organizationID string) (TokenStatus, error) {
	var st TokenStatus
	err := sqlx.GetContext(ctx, q, &st, `SELECT created_at, last_used_at FROM scim_tokens WHERE organization_id = $1`, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return TokenStatus{}, nil
	}
	if err != nil {
		return TokenStatus{}, fmt.Errorf("reading SCIM token: %w", err)
	}
	st.Exists = true
	return st, nil
}

// organizationOfToken resolves a token hash to its organization and
// records the use, at most once a minute so that a provisioning burst
// does not write on every request.
func organizationOfToken(ctx context.Context, q sqlx.QueryerContext, hash []byte, now time.Time) (string, error) {
	var organizationID string
	err := sqlx.GetContext(ctx, q, &organizationID, `
		WITH used AS (
			UPDATE scim_tokens SET last_used_at = $2
			WHERE token_hash = $1 AND (last_used_at IS NULL OR last_used_at < $2::timestamptz - interval '1 minute')
		)
		SELECT organization_id FROM scim_tokens WHERE token_hash = $1`, hash, now)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrInvalidToken
	}
	if err != nil {
		return "", fmt.Errorf("reading SCIM token: %w", err)
	}
	return organizationID, nil
}

// userRow is a scim_users row with its account's state.
type userRow struct {
	UserID         string          `db:"user_id"`
	OrganizationID string          `db:"organization_id"`
	UserName       string          `db:"user_name"`
	ExternalID     *string         `db:"external_id"`
	Attributes     json.RawMessage `db:"attributes"`
	Active         bool            `db:"active"`
	CreatedAt      time.Time       `db:"created_at"`
	UpdatedAt      time.Time       `db:"updated_at"`
}

func (r userRow) user() (User, error) {
	attrs := map[string]any{}
	if err := json.Unmarshal(r.Attributes, &attrs); err != nil {
		return User{}, fmt.Errorf("decoding SCIM attributes: %w", err)
	}
	return User{ID: r.UserID, OrganizationID: r.OrganizationID, UserName: r.UserName, ExternalID: r.ExternalID,
		Active: r.Active, Attributes: attrs, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}, nil
}

const userColumnsSQL = `su.user_id, su.organization_id, su.user_name, su.external_id, su.attributes,
	u.banned_at IS NULL AS active, su.created_at, su.updated_at`

// usersFrom is the provisioned, not deleted, users of organization $1.
const usersFrom = ` FROM scim_users su JOIN users u ON u.id = su.user_id
	WHERE su.organization_id = $1 AND su.deleted_at IS NULL`

func insertUser(ctx context.Context, q sqlx.ExtContext, u User) error {
	attrs, err := json.Marshal(u.Attributes)
	if err != nil {
		return fmt.Errorf("encoding SCIM attributes: %w", err)
	}
	_, err = q.ExecContext(ctx, `
		INSERT INTO scim_users (user_id, organization_id, user_name, external_id, display_name, attributes, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
		u.ID, u.OrganizationID, u.UserName, u.ExternalID, u.displayName(), string(attrs), u.CreatedAt)
	if db.IsUniqueViolation(err, "scim_users_user_name_key") {
		return fmt.Errorf("userName %q: %w", u.UserName, ErrUniqueness)
	}
	if err != nil {
		return fmt.Errorf("inserting SCIM user: %w", err)
	}
	return nil
}

func updateUser(ctx context.Context, q sqlx.ExtContext, u User) error {
	attrs, err := json.Marshal(u.Attributes)
	if err != nil {
		return fmt.Errorf("encoding SCIM attributes: %w", err)
	}
	_, err = q.ExecContext(ctx, `
		UPDATE scim_users SET user_name = $3, external_id = $4, display_name = $5, attributes = $6, updated_at = $7
		WHERE organization_id = $1 AND user_id = $2`,
		u.OrganizationID, u.ID, u.UserName, u.ExternalID, u.displayName(), string(attrs), u.UpdatedAt)
	if db.IsUniqueViolation(err, "scim_users_user_name_key") {
		return fmt.Errorf("userName %q: %w", u.UserName, ErrUniqueness)
	}
	if err != nil {
		return fmt.Errorf("updating SCIM user: %w", err)
	}
	return nil
}

func markUserDeleted(ctx context.Context, q sqlx.ExtContext, organizationID, userID string, at time.Time) error {
	if _, err := q.ExecContext(ctx, `UPDATE scim_users SET deleted_at = $3 WHERE organization_id = $1 AND user_id = $2`,
		organizationID, userID, at); err != nil {
		return fmt.Errorf("deleting SCIM user: %w", err)
	}
	return nil
}

// userByID reads a user this organization's SCIM provisioned; forUpdate
// locks its row, which serializes SCIM changes to the person. Anyone else
// is not found.
func userByID(ctx context.Context, q sqlx.QueryerContext, organizationID, userID string, forUpdate bool) (User, error) {
	query := `SELECT ` + userColumnsSQL + usersFrom + ` AND su.user_id = $2`
	if forUpdate {
		query += ` FOR UPDATE OF su`
	}
	var r userRow
	err := sqlx.GetContext(ctx, q, &r, query, organizationID, userID)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, fault.ErrNotFound
	}
	if err != nil {
		return User{}, fmt.Errorf("reading SCIM user: %w", err)
	}
	return r.user()
}

// listUsers reads one page (offset, limit) of the users matching f, oldest
// first, and how many match. A limit of 0 reads only the count.
func listUsers(ctx context.Context, q sqlx.QueryerContext, organizationID string, f sqlFilter, offset, limit int) ([]User, int, error) {
	where, args := filtered(f, organizationID)
	var total int
	if err := sqlx.GetContext(ctx, q, &total, `SELECT count(*)`+usersFrom+where, args...); err != nil {
		return nil, 0, fmt.Errorf("counting SCIM users: %w", err)
	}
	out := []User{}
	if limit == 0 || total <= offset {
		return out, total, nil
	}
	var rows []userRow
	n := len(args)
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT `+userColumnsSQL+usersFrom+where+
		fmt.Sprintf(` ORDER BY su.created_at, su.user_id LIMIT $%d OFFSET $%d`, n+1, n+2), append(args, limit, offset)...); err != nil {
		return nil, 0, fmt.Errorf("listing SCIM users: %w", err)
	}
	for _, r := range rows {
		u, err := r.user()
		if err != nil {
			return nil, 0, err
		}
		out = append(out, u)
	}
	return out, total, nil
}

// filtered is the WHERE addition and the arguments for a compiled filter
// numbered from $2 (the organization is $1).
func filtered(f sqlFilter, organizationID string) (string, []any) {
	args := append([]any{organizationID}, f.args...)
	if f.cond == "" {
		return "", args
	}
	return " AND " + f.cond, args
}

// provisionedUsers returns which of userIDs this organization's SCIM
// provisioned (and has not deleted).
func provisionedUsers(ctx context.Context, q sqlx.QueryerContext, organizationID string, userIDs []string) (map[string]bool, error) {
	var found []string
	if err := sqlx.SelectContext(ctx, q, &found, `SELECT user_id FROM scim_users
		WHERE organization_id = $1 AND deleted_at IS NULL AND user_id = ANY($2)`, organizationID, pq.Array(userIDs)); err != nil {
		return nil, fmt.Errorf("reading SCIM users: %w", err)
	}
	out := make(map[string]bool, len(found))
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}

// groupsFrom is the teams of organization $1 but its owners team, which
// SCIM never sees.
const groupsFrom = ` FROM teams t LEFT JOIN scim_groups g ON g.team_id = t.id
	WHERE t.organization_id = $1 AND NOT t.owners`

type groupRow struct {
	ID          string  `db:"id"`
	DisplayName string  `db:"name"`
	ExternalID  *string `db:"external_id"`
}

// groupByID reads a team with its provisioned members; forUpdate locks
// the team's row, which serializes changes to its members.
func groupByID(ctx context.Context, q sqlx.QueryerContext, organizationID, teamID string, forUpdate bool) (Group, error) {
	query := `SELECT t.id, t.name, g.external_id` + groupsFrom + ` AND t.id = $2`
	if forUpdate {
		query += ` FOR UPDATE OF t`
	}
	var r groupRow
	err := sqlx.GetContext(ctx, q, &r, query, organizationID, teamID)
	if errors.Is(err, sql.ErrNoRows) {
		return Group{}, fault.ErrNotFound
	}
	if err != nil {
		return Group{}, fmt.Errorf("reading team: %w", err)
	}
	groups := []Group{{ID: r.ID, DisplayName: r.DisplayName, ExternalID: r.ExternalID}}
	if err := withMembers(ctx, q, organizationID, groups); err != nil {
		return Group{}, err
	}
	return groups[0], nil
}

func listGroups(ctx context.Context, q sqlx.QueryerContext, organizationID string, f sqlFilter, offset, limit int, members bool) ([]Group, int, error) {
	where, args := filtered(f, organizationID)
	var total int
	if err := sqlx.GetContext(ctx, q, &total, `SELECT count(*)`+groupsFrom+where, args...); err != nil {
		return nil, 0, fmt.Errorf("counting teams: %w", err)
	}
	out := []Group{}
	if limit == 0 || total <= offset {
		return out, total, nil
	}
	var rows []groupRow
	n := len(args)
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT t.id, t.name, g.external_id`+groupsFrom+where+
		fmt.Sprintf(` ORDER BY t.created_at, t.id LIMIT $%d OFFSET $%d`, n+1, n+2), append(args, limit, offset)...); err != nil {
		return nil, 0, fmt.Errorf("listing teams: %w", err)
	}
	for _, r := range rows {
		out = append(out, Group{ID: r.ID, DisplayName: r.DisplayName, ExternalID: r.ExternalID})
	}
	if members {
		if err := withMembers(ctx, q, organizationID, out); err != nil {
			return nil, 0, err
		}
	}
	return out, total, nil
}

// withMembers fills in the provisioned members of groups.
func withMembers(ctx context.Context, q sqlx.QueryerContext, organizationID string, groups []Group) error {
	ids := make([]string, 0, len(groups))
	for _, g := range groups {
		ids = append(ids, g.ID)
	}
	var rows []struct {
		TeamID string `db:"team_id"`
		GroupMember
	}
	if err := sqlx.SelectContext(ctx, q, &rows, `
		SELECT m.team_id, su.user_id, su.user_name
		FROM team_members m JOIN scim_users su ON su.user_id = m.user_id AND su.organization_id = m.organization_id
		WHERE m.organization_id = $1 AND m.team_id = ANY($2) AND su.deleted_at IS NULL
		ORDER BY m.team_id, m.created_at, su.user_id`, organizationID, pq.Array(ids)); err != nil {
		return fmt.Errorf("reading team members: %w", err)
	}
	byTeam := map[string][]GroupMember{}
	for _, r := range rows {
		byTeam[r.TeamID] = append(byTeam[r.TeamID], r.GroupMember)
	}
	for i := range groups {
		groups[i].Members = byTeam[groups[i].ID]
	}
	return nil
}

func setGroupExternalID(ctx context.Context, q sqlx.ExtContext, organizationID, teamID string, externalID *string) error {
	_, err := q.ExecContext(ctx, `
		INSERT INTO scim_groups (team_id, organization_id, external_id) VALUES ($1, $2, $3)
		ON CONFLICT (team_id) DO UPDATE SET external_id = excluded.external_id`, teamID, organizationID, externalID)
	if err != nil {
		return fmt.Errorf("storing group externalId: %w", err)
	}
	return nil
}
