package team

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
)

const flagColumns = `manage_policies, manage_policy_overrides, manage_workspaces, manage_projects,
	manage_vcs_settings, manage_providers, manage_modules, manage_run_tasks, read_workspaces, read_projects,
	manage_membership, manage_teams, manage_organization_access, access_secret_teams, manage_agent_pools`

const teamColumns = `t.id, t.organization_id, t.name, t.sso_team_id, t.visibility, t.owners,
	t.allow_member_token_management, t.created_by, t.created_at, t.updated_at,
	t.manage_policies, t.manage_policy_overrides, t.manage_workspaces, t.manage_projects,
	t.manage_vcs_settings, t.manage_providers, t.manage_modules, t.manage_run_tasks, t.read_workspaces,
	t.read_projects, t.manage_membership, t.manage_teams, t.manage_organization_access,
	t.access_secret_teams, t.manage_agent_pools,
	(SELECT count(*) FROM team_members m WHERE m.team_id = t.id) AS users_count`

func uniqueViolation(err error) error {
	switch {
	case db.IsUniqueViolation(err, "teams_organization_name_key"):
		return ErrNameTaken
	case db.IsUniqueViolation(err, "teams_organization_sso_key"):
		return ErrSSOTeamIDTaken
	case db.IsUniqueViolation(err, "team_workspace_access_team_id_workspace_id_key"),
		db.IsUniqueViolation(err, "team_project_access_team_id_project_id_key"):
		return ErrGrantExists
	}
	return nil
}

