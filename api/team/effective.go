package team

import (
	"context"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/fault"
)

// Effective is a member's effective access as the one mapping in
// api/access derives it from their role and their teams' grants, limited
// to what the viewer may see.
type Effective struct {
	Member Member
	// Teams are the member's teams the viewer may see.
	Teams []Team
	// Workspaces are the workspaces the member reaches that the viewer
	// can read, by name.
	Workspaces []EffectiveWorkspace
	// Organization is what the member may do across the organization.
	Organization access.PermissionSet
}

// EffectiveWorkspace is what a member may do in one workspace and what
// gives it to them: their role, or the names of their teams.
type EffectiveWorkspace struct {
	WorkspaceID   string `db:"id"`
	WorkspaceName string `db:"name"`
	ProjectID     string `db:"project_id"`
	Permissions   access.PermissionSet
	Via           []string
}

// secretTeamName stands for a team of the member the viewer may not see:
// its grants still count, its name stays hidden.
const secretTeamName = "a secret team"

// EffectiveAccess derives a member's effective access. The viewer is the
// member themselves or someone who manages teams or members; anyone else
// is refused, and a user outside the organization is not found.
func (s *Service) EffectiveAccess(ctx context.Context, viewer access.Principal, userID string) (Effective, error) {
	if viewer.Kind != access.KindUser || viewer.ID != userID {
		if viewer.Require(access.PermTeamManage) != nil && viewer.Require(access.PermMemberManage) != nil {
			return Effective{}, fmt.Errorf("%w: missing %s or %s", fault.ErrForbidden, access.PermTeamManage, access.PermMemberManage)
		}
	}
	if err := viewer.Require(access.PermOrganizationRead); err != nil {
		return Effective{}, err
	}
	m, err := MemberOf(ctx, s.db, viewer.OrganizationID, userID)
	if err != nil {
		return Effective{}, err
	}
	rows, err := readGrantRows(ctx, s.db, memberTeams, viewer.OrganizationID, userID)
	if err != nil {
		return Effective{}, err
	}
	visible, err := listTeams(ctx, s.db, viewer.OrganizationID, viewer.ID, viewer.Require(access.PermTeamReadSecret) == nil, ListFilter{})
	if err != nil {
		return Effective{}, err
	}
	// The member as every request of theirs resolves them, and each
	// source of their access alone: the role, then every team.
	member := access.Principal{Kind: access.KindUser, ID: userID, OrganizationID: viewer.OrganizationID,
		Role: m.Role, Permissions: access.PermissionsOf(m.Role)}
	type source struct {
		name string
		p    access.Principal
	}
	sources := []source{{string(m.Role), access.Principal{Permissions: member.Permissions}}}
	out := Effective{Member: m}
	for _, t := range rows.Teams {
		var alone access.TeamGrants
		alone.AddOrganization(t.OrganizationAccess, t.Owners)
		for _, w := range rows.Workspaces {
			if w.TeamID == t.ID {
				alone.AddWorkspace(w.WorkspaceID, w.WorkspaceAccess)
			}
		}
		for _, p := range rows.Projects {
			if p.TeamID == t.ID {
				alone.AddProject(p.ProjectID, p.projectAccess())
			}
		}
		name := secretTeamName
		if i := slices.IndexFunc(visible, func(v Team) bool { return v.ID == t.ID }); i >= 0 {
			name = t.Name
			out.Teams = append(out.Teams, visible[i])
		}
		sources = append(sources, source{name, access.Principal{Grants: alone}})
	}
	member.Grants, err = GrantsOf(ctx, s.db, viewer.OrganizationID, userID)
	if err != nil {
		return Effective{}, err
	}
	out.Organization = member.OrganizationPermissions()
	workspaces, err := reachableWorkspaces(ctx, s.db, viewer.OrganizationID, member.WorkspaceScope())
	if err != nil {
		return Effective{}, err
	}
	for _, w := range workspaces {
		if viewer.RequireIn(w.WorkspaceID, w.ProjectID, access.PermWorkspaceRead) != nil ||
			!member.CanReadWorkspace(w.WorkspaceID, w.ProjectID) {
			continue
		}
		w.Permissions = member.PermissionsIn(w.WorkspaceID, w.ProjectID)
		for _, src := range sources {
			if src.p.CanReadWorkspace(w.WorkspaceID, w.ProjectID) && !slices.Contains(w.Via, src.name) {
				w.Via = append(w.Via, src.name)
			}
		}
		out.Workspaces = append(out.Workspaces, w)
	}
	return out, nil
}

// reachableWorkspaces lists an organization's workspaces in a scope, by
// name.
func reachableWorkspaces(ctx context.Context, q sqlx.QueryerContext, organizationID string, scope access.Scope) ([]EffectiveWorkspace, error) {
	var out []EffectiveWorkspace
	err := sqlx.SelectContext(ctx, q, &out, `SELECT id, name, project_id FROM workspaces
		WHERE organization_id = $1 AND ($2 OR id = ANY($3::text[]) OR project_id = ANY($4::text[]))
		ORDER BY lower(name), id`, organizationID, scope.All, pq.Array(scope.WorkspaceIDs), pq.Array(scope.ProjectIDs))
	if err != nil {
		return nil, fmt.Errorf("listing reachable workspaces: %w", err)
	}
	return out, nil
}

// TeamCounts counts, for every member of the organization in a team, the
// teams the principal may see that they are in.
func (s *Service) TeamCounts(ctx context.Context, p access.Principal) (map[string]int, error) {
	teams, err := s.List(ctx, p, ListFilter{})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(teams))
	for _, t := range teams {
		ids = append(ids, t.ID)
	}
	var rows []struct {
		UserID string `db:"user_id"`
		Teams  int    `db:"teams"`
	}
	err = sqlx.SelectContext(ctx, s.db, &rows, `SELECT user_id, count(*) AS teams FROM team_members
		WHERE organization_id = $1 AND team_id = ANY($2) GROUP BY user_id`, p.OrganizationID, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("counting team memberships: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.UserID] = r.Teams
	}
	return out, nil
}
