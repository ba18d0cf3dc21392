package access

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairnhq/cairn/api/platform/fault"
)

// StepUpMaxAge is how recent a password re-entry must be for restricted
// operations (restricted downloads, apply recovery).
const StepUpMaxAge = 15 * time.Minute

// Principal is an authenticated caller acting in one organization. The
// organization always comes from a live membership (or a token's own
// binding), never from request input.
type Principal struct {
	// Kind is "user" for a session and "service_account" for a token.
	Kind           string
	ID             string // user or service account ID
	Name           string
	SessionID      string
	OrganizationID string
	Role           Role
	Permissions    PermissionSet
	// ReauthenticatedAt is the last time the password was entered for this
	// session (sign-in or step-up). Zero for tokens: they never step up.
	ReauthenticatedAt time.Time
	// TokenID is the token a service-account principal presented.
	TokenID string
	// ProjectID and WorkspaceID bound a service-account token; empty means
	// no boundary at that level.
	ProjectID   string
	WorkspaceID string
	// Agent is set when an OAuth client acts for the user with an agent
	// access token. Kind stays "user": the agent has the user's tenancy,
	// live membership and audit identity, confined further by Agent.
	Agent *Agent
	// Grants is what the principal's teams grant beyond Permissions, the
	// organization-wide baseline of its role (or a token's explicit set).
	Grants TeamGrants
	// Account marks a person's account-wide API token before it is bound:
	// it has no organization, role or permission of its own, and acts in
	// an organization only as the live membership it holds there
	// (identity.BindAccount), as HCP Terraform's user tokens do.
	Account bool
}

// Agent is what an agent access token adds to the user it acts for.
type Agent struct {
	ClientID string
	GrantID  string
	TokenID  string
	// Write is the mcp:write scope: without it the agent only reads.
	Write bool
}

// OAuth scopes of agent access tokens. They are not role permissions:
// they confine what a member's role already allows.
const (
	ScopeMCPTools = "mcp:tools"
	ScopeMCPWrite = "mcp:write"
)

// agentReadPermissions and agentWritePermissions are the most an agent can
// hold. Approving (run:approve is here only because rejecting needs it;
// approval itself refuses agents), overriding policy, recovery and
// restricted downloads stay human decisions.
var (
	agentReadPermissions  = []Permission{PermOrganizationRead, PermProjectRead, PermWorkspaceRead, PermRunRead, PermStateRead, PermPolicyRead}
	agentWritePermissions = []Permission{PermRunCreate, PermRunCancel, PermRunApprove}
)

// AgentPermissions is what an agent acting for a member of role may do:
// the role's permissions within the agent ceiling of its scopes.
func AgentPermissions(role Role, write bool) PermissionSet {
	return PermissionsOf(role).Intersect(AgentCeiling(write))
}

// AgentCeiling is the most an agent with or without mcp:write may hold,
// whatever its member's role and teams grant.
func AgentCeiling(write bool) PermissionSet {
	if write {
		return agentWriteCeiling
	}
	return agentReadCeiling
}

// The two ceilings are built once: every agent call confines its
// principal with one, and a PermissionSet never changes.
var (
	agentReadCeiling  = NewPermissionSet(agentReadPermissions...)
	agentWriteCeiling = NewPermissionSet(append(slices.Clone(agentReadPermissions), agentWritePermissions...)...)
)

// IsAgent reports whether an agent acts for the principal.
func (p Principal) IsAgent() bool { return p.Agent != nil }

// RequireHuman refuses agents: the decision must be a person's own.
func (p Principal) RequireHuman() error {
	if p.Agent != nil {
		return fmt.Errorf("%w: agents propose, people decide", fault.ErrForbidden)
	}
	return nil
}

// Principal kinds.
const (
	KindUser           = "user"
	KindServiceAccount = "service_account"
	// KindOperator is the installation operator's credential on the
	// remote-backend API: it administers every organization.
	KindOperator = "operator"
	// KindRun is a managed run's own sandboxed CLI, holding a short-lived
	// run token bound to one run phase and its workspace.
	KindRun = "run"
	// KindCodeHost is the code-host app acting on a verified delivery:
	// it creates a workspace's runs from its source settings and nothing
	// else.
	KindCodeHost = "code_host"
	// KindTeam is a team API token: ID is the team's, and its permissions
	// are exactly the team's grants (Grants), with no role baseline.
	KindTeam = "team"
	// KindSCIM is an organization's SCIM provisioning client: it manages
	// the people it provisioned and the organization's teams, nothing else.
	KindSCIM = "scim"
	// KindRunTrigger is a run trigger firing: it creates one run in its
	// destination workspace and nothing else.
	KindRunTrigger = "run_trigger"
)

// RunTrigger is the principal a run trigger fires as: bounded to the
// destination workspace, it may read it and create runs there, nothing
// more. ID is the trigger's.
func RunTrigger(organizationID, triggerID, workspaceID string) Principal {
	return Principal{Kind: KindRunTrigger, ID: triggerID, Name: "Run trigger", OrganizationID: organizationID,
		WorkspaceID: workspaceID, Permissions: NewPermissionSet(PermWorkspaceRead, PermRunCreate)}
}

