package team

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
)

// MembersIn lists a team's members inside the caller's transaction, for
// rendering a team just changed (visibility was checked by the change).
func MembersIn(ctx context.Context, q sqlx.QueryerContext, teamID string) ([]Member, error) {
	return membersOf(ctx, q, teamID)
}

// TeamIn reads a team inside the caller's transaction, for rendering what
// a change just named (the change checked that the team may be managed).
func TeamIn(ctx context.Context, q sqlx.QueryerContext, organizationID, teamID string) (Team, error) {
	return teamByID(ctx, q, organizationID, teamID, false)
}

// MemberOf reads one member of an organization as a team member would be
// shown; someone outside it is not found.
func MemberOf(ctx context.Context, q sqlx.QueryerContext, organizationID, userID string) (Member, error) {
	var m Member
	err := sqlx.GetContext(ctx, q, &m, `SELECT m.user_id, m.invitation_id, u.name, u.email, m.role, m.created_at
		FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE m.organization_id = $1 AND m.user_id = $2 AND u.banned_at IS NULL`, organizationID, userID)
	if errors.Is(err, sql.ErrNoRows) {
		return Member{}, fault.ErrNotFound
	}
	if err != nil {
		return Member{}, fmt.Errorf("reading member: %w", err)
	}
	return m, nil
}

// CreateEmptyOwnersTeam creates the owners team of an organization that
// has no member yet (the operator provisions those): like every
// organization it has its owners team, which holds its owners once there
// are any.
func CreateEmptyOwnersTeam(ctx context.Context, tx *sqlx.Tx, organizationID string, at time.Time) (Team, error) {
	t := Team{ID: id.New("team"), OrganizationID: organizationID, Name: OwnersName, Visibility: VisibilityOrganization,
		Owners: true, AllowMemberTokenManagement: true, CreatedBy: "operator", CreatedAt: at, UpdatedAt: at}
	return t, insertTeam(ctx, tx, t)
}
