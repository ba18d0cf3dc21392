package team

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/workspace"
)

// Service is teams, their members and their workspace and project access.
// Mutations take the caller's transaction so that idempotency records and
// audit evidence commit with them.
type Service struct {
	db         *sqlx.DB
	workspaces *workspace.Service
	now        func() time.Time
}

// NewService returns the team service. Grants name workspaces and projects
// the granting principal can read through workspaces.
func NewService(conn *sqlx.DB, workspaces *workspace.Service) *Service {
	return &Service{db: conn, workspaces: workspaces, now: time.Now}
}

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// CreateOwnersTeam creates an organization's built-in owners team with its
// first owner, in the organization's creating transaction.
func CreateOwnersTeam(ctx context.Context, tx *sqlx.Tx, organizationID, ownerID string, at time.Time) (Team, error) {
	t := Team{ID: id.New("team"), OrganizationID: organizationID, Name: OwnersName, Visibility: VisibilityOrganization,
		Owners: true, AllowMemberTokenManagement: true, CreatedBy: ownerID, CreatedAt: at, UpdatedAt: at}
	if err := insertTeam(ctx, tx, t); err != nil {
		return Team{}, err
	}
	if _, err := addMember(ctx, tx, organizationID, t.ID, ownerID); err != nil {
		return Team{}, err
	}
	t.UsersCount = 1
	return t, nil
}

// CreateInput is a new team.
type CreateInput struct {
	Name                       string
	SSOTeamID                  *string
	Visibility                 string // default secret
	AllowMemberTokenManagement *bool  // default true
	OrganizationAccess         OrganizationAccessPatch
}

// Create creates a team with no members (its creator is not added).
func (s *Service) Create(ctx context.Context, tx *sqlx.Tx, p access.Principal, in CreateInput) (Team, error) {
	if err := p.Require(access.PermTeamManage); err != nil {
		return Team{}, err
	}
	if !in.OrganizationAccess.Empty() {
		if err := p.Require(access.PermTeamOrganizationAccess); err != nil {
			return Team{}, err
		}
	}
	name, err := ValidateName(in.Name)
	if err != nil {
		return Team{}, err
	}
	if in.Visibility == "" {
		in.Visibility = VisibilitySecret
	}
	if err := validateVisibility(in.Visibility); err != nil {
		return Team{}, err
	}
	if err := validateSSOTeamID(in.SSOTeamID); err != nil {
		return Team{}, err
	}
	now := s.stamp()
	t := Team{ID: id.New("team"), OrganizationID: p.OrganizationID, Name: name, SSOTeamID: in.SSOTeamID,
		Visibility: in.Visibility, AllowMemberTokenManagement: true,
		OrganizationAccess: in.OrganizationAccess.Apply(access.OrganizationAccess{}),
		CreatedBy:          p.ID, CreatedAt: now, UpdatedAt: now}
	if in.AllowMemberTokenManagement != nil {
		t.AllowMemberTokenManagement = *in.AllowMemberTokenManagement
	}
	if err := insertTeam(ctx, tx, t); err != nil {
		return Team{}, err
	}
	return t, audit.Record(ctx, tx, p, "team.created", "team", t.ID, map[string]any{
		"name": t.Name, "visibility": t.Visibility, "organization_access": flagsOf(t.OrganizationAccess)})
}

func validateSSOTeamID(v *string) error {
	if v != nil && (*v == "" || len(*v) > 200) {
		return fmt.Errorf("%w: sso team id must be 1 to 200 characters", ErrInvalid)
	}
	return nil
}

// evidenceOf renders a flag or attribute set for the audit record by its
// JSON names (strings and booleans only).
func evidenceOf(v any) map[string]any {
	raw, _ := json.Marshal(v)
	out := map[string]any{}
	_ = json.Unmarshal(raw, &out)
	return out
}

