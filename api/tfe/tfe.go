package tfe

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/buildinfo"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/serviceaccount"
	"github.com/cairnhq/cairn/api/state"
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
	// SigningKey signs the capability URLs state is uploaded to.
	SigningKey []byte
}

type server struct {
	Deps
	ready bool
}

// Mount registers service discovery and every /api/v2 route on app.
func Mount(app *fiber.App, deps Deps) {
	s := &server{Deps: deps}
	s.ready = deps.DB != nil && deps.Identity != nil && deps.Workspaces != nil && deps.State != nil && deps.Launch != nil && deps.Runs != nil
	app.Get("/.well-known/terraform.json", s.discovery)
	v2 := app.Group("/api/v2")
	v2.Use(s.headers)
	v2.Get("/ping", s.ping)
	v2.Use(s.failClosed)
	s.registerOrganizations(v2)
	s.registerWorkspaces(v2)
	s.registerState(v2)
	s.registerRuns(v2)
	// Anything else is a JSON:API 404: clients retry 5xx for minutes, and a
	// missing route must look like every other missing resource.
	v2.Use(func(c *fiber.Ctx) error { return s.writeError(c, fault.ErrNotFound) })
}

// discovery tells Terraform-compatible CLIs where the API lives.
func (s *server) discovery(c *fiber.Ctx) error {
	// state.v2 is what the legacy remote backend looks up; sandboxed runs
	// use it to publish state.
	return c.JSON(map[string]string{"tfe.v2": "/api/v2/", "tfe.v2.1": "/api/v2/", "tfe.v2.2": "/api/v2/", "state.v2": "/api/v2/"})
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
// live user token, service-account token or the operator token is
// invalid_token, before anything else is looked at.
func (s *server) authenticate(c *fiber.Ctx) (access.Principal, error) {
	token, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
	token = strings.TrimSpace(token)
	if !ok || token == "" {
		return access.Principal{}, identity.ErrInvalidToken
	}
	ctx := c.UserContext()
	switch {
	case strings.HasPrefix(token, identity.UserTokenPrefix):
		return s.Identity.AuthenticateUserToken(ctx, token)
	case strings.HasPrefix(token, serviceaccount.TokenPrefix):
		return s.ServiceAccounts.Authenticate(ctx, token)
	case strings.HasPrefix(token, run.TokenPrefix):
		return s.Runs.AuthenticateToken(ctx, token)
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
}

// resolver computes a request's ownership from its path, inside the
// principal's own organization (globally for the operator).
type resolver func(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error)

type handler func(c *fiber.Ctx, p access.Principal, o owner) error

// guard runs the admission sequence every route shares before its handler
// reads a body or writes anything: credential, ownership projection, launch
// admission. A principal bound to one organization never resolves anything
// outside it, so another tenant's resource is unresolved exactly like a
// missing one, and both get the same answer.
func (s *server) guard(resolve resolver, h handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ctx := c.UserContext()
		p, err := s.authenticate(c)
		if err != nil {
			return s.writeError(c, err)
		}
		// Resolvers look filters up as text.
		if err := httpx.CheckQuery(c); err != nil {
			return s.writeError(c, err)
		}
		o, err := resolve(ctx, c, p)
		if err != nil {
			return s.writeError(c, err)
		}
		if p.Kind == access.KindOperator {
			p.OrganizationID = o.OrganizationID
		}
		subject := launch.Subject{OrganizationID: o.OrganizationID, WorkspaceID: o.WorkspaceID}
		if p.Kind != access.KindOperator {
			// Tenant credentials are admitted as their own organization.
			subject.OrganizationID = p.OrganizationID
		}
		if _, err := s.Launch.Require(ctx, nil, subject); err != nil {
			return s.writeError(c, err)
		}
		// A resolved owner outside the principal's tenant cannot happen
		// (resolution is tenant-bound); a missing one is not found.
		if o.OrganizationID == "" || (p.Kind != access.KindOperator && o.OrganizationID != p.OrganizationID) {
			return s.writeError(c, fault.ErrNotFound)
		}
		return h(c, p, o)
	}
}

// Capability URLs (state and archive uploads, phase logs) carry no bearer
// token: an HMAC over method, path and expiry authorizes them.

// signedURL returns an absolute capability URL whose query carries its
// expiry and signature.
func (s *server) signedURL(method, path string, lifetime time.Duration) string {
	expires := time.Now().Add(lifetime).Unix()
	return s.absolute(path) + "?expires=" + strconv.FormatInt(expires, 10) + "&signature=" + s.signMethod(method, path, expires)
}

func (s *server) signMethod(method, path string, expires int64) string {
	m := hmac.New(sha256.New, s.SigningKey)
	fmt.Fprintf(m, "%s\n%s\n%d", method, path, expires)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *server) validSignature(method, path, expiresRaw, signature string) bool {
	expires, err := strconv.ParseInt(expiresRaw, 10, 64)
	return err == nil && time.Now().Unix() <= expires && hmac.Equal([]byte(signature), []byte(s.signMethod(method, path, expires)))
}
