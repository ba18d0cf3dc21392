package team

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/fault"
)

// Invitee is someone invited to the organization and put in a team before
// joining, as HCP Terraform allows. The team membership starts in the
// transaction that accepts the invitation; canceling or declining it
// drops the place, and an expired invitation holds none.
type Invitee struct {
	InvitationID string    `db:"invitation_id"`
	Email        string    `db:"email"`
	AddedAt      time.Time `db:"created_at"`
}

// openInvitation is the condition, on invitations aliased i, of an
// invitation that can still be accepted.
const openInvitation = `i.status = 'pending' AND i.expires_at > now()`

// ResolveMemberships sorts membership subjects (what follows the
// organization in an ou- ID) into members and open invitations of the
// organization. A member is named by its user ID or by the invitation it
// joined with; an open invitation by its ID. Anything else, another
// organization's included, is not found.
func ResolveMemberships(ctx context.Context, q sqlx.QueryerContext, organizationID string, subjects []string) (userIDs, invitationIDs []string, err error) {
	var rows []struct {
		Subject      string  `db:"subject"`
		UserID       *string `db:"user_id"`
		InvitationID *string `db:"invitation_id"`
	}
	err = sqlx.SelectContext(ctx, q, &rows, `
		SELECT s.subject, m.user_id, i.id AS invitation_id
		FROM unnest($2::text[]) AS s (subject)
		LEFT JOIN memberships m ON m.organization_id = $1 AND (m.user_id = s.subject OR m.invitation_id = s.subject)
		LEFT JOIN invitations i ON m.user_id IS NULL AND i.organization_id = $1 AND i.id = s.subject AND `+openInvitation,
		organizationID, pq.Array(subjects))
	if err != nil {
		return nil, nil, fmt.Errorf("resolving memberships: %w", err)
	}
	for _, r := range rows {
		switch {
		case r.UserID != nil:
			userIDs = append(userIDs, *r.UserID)
		case r.InvitationID != nil:
			invitationIDs = append(invitationIDs, *r.InvitationID)
		default:
			return nil, nil, fmt.Errorf("membership %s: %w", r.Subject, fault.ErrNotFound)
		}
	}
	return userIDs, invitationIDs, nil
}

// AddInvitees puts open invitations of the organization in a team. Like
// members, only an owner puts anyone in the owners team.
func (s *Service) AddInvitees(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID string, invitationIDs []string) error {
	t, err := s.membershipTeam(ctx, tx, p, teamID)
	if err != nil {
		return err
	}
	for _, inv := range invitationIDs {
		// Locked so that it is neither accepted nor canceled before the
		// place is taken: acceptance would miss it, cancellation leave it.
		var open bool
		err := tx.GetContext(ctx, &open, `SELECT EXISTS (SELECT 1 FROM invitations i
			WHERE i.id = $1 AND i.organization_id = $2 AND `+openInvitation+` FOR SHARE)`, inv, p.OrganizationID)
		if err != nil {
			return fmt.Errorf("reading invitation: %w", err)
		}
		if !open {
			return fmt.Errorf("invitation %s: %w", inv, fault.ErrNotFound)
		}
		err = changeInvitee(ctx, tx, p, t.ID, inv, "team.invitee_added", `INSERT INTO team_invitations (team_id, organization_id, invitation_id)
			VALUES ($1, $3, $2) ON CONFLICT DO NOTHING`)
		if err != nil {
			return err
		}
	}
	return nil
}

// RemoveInvitees takes invitations out of a team.
func (s *Service) RemoveInvitees(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID string, invitationIDs []string) error {
	t, err := s.membershipTeam(ctx, tx, p, teamID)
	if err != nil {
		return err
	}
	for _, inv := range invitationIDs {
		err := changeInvitee(ctx, tx, p, t.ID, inv, "team.invitee_removed",
			`DELETE FROM team_invitations WHERE team_id = $1 AND invitation_id = $2 AND organization_id = $3`)
		if err != nil {
			return err
		}
	}
	return nil
}