// flagsOf lists the organization-access flags that are on, by HCP's names
// (as values: the audit log refuses keys that look like secrets).
func flagsOf(o access.OrganizationAccess) []string {
	on := []string{}
	for name, set := range evidenceOf(o) {
		if set == true {
			on = append(on, strings.ReplaceAll(name, "_", "-"))
		}
	}
	slices.Sort(on)
	return on
}

// visibleTeam loads a team the principal may see: an organization-visible
// one, one it is in, or any with team:read_secret. Anything else is not
// found, like a missing team.
func (s *Service) visibleTeam(ctx context.Context, q sqlx.QueryerContext, p access.Principal, teamID string, forUpdate bool) (Team, error) {
	if err := p.Require(access.PermOrganizationRead); err != nil {
		return Team{}, err
	}
	t, err := teamByID(ctx, q, p.OrganizationID, teamID, forUpdate)
	if err != nil {
		return Team{}, err
	}
	if t.Visibility == VisibilitySecret && p.Require(access.PermTeamReadSecret) != nil {
		in, err := isTeamMember(ctx, q, t.ID, p.ID)
		if err != nil {
			return Team{}, err
		}
		if !in {
			return Team{}, fault.ErrNotFound
		}
	}
	return t, nil
}

// managedTeam loads and locks a team the principal may manage.
func (s *Service) managedTeam(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID string) (Team, error) {
	if err := p.Require(access.PermTeamManage); err != nil {
		return Team{}, err
	}
	return s.visibleTeam(ctx, tx, p, teamID, true)
}

// Get reads one team.
func (s *Service) Get(ctx context.Context, p access.Principal, teamID string) (Team, error) {
	return s.visibleTeam(ctx, s.db, p, teamID, false)
}

// List reads the teams the principal may see, by name.
func (s *Service) List(ctx context.Context, p access.Principal, f ListFilter) ([]Team, error) {
	if err := p.Require(access.PermOrganizationRead); err != nil {
		return nil, err
	}
	return listTeams(ctx, s.db, p.OrganizationID, p.ID, p.Require(access.PermTeamReadSecret) == nil, f)
}

// UpdateInput changes a team; nil fields keep their values and
// organization access merges flag by flag.
type UpdateInput struct {
	Name                       *string
	SSOTeamID                  *string
	ClearSSOTeamID             bool
	Visibility                 *string
	AllowMemberTokenManagement *bool
	OrganizationAccess         OrganizationAccessPatch
}

// Update changes a team. The owners team keeps its name and holds every
// permission whatever its flags say, so they cannot be set on it.
func (s *Service) Update(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID string, in UpdateInput) (Team, error) {
	t, err := s.managedTeam(ctx, tx, p, teamID)
	if err != nil {
		return Team{}, err
	}
	evidence := map[string]any{}
	if in.Name != nil {
		name, err := ValidateName(*in.Name)
		if err != nil {
			return Team{}, err
		}
		if name != t.Name && t.Owners {
			return Team{}, ErrOwnersTeam
		}
		if name != t.Name {
			evidence["from_name"], evidence["to_name"] = t.Name, name
		}
		t.Name = name
	}
	if in.ClearSSOTeamID {
		t.SSOTeamID = nil
	} else if in.SSOTeamID != nil {
		if err := validateSSOTeamID(in.SSOTeamID); err != nil {
			return Team{}, err
		}
		t.SSOTeamID = in.SSOTeamID
	}
	if in.Visibility != nil {
		if err := validateVisibility(*in.Visibility); err != nil {
			return Team{}, err
		}
		t.Visibility = *in.Visibility
	}
	if in.AllowMemberTokenManagement != nil {
		t.AllowMemberTokenManagement = *in.AllowMemberTokenManagement
	}
	if flags := in.OrganizationAccess.Apply(t.OrganizationAccess); flags != t.OrganizationAccess {
		if t.Owners {
			return Team{}, ErrOwnersTeam
		}
		if err := p.Require(access.PermTeamOrganizationAccess); err != nil {
			return Team{}, err
		}
		evidence["organization_access"] = flagsOf(flags)
		t.OrganizationAccess = flags
	}
	t.UpdatedAt = s.stamp()
	if err := updateTeam(ctx, tx, t); err != nil {
		return Team{}, err
	}
	evidence["visibility"] = t.Visibility
	if t.SSOTeamID != nil {
		evidence["sso_team_id"] = *t.SSOTeamID
	}
	return t, audit.Record(ctx, tx, p, "team.updated", "team", t.ID, evidence)
}