// SCIM is the principal an organization's SCIM client acts as. It sees
// and changes every team but the owners team (the team service refuses
// that one to anyone but an owner).
func SCIM(organizationID string) Principal {
	return Principal{Kind: KindSCIM, ID: "scim", Name: "SCIM", OrganizationID: organizationID,
		Permissions: NewPermissionSet(PermOrganizationRead, PermTeamManage, PermTeamReadSecret)}
}

// CodeHost is the principal a verified code-host delivery acts as in one
// organization.
func CodeHost(organizationID string) Principal {
	return Principal{Kind: KindCodeHost, ID: "github-app", Name: "GitHub app", OrganizationID: organizationID,
		Permissions: NewPermissionSet(PermWorkspaceRead, PermRunRead, PermRunCreate)}
}

// Require returns fault.ErrForbidden unless the principal holds p
// anywhere: in its baseline or in any of its teams' grants. It is the
// cheap early check; a workspace-scoped operation checks again with
// RequireIn once it has loaded the workspace.
func (p Principal) Require(perm Permission) error {
	if !p.Permissions.Has(perm) && !p.Grants.anywhere.Has(perm) {
		return fmt.Errorf("%w: missing %s", fault.ErrForbidden, perm)
	}
	return nil
}

// PermissionsIn is what the principal may do in a workspace of a project:
// its baseline, its teams' organization access and their grants on the
// workspace and on its project. It ignores token boundaries (see
// CanReadWorkspace).
func (p Principal) PermissionsIn(workspaceID, projectID string) PermissionSet {
	g := p.Grants
	return p.Permissions.Union(g.organization).Union(g.workspaces[workspaceID]).Union(g.projects[projectID])
}

// OrganizationPermissions is what the principal may do across the
// organization: its baseline and its teams' organization access, without
// any one workspace's or project's grants.
func (p Principal) OrganizationPermissions() PermissionSet {
	return p.Permissions.Union(p.Grants.organization)
}

// PermissionsOnProject is what the principal may do on a project itself.
func (p Principal) PermissionsOnProject(projectID string) PermissionSet {
	return p.Permissions.Union(p.Grants.organization).Union(p.Grants.projectsOwn[projectID])
}

// reachesEveryWorkspace reports whether the baseline or organization
// access acts on every workspace; the member role alone does not.
func (p Principal) reachesEveryWorkspace() bool {
	return !p.Permissions.Union(p.Grants.organization).Intersect(workspaceScoped).Empty()
}

// withinBoundary applies a token's project and workspace boundaries.
func (p Principal) withinBoundary(workspaceID, projectID string) bool {
	return (p.WorkspaceID == "" || p.WorkspaceID == workspaceID) && (p.ProjectID == "" || p.ProjectID == projectID)
}

// CanReadWorkspace reports whether the workspace exists for the principal
// at all: inside its token boundaries, and reached by its baseline, its
// organization access or a team grant on the workspace or its project.
// A workspace it cannot read answers exactly like a missing one.
func (p Principal) CanReadWorkspace(workspaceID, projectID string) bool {
	if !p.withinBoundary(workspaceID, projectID) {
		return false
	}
	if p.reachesEveryWorkspace() {
		return true
	}
	_, ws := p.Grants.workspaces[workspaceID]
	_, prj := p.Grants.projects[projectID]
	return ws || prj
}

// RequireIn checks perm in a loaded workspace: fault.ErrNotFound when the
// principal cannot read the workspace, fault.ErrForbidden when it can but
// lacks perm.
func (p Principal) RequireIn(workspaceID, projectID string, perm Permission) error {
	if !p.CanReadWorkspace(workspaceID, projectID) {
		return fault.ErrNotFound
	}
	if !p.PermissionsIn(workspaceID, projectID).Has(perm) {
		return fmt.Errorf("%w: missing %s", fault.ErrForbidden, perm)
	}
	return nil
}

// WorkspaceScope is what a list of workspace-scoped things may show: every
// workspace, or those the teams reach. Token boundaries are applied by the
// lists themselves.
func (p Principal) WorkspaceScope() Scope {
	if p.reachesEveryWorkspace() {
		return Scope{All: true}
	}
	s := Scope{WorkspaceIDs: []string{}, ProjectIDs: []string{}}
	for id := range p.Grants.workspaces {
		s.WorkspaceIDs = append(s.WorkspaceIDs, id)
	}
	for id := range p.Grants.projects {
		s.ProjectIDs = append(s.ProjectIDs, id)
	}
	slices.Sort(s.WorkspaceIDs)
	slices.Sort(s.ProjectIDs)
	return s
}

// RequireStepUp returns ErrStepUpRequired unless the principal re-entered a
// password within StepUpMaxAge of now.
func (p Principal) RequireStepUp(now time.Time) error {
	if p.Kind != KindUser || p.Agent != nil || p.ReauthenticatedAt.IsZero() || now.Sub(p.ReauthenticatedAt) > StepUpMaxAge {
		return ErrStepUpRequired
	}
	return nil
}

// ErrStepUpRequired means the operation needs a password re-entry within
// the last 15 minutes.
var ErrStepUpRequired = errors.New("recent reauthentication required")

type principalKey struct{}

// WithPrincipal stores the authenticated principal in the context.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal of the request, or
// fault.ErrUnauthenticated when there is none.
func PrincipalFrom(ctx context.Context) (Principal, error) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	if !ok || p.ID == "" || p.OrganizationID == "" {
		return Principal{}, fault.ErrUnauthenticated
	}
	return p, nil
}