func insertTeam(ctx context.Context, q sqlx.ExtContext, t Team) error {
	o := t.OrganizationAccess
	_, err := q.ExecContext(ctx, `
		INSERT INTO teams (id, organization_id, name, sso_team_id, visibility, owners, allow_member_token_management,
			created_by, created_at, updated_at, `+flagColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)`,
		t.ID, t.OrganizationID, t.Name, t.SSOTeamID, t.Visibility, t.Owners, t.AllowMemberTokenManagement,
		t.CreatedBy, t.CreatedAt, o.ManagePolicies, o.ManagePolicyOverrides, o.ManageWorkspaces, o.ManageProjects,
		o.ManageVCSSettings, o.ManageProviders, o.ManageModules, o.ManageRunTasks, o.ReadWorkspaces, o.ReadProjects,
		o.ManageMembership, o.ManageTeams, o.ManageOrganizationAccess, o.AccessSecretTeams, o.ManageAgentPools)
	if e := uniqueViolation(err); e != nil {
		return e
	}
	if err != nil {
		return fmt.Errorf("inserting team: %w", err)
	}
	return nil
}

func updateTeam(ctx context.Context, q sqlx.ExtContext, t Team) error {
	o := t.OrganizationAccess
	_, err := q.ExecContext(ctx, `
		UPDATE teams SET name = $3, sso_team_id = $4, visibility = $5, allow_member_token_management = $6, updated_at = $7,
			manage_policies = $8, manage_policy_overrides = $9, manage_workspaces = $10, manage_projects = $11,
			manage_vcs_settings = $12, manage_providers = $13, manage_modules = $14, manage_run_tasks = $15,
			read_workspaces = $16, read_projects = $17, manage_membership = $18, manage_teams = $19,
			manage_organization_access = $20, access_secret_teams = $21, manage_agent_pools = $22
		WHERE organization_id = $1 AND id = $2`,
		t.OrganizationID, t.ID, t.Name, t.SSOTeamID, t.Visibility, t.AllowMemberTokenManagement, t.UpdatedAt,
		o.ManagePolicies, o.ManagePolicyOverrides, o.ManageWorkspaces, o.ManageProjects,
		o.ManageVCSSettings, o.ManageProviders, o.ManageModules, o.ManageRunTasks, o.ReadWorkspaces, o.ReadProjects,
		o.ManageMembership, o.ManageTeams, o.ManageOrganizationAccess, o.AccessSecretTeams, o.ManageAgentPools)
	if e := uniqueViolation(err); e != nil {
		return e
	}
	if err != nil {
		return fmt.Errorf("updating team: %w", err)
	}
	return nil
}

// teamByID reads a team; forUpdate locks its row, which serializes changes
// to its members.
func teamByID(ctx context.Context, q sqlx.QueryerContext, organizationID, teamID string, forUpdate bool) (Team, error) {
	query := `SELECT ` + teamColumns + ` FROM teams t WHERE t.organization_id = $1 AND t.id = $2`
	if forUpdate {
		query += ` FOR UPDATE OF t`
	}
	var t Team
	err := sqlx.GetContext(ctx, q, &t, query, organizationID, teamID)
	if errors.Is(err, sql.ErrNoRows) {
		return t, fault.ErrNotFound
	}
	if err != nil {
		return t, fmt.Errorf("reading team: %w", err)
	}
	return t, nil
}

// ListFilter narrows a team list: exact names, or a name substring. With
// a Page the list is that cursor page, newest first; without one it is
// every match by name.
type ListFilter struct {
	Names []string
	Query string
	Page  *cursor.Page
}

// listTeams reads the organization's teams by name that the viewer may
// see: organization-visible ones, its own, or all with seeSecret.
func listTeams(ctx context.Context, q sqlx.QueryerContext, organizationID, viewerID string, seeSecret bool, f ListFilter) ([]Team, error) {
	args := []any{organizationID, seeSecret, viewerID, pq.Array(f.Names), f.Query}
	keyset, order := "", ` ORDER BY lower(t.name), t.id`
	if f.Page != nil {
		keyset, args = f.Page.Keyset(args, "t.created_at", "t.id")
		order = f.Page.OrderLimit("t.created_at", "t.id")
	}
	var out []Team
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+teamColumns+` FROM teams t
		WHERE t.organization_id = $1
		  AND ($2 OR t.visibility = 'organization' OR EXISTS (SELECT 1 FROM team_members m WHERE m.team_id = t.id AND m.user_id = $3))
		  AND (coalesce(cardinality($4::text[]), 0) = 0 OR t.name = ANY($4))
		  AND ($5 = '' OR strpos(lower(t.name), lower($5)) > 0)`+keyset+order, args...)
	if err != nil {
		return nil, fmt.Errorf("listing teams: %w", err)
	}
	return out, nil
}

func isTeamMember(ctx context.Context, q sqlx.QueryerContext, teamID, userID string) (bool, error) {
	var in bool
	err := sqlx.GetContext(ctx, q, &in, `SELECT EXISTS (SELECT 1 FROM team_members WHERE team_id = $1 AND user_id = $2)`, teamID, userID)
	if err != nil {
		return false, fmt.Errorf("reading team membership: %w", err)
	}
	return in, nil
}

func deleteTeam(ctx context.Context, q sqlx.ExtContext, organizationID, teamID string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM teams WHERE organization_id = $1 AND id = $2 AND NOT owners`, organizationID, teamID); err != nil {
		return fmt.Errorf("deleting team: %w", err)
	}
	return nil
}

// organizationMembers returns which of userIDs are members of the
// organization.
func organizationMembers(ctx context.Context, q sqlx.QueryerContext, organizationID string, userIDs []string) (map[string]bool, error) {
	var ids []string
	err := sqlx.SelectContext(ctx, q, &ids, `SELECT user_id FROM memberships WHERE organization_id = $1 AND user_id = ANY($2)`,
		organizationID, pq.Array(userIDs))
	if err != nil {
		return nil, fmt.Errorf("reading memberships: %w", err)
	}
	found := make(map[string]bool, len(ids))
	for _, id := range ids {
		found[id] = true
	}
	return found, nil
}