// Delete deletes a team with its memberships and grants; the owners team
// cannot be deleted.
func (s *Service) Delete(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID string) (Team, error) {
	t, err := s.managedTeam(ctx, tx, p, teamID)
	if err != nil {
		return Team{}, err
	}
	if t.Owners {
		return Team{}, ErrOwnersTeam
	}
	if err := deleteTeam(ctx, tx, p.OrganizationID, t.ID); err != nil {
		return Team{}, err
	}
	return t, audit.Record(ctx, tx, p, "team.deleted", "team", t.ID, map[string]any{"name": t.Name})
}

// requireOwner admits only an owner to change the owners team's members:
// its members hold every permission.
func requireOwner(ctx context.Context, q sqlx.QueryerContext, p access.Principal, owners Team) error {
	if p.Kind == access.KindOperator || (p.Kind == access.KindUser && p.Role == access.RoleOwner) ||
		(p.Kind == access.KindTeam && p.ID == owners.ID) {
		return nil
	}
	if p.Kind == access.KindUser {
		if in, err := isTeamMember(ctx, q, owners.ID, p.ID); err != nil || in {
			return err
		}
	}
	return ErrNotOwner
}

// membershipTeam loads and locks a team whose members the principal may
// change: one it manages, and the owners team only for an owner.
func (s *Service) membershipTeam(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID string) (Team, error) {
	t, err := s.managedTeam(ctx, tx, p, teamID)
	if err != nil {
		return Team{}, err
	}
	if t.Owners {
		if err := requireOwner(ctx, tx, p, t); err != nil {
			return Team{}, err
		}
	}
	return t, nil
}

// AddMembers adds members of the organization to a team. A user who is not
// a member of the organization is not found.
func (s *Service) AddMembers(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID string, userIDs []string) error {
	t, err := s.membershipTeam(ctx, tx, p, teamID)
	if err != nil {
		return err
	}
	members, err := organizationMembers(ctx, tx, p.OrganizationID, userIDs)
	if err != nil {
		return err
	}
	for _, u := range userIDs {
		if !members[u] {
			return fmt.Errorf("user %s: %w", u, fault.ErrNotFound)
		}
	}
	for _, u := range userIDs {
		added, err := addMember(ctx, tx, p.OrganizationID, t.ID, u)
		if err != nil {
			return err
		}
		if added {
			if err := audit.Record(ctx, tx, p, "team.member_added", "team", t.ID, map[string]any{"user_id": u}); err != nil {
				return err
			}
		}
	}
	return nil
}

// RemoveMembers removes users from a team. The owners team keeps at least
// one member.
func (s *Service) RemoveMembers(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID string, userIDs []string) error {
	t, err := s.membershipTeam(ctx, tx, p, teamID)
	if err != nil {
		return err
	}
	for _, u := range userIDs {
		removed, err := removeMember(ctx, tx, t.ID, u)
		if err != nil {
			return err
		}
		if removed {
			if err := audit.Record(ctx, tx, p, "team.member_removed", "team", t.ID, map[string]any{"user_id": u}); err != nil {
				return err
			}
		}
	}
	if t.Owners {
		left, err := membersOf(ctx, tx, t.ID)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return ErrOwnersTeamEmpty
		}
	}
	return nil
}

