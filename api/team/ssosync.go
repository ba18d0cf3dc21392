package team

import (
	"context"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// SSOTeam is a team as group mapping sees it.
type SSOTeam struct {
	ID        string  `db:"id"`
	Name      string  `db:"name"`
	SSOTeamID *string `db:"sso_team_id"`
	Member    bool    `db:"member"`
}

// Mapped reports whether an identity provider's group names this team:
// exactly and case-sensitively, by name or by SSO team ID (for providers
// that send group IDs), as HCP matches them.
func (t SSOTeam) Mapped(groups []string) bool {
	return slices.Contains(groups, t.Name) || (t.SSOTeamID != nil && slices.Contains(groups, *t.SSOTeamID))
}

// SSOTeamsFor lists the organization's teams that groups can map onto (all
// but the owners team, which is never assigned this way), each marked with
// whether userID is a member now.
func SSOTeamsFor(ctx context.Context, q sqlx.QueryerContext, organizationID, userID string) ([]SSOTeam, error) {
	var out []SSOTeam
	err := sqlx.SelectContext(ctx, q, &out, `
		SELECT t.id, t.name, t.sso_team_id,
		       EXISTS (SELECT 1 FROM team_members m WHERE m.team_id = t.id AND m.user_id = $2) AS member
		FROM teams t WHERE t.organization_id = $1 AND NOT t.owners
		ORDER BY t.name, t.id FOR UPDATE OF t`, organizationID, userID)
	if err != nil {
		return nil, fmt.Errorf("reading teams for group mapping: %w", err)
	}
	return out, nil
}

// SyncSSOTeams makes a member's teams follow the groups an identity
// provider asserted: teams the groups name are joined, teams they do not
// name are left. The owners team is neither joined nor left. It returns
// the names of the teams joined and left.
func SyncSSOTeams(ctx context.Context, tx *sqlx.Tx, organizationID, userID string, groups []string) (joined, left []string, err error) {
	teams, err := SSOTeamsFor(ctx, tx, organizationID, userID)
	if err != nil {
		return nil, nil, err
	}
	var leave []string
	for _, t := range teams {
		switch mapped := t.Mapped(groups); {
		case mapped && !t.Member:
			if _, err := addMember(ctx, tx, organizationID, t.ID, userID); err != nil {
				return nil, nil, err
			}
			joined = append(joined, t.Name)
		case !mapped && t.Member:
			leave = append(leave, t.ID)
			left = append(left, t.Name)
		}
	}
	if len(leave) > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM team_members WHERE user_id = $1 AND team_id = ANY($2)`,
			userID, pq.Array(leave)); err != nil {
			return nil, nil, fmt.Errorf("leaving unmapped teams: %w", err)
		}
	}
	return joined, left, nil
}
