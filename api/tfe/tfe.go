package tfe

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/oauth"
	"github.com/cairnhq/cairn/api/platform/buildinfo"
	"github.com/cairnhq/cairn/api/platform/capability"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/discovery"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/platform/secret"
	"github.com/cairnhq/cairn/api/registry"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/serviceaccount"
	"github.com/cairnhq/cairn/api/state"
	"github.com/cairnhq/cairn/api/team"
	"github.com/cairnhq/cairn/api/trigger"
	"github.com/cairnhq/cairn/api/varset"
	"github.com/cairnhq/cairn/api/workspace"
)

// APIVersion is the remote-backend API version advertised; the OpenTofu
// CLI's cloud block requires at least 2.5.
const APIVersion = "2.5"

// Deps is what the remote-backend API needs. The services are nil without a
// database or AUTH_SECRET; every route but ping then answers 503.
type Deps struct {
	Config          config.Config
	DB              *sqlx.DB
	Logger          *slog.Logger
	Identity        *identity.Service
	ServiceAccounts *serviceaccount.Service
	Workspaces      *workspace.Service
	State           *state.Service
	Runs            *run.Service
	Launch          *launch.Service
	// Teams is built from DB and Workspaces when nil.
	Teams *team.Service
	// TeamTokens is built from DB, Teams and AUTH_SECRET when nil.
	TeamTokens *team.Tokens
	// Capabilities signs and checks capability URLs (uploads, logs,
	// policy bundle grants).
	Capabilities capability.Signer
	// Registry is the private module registry (registry-modules).
	Registry *registry.Service
	// Triggers are run triggers between workspaces (run-triggers).
	Triggers *trigger.Service
	// ModulesV1 says the module registry protocol is served, at
	// discovery.ModulesV1Path, so discovery announces it.
	ModulesV1 bool
	// VariableSets are the organization's variable sets (varsets); their
	// routes answer 503 without them.
	VariableSets *varset.Service
}

type server struct {
	Deps
	ready bool
}

// newServer fills in what deps leaves to be built.
func newServer(deps Deps) *server {
	s := &server{Deps: deps}
	if s.Teams == nil && deps.DB != nil && deps.Workspaces != nil {
		s.Teams = team.NewService(deps.DB, deps.Workspaces)
	}
	if s.TeamTokens == nil && s.Teams != nil && deps.Config.AuthSecret != "" {
		s.TeamTokens = team.NewTokens(deps.DB, s.Teams, secret.Derive(deps.Config.AuthSecret, "team-token"))
	}
	s.ready = s.TeamTokens != nil && deps.DB != nil && deps.Identity != nil && deps.Workspaces != nil && deps.State != nil && deps.Launch != nil && deps.Runs != nil
	return s
}

// Authenticator returns the remote-backend API's bearer authentication,
// for a surface that accepts exactly its tokens (the module registry
// protocol the same CLIs call). It is nil when deps cannot serve the API.
func Authenticator(deps Deps) func(ctx context.Context, token string) (access.Principal, error) {
	s := newServer(deps)
	if !s.ready {
		return nil
	}
	return s.principal
}

// Mount registers service discovery and every /api/v2 route on app.
func Mount(app *fiber.App, deps Deps) {
	s := newServer(deps)
	app.Get("/.well-known/terraform.json", s.discovery)
	v2 := app.Group("/api/v2")
	v2.Use(s.headers)
	v2.Get("/ping", s.ping)
	v2.Use(s.failClosed)
	s.registerOrganizations(v2)
	s.registerWorkspaces(v2)
	s.registerState(v2)
	s.registerRuns(v2)
	s.registerTeams(v2)
	s.registerTeamAccess(v2)
	s.registerMemberships(v2)
	s.registerProjects(v2)
	s.registerTeamTokens(v2)
	s.registerRegistryModules(v2)
	s.registerVarsets(v2)
	s.registerVariables(v2)
	s.registerRemoteStateConsumers(v2)
	s.registerRunTriggers(v2)
	// Anything else is a JSON:API 404: clients retry 5xx for minutes, and a
	// missing route must look like every other missing resource.
	v2.Use(func(c *fiber.Ctx) error { return s.writeError(c, fault.ErrNotFound) })
}

// discovery tells Terraform-compatible CLIs where the API lives.
func (s *server) discovery(c *fiber.Ctx) error {
	doc := map[string]any{}
	for id, path := range discovery.Services(s.ready && s.ModulesV1) {
		doc[id] = path
	}
	if s.ready {
		// `tofu login`: the authorization server's code flow with the
		// CLI's built-in client, answered with a user API token. Without
		// it the CLI asks for a pasted token instead.
		doc["login.v1"] = map[string]any{
			"client":      oauth.CLIClientID,
			"grant_types": []string{"authz_code"},
			"authz":       "/api/auth/oauth2/authorize",
			"token":       "/api/auth/oauth2/token",
			"ports":       oauth.CLIPorts,
			"scopes":      []string{oauth.ScopeCLI},
		}
	}
	return c.JSON(doc)
}