// Members lists a team's members.
func (s *Service) Members(ctx context.Context, p access.Principal, teamID string) ([]Member, error) {
	t, err := s.visibleTeam(ctx, s.db, p, teamID, false)
	if err != nil {
		return nil, err
	}
	return membersOf(ctx, s.db, t.ID)
}

// GrantWorkspace gives a team access to a workspace.
func (s *Service) GrantWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID, workspaceID string, in WorkspaceAccessInput) (WorkspaceGrant, error) {
	t, err := s.managedTeam(ctx, tx, p, teamID)
	if err != nil {
		return WorkspaceGrant{}, err
	}
	// Managing teams is not administering their workspaces: granting
	// access to one needs workspace:admin there, as in HCP Terraform.
	if _, err := s.workspaces.WorkspaceWith(ctx, p, workspaceID, access.PermWorkspaceAdmin); err != nil {
		return WorkspaceGrant{}, err
	}
	a, err := in.resolve(access.WorkspaceAccess{})
	if err != nil {
		return WorkspaceGrant{}, err
	}
	now := s.stamp()
	g := WorkspaceGrant{ID: id.New("tws"), OrganizationID: p.OrganizationID, TeamID: t.ID, WorkspaceID: workspaceID,
		WorkspaceAccess: a, CreatedAt: now, UpdatedAt: now}
	if err := upsertWorkspaceGrant(ctx, tx, g, true); err != nil {
		return WorkspaceGrant{}, err
	}
	return g, audit.Record(ctx, tx, p, "team_access.granted", "team_workspace_access", g.ID,
		map[string]any{"team_id": t.ID, "workspace_id": workspaceID, "access": evidenceOf(a)})
}

// managedWorkspaceGrant loads and locks a grant of a team the principal
// may manage.
func (s *Service) managedWorkspaceGrant(ctx context.Context, tx *sqlx.Tx, p access.Principal, grantID string) (WorkspaceGrant, error) {
	if err := p.Require(access.PermTeamManage); err != nil {
		return WorkspaceGrant{}, err
	}
	g, err := workspaceGrantByID(ctx, tx, p.OrganizationID, grantID, true)
	if err != nil {
		return WorkspaceGrant{}, err
	}
	if _, err := s.managedTeam(ctx, tx, p, g.TeamID); err != nil {
		return WorkspaceGrant{}, err
	}
	if _, err := s.workspaces.WorkspaceWith(ctx, p, g.WorkspaceID, access.PermWorkspaceAdmin); err != nil {
		return WorkspaceGrant{}, err
	}
	return g, nil
}

// WorkspaceGrant reads one workspace grant of a visible team.
func (s *Service) WorkspaceGrant(ctx context.Context, p access.Principal, grantID string) (WorkspaceGrant, error) {
	if err := p.Require(access.PermOrganizationRead); err != nil {
		return WorkspaceGrant{}, err
	}
	g, err := workspaceGrantByID(ctx, s.db, p.OrganizationID, grantID, false)
	if err != nil {
		return WorkspaceGrant{}, err
	}
	if _, err := s.visibleTeam(ctx, s.db, p, g.TeamID, false); err != nil {
		return WorkspaceGrant{}, err
	}
	return g, nil
}

// UpdateWorkspaceGrant changes a grant's level or custom attributes.
func (s *Service) UpdateWorkspaceGrant(ctx context.Context, tx *sqlx.Tx, p access.Principal, grantID string, in WorkspaceAccessInput) (WorkspaceGrant, error) {
	g, err := s.managedWorkspaceGrant(ctx, tx, p, grantID)
	if err != nil {
		return WorkspaceGrant{}, err
	}
	from := g.WorkspaceAccess
	if g.WorkspaceAccess, err = in.resolve(g.WorkspaceAccess); err != nil {
		return WorkspaceGrant{}, err
	}
	g.UpdatedAt = s.stamp()
	if err := upsertWorkspaceGrant(ctx, tx, g, false); err != nil {
		return WorkspaceGrant{}, err
	}
	return g, audit.Record(ctx, tx, p, "team_access.changed", "team_workspace_access", g.ID,
		map[string]any{"team_id": g.TeamID, "workspace_id": g.WorkspaceID, "from": evidenceOf(from), "to": evidenceOf(g.WorkspaceAccess)})
}

