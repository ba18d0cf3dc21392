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
	ceiling := NewPermissionSet(agentReadPermissions...)
	if write {
		ceiling = NewPermissionSet(append(slices.Clone(agentReadPermissions), agentWritePermissions...)...)
	}
	return PermissionsOf(role).Intersect(ceiling)
}

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
)

// CodeHost is the principal a verified code-host delivery acts as in one
// organization.
func CodeHost(organizationID string) Principal {
	return Principal{Kind: KindCodeHost, ID: "github-app", Name: "GitHub app", OrganizationID: organizationID,
		Permissions: NewPermissionSet(PermWorkspaceRead, PermRunRead, PermRunCreate)}
}

// Require returns fault.ErrForbidden unless the principal holds p.
func (p Principal) Require(perm Permission) error {
	if !p.Permissions.Has(perm) {
		return fmt.Errorf("%w: missing %s", fault.ErrForbidden, perm)
	}
	return nil
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