func (s *server) headers(c *fiber.Ctx) error {
	c.Set("TFP-API-Version", APIVersion)
	c.Set("X-TFE-Version", buildinfo.Version)
	c.Set("TFP-AppName", "Cairn")
	return c.Next()
}

func (s *server) ping(c *fiber.Ctx) error { return c.SendStatus(http.StatusNoContent) }

func (s *server) failClosed(c *fiber.Ctx) error {
	if !s.ready {
		return s.writeError(c, fault.ErrUnavailable)
	}
	return c.Next()
}

// operatorPrincipal is the installation operator on the remote-backend
// API: it may create and delete organizations and acts in every one.
func operatorPrincipal() access.Principal {
	return access.Principal{Kind: access.KindOperator, ID: "operator", Name: "operator",
		Role: access.RoleOwner, Permissions: access.NewPermissionSet(access.AllPermissions()...)}
}

// authenticate validates the bearer credential. Anything that is not a
// live user token, service-account token, team token, run token or the
// operator token is invalid_token, before anything else is looked at.
func (s *server) authenticate(c *fiber.Ctx) (access.Principal, error) {
	p, _, err := s.authenticateSubject(c)
	return p, err
}

// authenticateSubject is authenticate that also returns, for a run token,
// its workspace's names and admission facts, read with the token (nil for
// every other credential).
func (s *server) authenticateSubject(c *fiber.Ctx) (access.Principal, *run.TokenSubject, error) {
	token, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
	token = strings.TrimSpace(token)
	switch {
	case !ok || token == "":
		return access.Principal{}, nil, identity.ErrInvalidToken
	case strings.HasPrefix(token, run.TokenPrefix):
		p, subject, err := s.Runs.AuthenticateTokenSubject(c.UserContext(), token)
		return p, &subject, err
	}
	p, err := s.principal(c.UserContext(), token)
	return p, nil, err
}

// principal resolves a bearer token to its principal.
func (s *server) principal(ctx context.Context, token string) (access.Principal, error) {
	switch {
	case strings.HasPrefix(token, identity.UserTokenPrefix):
		return s.Identity.AuthenticateUserToken(ctx, token)
	case strings.HasPrefix(token, serviceaccount.TokenPrefix):
		return s.ServiceAccounts.Authenticate(ctx, token)
	case strings.HasPrefix(token, run.TokenPrefix):
		return s.Runs.AuthenticateToken(ctx, token)
	case strings.HasPrefix(token, team.TokenPrefix):
		return s.TeamTokens.Authenticate(ctx, token)
	case len(s.Config.OperatorToken) >= config.MinSecretBytes &&
		subtle.ConstantTimeCompare([]byte(token), []byte(s.Config.OperatorToken.Reveal())) == 1:
		return operatorPrincipal(), nil
	}
	return access.Principal{}, identity.ErrInvalidToken
}

// owner is the bounded ownership projection of a request: the organization
// (by ID and slug) and, for workspace-scoped requests, the workspace.
type owner struct {
	OrganizationID   string
	OrganizationSlug string
	WorkspaceID      string
	// admission are the launch admission facts of this organization and
	// workspace, read with the projection (nil when the resolver read
	// none): the guard decides on them instead of reading them again.
	admission *launch.Facts
}

// resolver computes a request's ownership from its path, inside the
// principal's own organization (globally for the operator).
type resolver func(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error)

type handler func(c *fiber.Ctx, p access.Principal, o owner) error

// guard runs the admission sequence every route shares before its handler
// reads a body or writes anything: credential, ownership projection, launch
// admission. A principal bound to one organization never resolves anything
// outside it, so another tenant's resource is unresolved exactly like a
// missing one, and both get the same answer. Reads are admitted by the
// gate alone; every other method is a mutation, which a suspension also
// refuses.
func (s *server) guard(resolve resolver, h handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		rule := launch.Admit
		if c.Method() == fiber.MethodGet || c.Method() == fiber.MethodHead {
			rule = launch.AdmitAccess
		}
		return s.guardWith(rule, resolve, h)(c)
	}
}

// guardStop is guard for mutations that stop or clean up rather than
// start work (cancel, discard, unlock, delete): the gate applies, a
// suspension does not (SPEC §1 rule 7).
func (s *server) guardStop(resolve resolver, h handler) fiber.Handler {
	return s.guardWith(launch.AdmitAccess, resolve, h)
}