// RevokeWorkspaceGrant removes a grant.
func (s *Service) RevokeWorkspaceGrant(ctx context.Context, tx *sqlx.Tx, p access.Principal, grantID string) (WorkspaceGrant, error) {
	g, err := s.managedWorkspaceGrant(ctx, tx, p, grantID)
	if err != nil {
		return WorkspaceGrant{}, err
	}
	if err := deleteGrant(ctx, tx, "team_workspace_access", g.ID); err != nil {
		return WorkspaceGrant{}, err
	}
	return g, audit.Record(ctx, tx, p, "team_access.revoked", "team_workspace_access", g.ID,
		map[string]any{"team_id": g.TeamID, "workspace_id": g.WorkspaceID, "access": g.Access})
}

// WorkspaceGrants lists the grants on a workspace the principal can read,
// of the teams it may see.
func (s *Service) WorkspaceGrants(ctx context.Context, p access.Principal, workspaceID string) ([]WorkspaceGrant, error) {
	if _, err := s.workspaces.GetWorkspace(ctx, p, workspaceID); err != nil {
		return nil, err
	}
	all, err := workspaceGrantsOf(ctx, s.db, p.OrganizationID, workspaceID)
	if err != nil {
		return nil, err
	}
	return visibleGrants(ctx, s, p, all, func(g WorkspaceGrant) string { return g.TeamID })
}

func visibleGrants[G any](ctx context.Context, s *Service, p access.Principal, all []G, teamOf func(G) string) ([]G, error) {
	teams, err := listTeams(ctx, s.db, p.OrganizationID, p.ID, p.Require(access.PermTeamReadSecret) == nil, ListFilter{})
	if err != nil {
		return nil, err
	}
	seen := make([]string, 0, len(teams))
	for _, t := range teams {
		seen = append(seen, t.ID)
	}
	out := make([]G, 0, len(all))
	for _, g := range all {
		if slices.Contains(seen, teamOf(g)) {
			out = append(out, g)
		}
	}
	return out, nil
}

// GrantProject gives a team access to a project and every workspace in it.
func (s *Service) GrantProject(ctx context.Context, tx *sqlx.Tx, p access.Principal, teamID, projectID string, in ProjectAccessInput) (ProjectGrant, error) {
	t, err := s.managedTeam(ctx, tx, p, teamID)
	if err != nil {
		return ProjectGrant{}, err
	}
	if err := s.requireProjectAdmin(ctx, p, projectID); err != nil {
		return ProjectGrant{}, err
	}
	a, err := in.resolve(access.ProjectAccess{})
	if err != nil {
		return ProjectGrant{}, err
	}
	now := s.stamp()
	g := ProjectGrant{ID: id.New("tprj"), OrganizationID: p.OrganizationID, TeamID: t.ID, ProjectID: projectID,
		ProjectAccess: a, CreatedAt: now, UpdatedAt: now}
	if err := upsertProjectGrant(ctx, tx, g, true); err != nil {
		return ProjectGrant{}, err
	}
	return g, audit.Record(ctx, tx, p, "team_access.granted", "team_project_access", g.ID,
		map[string]any{"team_id": t.ID, "project_id": projectID, "access": evidenceOf(a)})
}