// addMember adds a member; adding one already there changes nothing and
// reports false.
func addMember(ctx context.Context, q sqlx.ExtContext, organizationID, teamID, userID string) (bool, error) {
	res, err := q.ExecContext(ctx, `INSERT INTO team_members (team_id, organization_id, user_id) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`, teamID, organizationID, userID)
	if err != nil {
		return false, fmt.Errorf("adding team member: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func removeMember(ctx context.Context, q sqlx.ExtContext, teamID, userID string) (bool, error) {
	res, err := q.ExecContext(ctx, `DELETE FROM team_members WHERE team_id = $1 AND user_id = $2`, teamID, userID)
	if err != nil {
		return false, fmt.Errorf("removing team member: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func membersOf(ctx context.Context, q sqlx.QueryerContext, teamID string) ([]Member, error) {
	out := []Member{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT m.user_id, o.invitation_id, u.name, u.email, o.role, m.created_at
		FROM team_members m JOIN users u ON u.id = m.user_id
		JOIN memberships o ON o.organization_id = m.organization_id AND o.user_id = m.user_id
		WHERE m.team_id = $1 ORDER BY u.email, m.user_id`, teamID)
	if err != nil {
		return nil, fmt.Errorf("listing team members: %w", err)
	}
	return out, nil
}

const workspaceGrantColumns = `id, organization_id, team_id, workspace_id, access, runs, variables, state_versions,
	sentinel_mocks, workspace_locking, run_tasks, created_at, updated_at`

func upsertWorkspaceGrant(ctx context.Context, q sqlx.ExtContext, g WorkspaceGrant, insert bool) error {
	query := `INSERT INTO team_workspace_access (` + workspaceGrantColumns + `)
		VALUES (:id, :organization_id, :team_id, :workspace_id, :access, :runs, :variables, :state_versions,
			:sentinel_mocks, :workspace_locking, :run_tasks, :created_at, :updated_at)`
	if !insert {
		query = `UPDATE team_workspace_access SET access = :access, runs = :runs, variables = :variables,
			state_versions = :state_versions, sentinel_mocks = :sentinel_mocks, workspace_locking = :workspace_locking,
			run_tasks = :run_tasks, updated_at = :updated_at WHERE id = :id`
	}
	_, err := sqlx.NamedExecContext(ctx, q, query, g)
	if e := uniqueViolation(err); e != nil {
		return e
	}
	if err != nil {
		return fmt.Errorf("writing team workspace access: %w", err)
	}
	return nil
}

func workspaceGrantByID(ctx context.Context, q sqlx.QueryerContext, organizationID, grantID string, forUpdate bool) (WorkspaceGrant, error) {
	query := `SELECT ` + workspaceGrantColumns + ` FROM team_workspace_access WHERE organization_id = $1 AND id = $2`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var g WorkspaceGrant
	err := sqlx.GetContext(ctx, q, &g, query, organizationID, grantID)
	if errors.Is(err, sql.ErrNoRows) {
		return g, fault.ErrNotFound
	}
	if err != nil {
		return g, fmt.Errorf("reading team workspace access: %w", err)
	}
	return g, nil
}

func workspaceGrantsOf(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) ([]WorkspaceGrant, error) {
	out := []WorkspaceGrant{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+workspaceGrantColumns+` FROM team_workspace_access
		WHERE organization_id = $1 AND workspace_id = $2 ORDER BY created_at, id`, organizationID, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("listing team workspace access: %w", err)
	}
	return out, nil
}

const projectGrantColumns = `id, organization_id, team_id, project_id, access, settings, teams, variable_sets, runs,
	variables, state_versions, sentinel_mocks, create_workspaces, locking, move_workspaces, delete_workspaces,
	run_tasks, created_at, updated_at`

func upsertProjectGrant(ctx context.Context, q sqlx.ExtContext, g ProjectGrant, insert bool) error {
	query := `INSERT INTO team_project_access (` + projectGrantColumns + `)
		VALUES (:id, :organization_id, :team_id, :project_id, :access, :settings, :teams, :variable_sets, :runs,
			:variables, :state_versions, :sentinel_mocks, :create_workspaces, :locking, :move_workspaces,
			:delete_workspaces, :run_tasks, :created_at, :updated_at)`
	if !insert {
		query = `UPDATE team_project_access SET access = :access, settings = :settings, teams = :teams,
			variable_sets = :variable_sets, runs = :runs, variables = :variables, state_versions = :state_versions,
			sentinel_mocks = :sentinel_mocks, create_workspaces = :create_workspaces, locking = :locking,
			move_workspaces = :move_workspaces, delete_workspaces = :delete_workspaces, run_tasks = :run_tasks,
			updated_at = :updated_at WHERE id = :id`
	}
	_, err := sqlx.NamedExecContext(ctx, q, query, g)
	if e := uniqueViolation(err); e != nil {
		return e
	}
	if err != nil {
		return fmt.Errorf("writing team project access: %w", err)
	}
	return nil
}

func projectGrantByID(ctx context.Context, q sqlx.QueryerContext, organizationID, grantID string, forUpdate bool) (ProjectGrant, error) {
	query := `SELECT ` + projectGrantColumns + ` FROM team_project_access WHERE organization_id = $1 AND id = $2`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var g ProjectGrant
	err := sqlx.GetContext(ctx, q, &g, query, organizationID, grantID)
	if errors.Is(err, sql.ErrNoRows) {
		return g, fault.ErrNotFound
	}
	if err != nil {
		return g, fmt.Errorf("reading team project access: %w", err)
	}
	return g, nil
}

func projectGrantsOf(ctx context.Context, q sqlx.QueryerContext, organizationID, projectID string) ([]ProjectGrant, error) {
	out := []ProjectGrant{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+projectGrantColumns+` FROM team_project_access
		WHERE organization_id = $1 AND project_id = $2 ORDER BY created_at, id`, organizationID, projectID)
	if err != nil {
		return nil, fmt.Errorf("listing team project access: %w", err)
	}
	return out, nil
}

func deleteGrant(ctx context.Context, q sqlx.ExtContext, table, grantID string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM `+table+` WHERE id = $1`, grantID); err != nil {
		return fmt.Errorf("deleting team access: %w", err)
	}
	return nil
}

// grantRows is what one member's teams grant, read in one statement.
type grantRows struct {
	Teams []struct {
		ID         string `json:"id"`
		Name       string `json:"name"`
		Visibility string `json:"visibility"`
		Owners     bool   `json:"owners"`
		access.OrganizationAccess
	} `json:"teams"`
	Workspaces []struct {
		TeamID      string `json:"team_id"`
		WorkspaceID string `json:"workspace_id"`
		access.WorkspaceAccess
	} `json:"workspaces"`
	Projects []projectGrantRow `json:"projects"`
}

type projectGrantRow struct {
	TeamID           string `json:"team_id"`
	ProjectID        string `json:"project_id"`
	CreateWorkspaces bool   `json:"create_workspaces"`
	DeleteWorkspaces bool   `json:"delete_workspaces"`
	MoveWorkspaces   bool   `json:"move_workspaces"`
	access.ProjectAccess
}

// projectAccess is the grant with the workspace flags its columns name
// differently from their JSON.
func (p projectGrantRow) projectAccess() access.ProjectAccess {
	a := p.ProjectAccess
	a.Create, a.Delete, a.Move = p.CreateWorkspaces, p.DeleteWorkspaces, p.MoveWorkspaces
	return a
}

// GrantsOf resolves what a member's teams grant in an organization, in one
// indexed query (team_members_user, then the grants by team). Callers run
// it on every authenticated request: there is no cache to outlive a
// revocation.
func GrantsOf(ctx context.Context, q sqlx.QueryerContext, organizationID, userID string) (access.TeamGrants, error) {
	rows, err := readGrantRows(ctx, q, memberTeams, organizationID, userID)
	if err != nil {
		return access.TeamGrants{}, err
	}
	return grantsFromRows(rows), nil
}

// memberTeams selects a member's teams ($1 the organization, $2 the user).
const memberTeams = `SELECT t.* FROM team_members m JOIN teams t ON t.id = m.team_id
		WHERE m.user_id = $2 AND m.organization_id = $1`

func grantsFromRows(rows grantRows) access.TeamGrants {
	var g access.TeamGrants
	for _, t := range rows.Teams {
		g.TeamIDs = append(g.TeamIDs, t.ID)
		g.AddOrganization(t.OrganizationAccess, t.Owners)
	}
	for _, w := range rows.Workspaces {
		g.AddWorkspace(w.WorkspaceID, w.WorkspaceAccess)
	}
	for _, p := range rows.Projects {
		g.AddProject(p.ProjectID, p.projectAccess())
	}
	return g
}

// grantsJSON is a query of one row and column: the teams selectTeams
// returns and their grants as one JSON object.
func grantsJSON(selectTeams string) string {
	return `
		WITH mine AS (` + selectTeams + `)
		SELECT json_build_object(
			'teams', (SELECT coalesce(json_agg(mine), '[]') FROM mine),
			'workspaces', (SELECT coalesce(json_agg(a), '[]') FROM team_workspace_access a JOIN mine ON mine.id = a.team_id),
			'projects', (SELECT coalesce(json_agg(a), '[]') FROM team_project_access a JOIN mine ON mine.id = a.team_id))`
}

// readGrantRows reads the teams that selectTeams returns (with the
// organization as $1 and one more argument as $2) and their grants.
func readGrantRows(ctx context.Context, q sqlx.QueryerContext, selectTeams, organizationID, arg string) (grantRows, error) {
	var raw []byte
	// Wrapped in a SELECT: a statement that starts with WITH counts as a
	// write of this process (db.CommittedWrites), and every principal
	// cairn-api keeps would be forgotten on each read of grants.
	if err := sqlx.GetContext(ctx, q, &raw, "SELECT ("+grantsJSON(selectTeams)+")", organizationID, arg); err != nil {
		return grantRows{}, fmt.Errorf("reading team grants: %w", err)
	}
	return decodeGrantRows(raw)
}

func decodeGrantRows(raw []byte) (grantRows, error) {
	var rows grantRows
	if err := json.Unmarshal(raw, &rows); err != nil {
		return grantRows{}, fmt.Errorf("decoding team grants: %w", err)
	}
	return rows, nil
}

// MemberGrantsColumn is GrantsOf as a scalar subquery of an enclosing
// query, the member's organization and user named by that query's column
// expressions: the session read selects it, so an authenticated request
// resolves its session and its team grants in one round trip instead of
// two. Decode the column with DecodeGrants. The subquery names its own
// tables t and tm, so the column expressions must qualify the enclosing
// query's columns by other aliases.
func MemberGrantsColumn(organizationColumn, userColumn string) string {
	return `(` + grantsJSON(`SELECT t.* FROM team_members tm JOIN teams t ON t.id = tm.team_id
		WHERE tm.user_id = `+userColumn+` AND tm.organization_id = `+organizationColumn) + `)`
}

// teamGrantsColumn is what one team grants (a team token's principal), as
// a scalar subquery of an enclosing query like MemberGrantsColumn: a team
// token and its team's grants are read in one round trip, on every request.
func teamGrantsColumn(organizationColumn, teamColumn string) string {
	return `(` + grantsJSON(`SELECT t.* FROM teams t WHERE t.organization_id = `+organizationColumn+
		` AND t.id = `+teamColumn) + `)`
}

// DecodeGrants decodes a MemberGrantsColumn value.
func DecodeGrants(raw []byte) (access.TeamGrants, error) {
	rows, err := decodeGrantRows(raw)
	if err != nil {
		return access.TeamGrants{}, err
	}
	return grantsFromRows(rows), nil
}