func (s *server) guardWith(rule launch.Rule, resolve resolver, h handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ctx := c.UserContext()
		p, runSubject, err := s.authenticateSubject(c)
		if err != nil {
			return s.writeError(c, err)
		}
		// Resolvers look filters up as text.
		if err := httpx.CheckQuery(c); err != nil {
			return s.writeError(c, err)
		}
		if p.Account {
			// The resolver binds the token to judge what it reaches; the
			// binding below reuses that one.
			ctx = context.WithValue(ctx, accountBindingsKey{}, accountBindings{})
		}
		// A run token's subject is almost always its own workspace, known
		// before resolution: its admission facts and names were read with
		// the token, so a sandboxed CLI's requests about its own workspace
		// are admitted and resolved without another round trip.
		var ownAdmission error
		if p.Kind == access.KindRun {
			own := launch.Subject{OrganizationID: p.OrganizationID, WorkspaceID: p.WorkspaceID}
			if runSubject != nil {
				_, ownAdmission = s.Launch.RequireFrom(ctx, runSubject.Admission, own, launch.AdmitAccess)
				ctx = context.WithValue(ctx, runSubjectKey{}, runSubject)
			} else {
				_, ownAdmission = s.Launch.RequireBy(ctx, nil, own, launch.AdmitAccess)
			}
		}
		o, err := resolve(ctx, c, p)
		if err != nil {
			return s.writeError(c, err)
		}
		if p.Account {
			// An account-wide token acts in the resolved organization as
			// its person's membership there, or not at all: from here on
			// it is that member, like an organization-bound token.
			if o.OrganizationID == "" {
				return s.writeError(c, fault.ErrNotFound)
			}
			if p, err = s.bindAccount(ctx, p, o.OrganizationID); err != nil {
				return s.writeError(c, err)
			}
		}
		switch p.Kind {
		case access.KindOperator:
			// The installation operator is not a tenant: launch control
			// admits tenants, and the operator token can rewrite the
			// control anyway. It provisions organizations and canary
			// workspaces while the gate is closed; runs it creates still
			// pass the new-run rule, and uploads to capability URLs are
			// admitted by their owner like any other.
			p.OrganizationID = o.OrganizationID
		case access.KindRun:
			// A run token is bound to one admitted phase of one workspace
			// and can only read and publish that workspace's state: that
			// workspace is the exact subject of whatever it asks (even the
			// organization-wide checks the CLI makes), and a suspension
			// does not cut off a phase already running.
			err := ownAdmission
			if o.WorkspaceID != "" && o.WorkspaceID != p.WorkspaceID {
				// Another workspace is admitted as itself, then read only
				// as a consumer of its shared state (remotestate.go), else
				// not found; the run's own workspace must be admitted too.
				ownErr := err
				subject := launch.Subject{OrganizationID: p.OrganizationID, WorkspaceID: o.WorkspaceID}
				if err = s.admitOwner(ctx, o, subject, launch.AdmitAccess); err == nil {
					if p, err = s.consumerPrincipal(ctx, c, p, o); err == nil {
						err = ownErr
					}
				}
			}
			if err != nil {
				return s.writeError(c, err)
			}
		default:
			// Tenant credentials are admitted as their own organization and
			// the exact workspace the request resolved to, if any. (A
			// service-account token bound to one workspace is still judged
			// organization-wide on organization-wide routes: its
			// permissions may reach beyond reading.)
			subject := launch.Subject{OrganizationID: p.OrganizationID, WorkspaceID: o.WorkspaceID}
			if err := s.admitOwner(ctx, o, subject, rule); err != nil {
				return s.writeError(c, err)
			}
		}
		// A resolved owner outside the principal's tenant cannot happen
		// (resolution is tenant-bound); a missing one is not found.
		if o.OrganizationID == "" || (p.Kind != access.KindOperator && o.OrganizationID != p.OrganizationID) {
			return s.writeError(c, fault.ErrNotFound)
		}
		return h(c, p, o)
	}
}

// admitOwner decides the launch rule for subject, a workspace the request
// resolved to (or its organization): on the facts read with the owner when
// they are that subject's, else by reading them now.
func (s *server) admitOwner(ctx context.Context, o owner, subject launch.Subject, rule launch.Rule) error {
	var err error
	if o.admission != nil && o.OrganizationID == subject.OrganizationID && o.WorkspaceID == subject.WorkspaceID {
		_, err = s.Launch.RequireFrom(ctx, *o.admission, subject, rule)
	} else {
		_, err = s.Launch.RequireBy(ctx, nil, subject, rule)
	}
	return err
}

// Capability URLs (state and archive uploads, phase logs) carry no bearer
// token: an HMAC over method, path and expiry authorizes them.

// signedURL returns an absolute capability URL whose query carries its
// expiry and signature.
func (s *server) signedURL(method, path string, lifetime time.Duration) string {
	return s.absolute(path) + "?" + s.Capabilities.Query(method, path, lifetime)
}

func (s *server) validSignature(method, resource, expiresRaw, signature string) bool {
	return s.Capabilities.Valid(method, resource, expiresRaw, signature, time.Now())
}

// accountBindings are the memberships an account-wide token was bound to
// during one request, by organization.
type accountBindings map[string]access.Principal

type accountBindingsKey struct{}

// bindAccount is identity.BindAccount, once per organization and request:
// resolution binds the token to judge reachability, and the guard binds it
// again for the handler.
func (s *server) bindAccount(ctx context.Context, p access.Principal, organizationID string) (access.Principal, error) {
	memo, _ := ctx.Value(accountBindingsKey{}).(accountBindings)
	if bound, ok := memo[organizationID]; ok {
		return bound, nil
	}
	bound, err := s.Identity.BindAccount(ctx, p, organizationID)
	if err == nil && memo != nil {
		memo[organizationID] = bound
	}
	return bound, err
}