func (s *Service) managedProjectGrant(ctx context.Context, tx *sqlx.Tx, p access.Principal, grantID string) (ProjectGrant, error) {
	if err := p.Require(access.PermTeamManage); err != nil {
		return ProjectGrant{}, err
	}
	g, err := projectGrantByID(ctx, tx, p.OrganizationID, grantID, true)
	if err != nil {
		return ProjectGrant{}, err
	}
	if _, err := s.managedTeam(ctx, tx, p, g.TeamID); err != nil {
		return ProjectGrant{}, err
	}
	if err := s.requireProjectAdmin(ctx, p, g.ProjectID); err != nil {
		return ProjectGrant{}, err
	}
	return g, nil
}

// ProjectGrant reads one project grant of a visible team.
func (s *Service) ProjectGrant(ctx context.Context, p access.Principal, grantID string) (ProjectGrant, error) {
	if err := p.Require(access.PermOrganizationRead); err != nil {
		return ProjectGrant{}, err
	}
	g, err := projectGrantByID(ctx, s.db, p.OrganizationID, grantID, false)
	if err != nil {
		return ProjectGrant{}, err
	}
	if _, err := s.visibleTeam(ctx, s.db, p, g.TeamID, false); err != nil {
		return ProjectGrant{}, err
	}
	return g, nil
}

// UpdateProjectGrant changes a project grant.
func (s *Service) UpdateProjectGrant(ctx context.Context, tx *sqlx.Tx, p access.Principal, grantID string, in ProjectAccessInput) (ProjectGrant, error) {
	g, err := s.managedProjectGrant(ctx, tx, p, grantID)
	if err != nil {
		return ProjectGrant{}, err
	}
	from := g.ProjectAccess
	if g.ProjectAccess, err = in.resolve(g.ProjectAccess); err != nil {
		return ProjectGrant{}, err
	}
	g.UpdatedAt = s.stamp()
	if err := upsertProjectGrant(ctx, tx, g, false); err != nil {
		return ProjectGrant{}, err
	}
	return g, audit.Record(ctx, tx, p, "team_access.changed", "team_project_access", g.ID,
		map[string]any{"team_id": g.TeamID, "project_id": g.ProjectID, "from": evidenceOf(from), "to": evidenceOf(g.ProjectAccess)})
}

// RevokeProjectGrant removes a project grant.
func (s *Service) RevokeProjectGrant(ctx context.Context, tx *sqlx.Tx, p access.Principal, grantID string) (ProjectGrant, error) {
	g, err := s.managedProjectGrant(ctx, tx, p, grantID)
	if err != nil {
		return ProjectGrant{}, err
	}
	if err := deleteGrant(ctx, tx, "team_project_access", g.ID); err != nil {
		return ProjectGrant{}, err
	}
	return g, audit.Record(ctx, tx, p, "team_access.revoked", "team_project_access", g.ID,
		map[string]any{"team_id": g.TeamID, "project_id": g.ProjectID, "access": g.Access})
}

// ProjectGrants lists the grants on a project, of the teams the principal
// may see.
func (s *Service) ProjectGrants(ctx context.Context, p access.Principal, projectID string) ([]ProjectGrant, error) {
	if _, err := s.workspaces.GetProject(ctx, p, projectID); err != nil {
		return nil, err
	}
	all, err := projectGrantsOf(ctx, s.db, p.OrganizationID, projectID)
	if err != nil {
		return nil, err
	}
	return visibleGrants(ctx, s, p, all, func(g ProjectGrant) string { return g.TeamID })
}

// requireProjectAdmin checks that the principal administers a project it
// can see: granting a team access to a project reaches every workspace in
// it, so it needs workspace:admin on the project itself.
func (s *Service) requireProjectAdmin(ctx context.Context, p access.Principal, projectID string) error {
	if _, err := s.workspaces.GetProject(ctx, p, projectID); err != nil {
		return err
	}
	if !p.PermissionsOnProject(projectID).Has(access.PermWorkspaceAdmin) {
		return fmt.Errorf("%w: missing %s on the project", fault.ErrForbidden, access.PermWorkspaceAdmin)
	}
	return nil
}