// changeInvitee runs an insert or delete of one team place ($1 team, $2
// invitation, $3 organization) and audits it when it changed anything.
func changeInvitee(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID, invitationID, action, stmt string) error {
	res, err := tx.ExecContext(ctx, stmt, teamID, invitationID, p.OrganizationID)
	if err != nil {
		return fmt.Errorf("changing team invitee: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("changing team invitee: %w", err)
	}
	if n == 0 {
		return nil
	}
	return audit.Record(ctx, tx, p, action, "team", teamID, map[string]any{"invitation_id": invitationID})
}

// Invitees lists the open invitations in a team.
func (s *Service) Invitees(ctx context.Context, p access.Principal, teamID string) ([]Invitee, error) {
	t, err := s.visibleTeam(ctx, s.db, p, teamID, false)
	if err != nil {
		return nil, err
	}
	return InviteesIn(ctx, s.db, t.ID)
}

// InviteesIn lists a team's open invitations inside the caller's
// transaction (visibility checked by the caller).
func InviteesIn(ctx context.Context, q sqlx.QueryerContext, teamID string) ([]Invitee, error) {
	out := []Invitee{}
	err := sqlx.SelectContext(ctx, q, &out, `
		SELECT ti.invitation_id, i.email, ti.created_at
		FROM team_invitations ti JOIN invitations i ON i.id = ti.invitation_id
		WHERE ti.team_id = $1 AND `+openInvitation+`
		ORDER BY i.email, i.id`, teamID)
	if err != nil {
		return nil, fmt.Errorf("listing team invitees: %w", err)
	}
	return out, nil
}

// VisibleTeamsOf returns, for members (by user ID) and open invitations
// (by invitation ID) of the principal's organization, the IDs of their
// teams that the principal may see, ordered by name.
func VisibleTeamsOf(ctx context.Context, q sqlx.QueryerContext, p access.Principal, userIDs, invitationIDs []string) (map[string][]string, error) {
	var rows []struct {
		Subject string `db:"subject"`
		TeamID  string `db:"team_id"`
	}
	err := sqlx.SelectContext(ctx, q, &rows, `
		SELECT x.subject, t.id AS team_id FROM (
			SELECT user_id AS subject, team_id FROM team_members WHERE organization_id = $1 AND user_id = ANY($2)
			UNION ALL
			SELECT invitation_id, team_id FROM team_invitations WHERE organization_id = $1 AND invitation_id = ANY($3)
		) x JOIN teams t ON t.id = x.team_id
		WHERE $4 OR t.visibility = 'organization'
		   OR EXISTS (SELECT 1 FROM team_members v WHERE v.team_id = t.id AND v.user_id = $5)
		ORDER BY x.subject, lower(t.name), t.id`,
		p.OrganizationID, pq.Array(userIDs), pq.Array(invitationIDs), p.Require(access.PermTeamReadSecret) == nil, p.ID)
	if err != nil {
		return nil, fmt.Errorf("reading teams of members: %w", err)
	}
	out := map[string][]string{}
	for _, r := range rows {
		out[r.Subject] = append(out[r.Subject], r.TeamID)
	}
	return out, nil
}

// JoinInvitedTeams turns an accepted invitation's team places into team
// memberships of the user who accepted it, in the accepting transaction,
// and returns the teams joined.
func JoinInvitedTeams(ctx context.Context, tx *sqlx.Tx, invitationID, userID string) ([]string, error) {
	var teams []string
	err := tx.SelectContext(ctx, &teams, `
		WITH places AS (DELETE FROM team_invitations WHERE invitation_id = $1 RETURNING team_id, organization_id)
		INSERT INTO team_members (team_id, organization_id, user_id)
		SELECT team_id, organization_id, $2 FROM places
		ON CONFLICT DO NOTHING RETURNING team_id`, invitationID, userID)
	if err != nil {
		return nil, fmt.Errorf("joining invited teams: %w", err)
	}
	return teams, nil
}

// DropInvitation removes a closed invitation from every team it was put in.
func DropInvitation(ctx context.Context, tx *sqlx.Tx, invitationID string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM team_invitations WHERE invitation_id = $1`, invitationID); err != nil {
		return fmt.Errorf("dropping invitee from teams: %w", err)
	}
	return nil
}
