package access

import (
	"context"
	"errors"
	"fmt"
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
)

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
	if p.Kind != KindUser || p.ReauthenticatedAt.IsZero() || now.Sub(p.ReauthenticatedAt) > StepUpMaxAge {
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
