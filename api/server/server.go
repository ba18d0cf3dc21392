package server

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"

	"github.com/cairnhq/cairn/api/assembly"
	"github.com/cairnhq/cairn/api/assembly/domain"
	"github.com/cairnhq/cairn/api/authserver"
	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/modulesv1"
	"github.com/cairnhq/cairn/api/operator"
	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/buildinfo"
	"github.com/cairnhq/cairn/api/platform/capability"
	"github.com/cairnhq/cairn/api/platform/clientaddr"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/platform/telemetry"
	"github.com/cairnhq/cairn/api/tfe"
	v1 "github.com/cairnhq/cairn/api/v1"
)

// Server is the assembled Fiber application of cairn-api.
type Server struct {
	App *fiber.App
	V1  *v1.API

	deps          assembly.Deps
	latestVersion int64
}

// Services returns the domain services the server was assembled with, for
// tests that drive a service path no HTTP surface exposes (the trusted
// policy build completion).
func (s *Server) Services() domain.Services { return s.deps.Services }

// Tracing returns the span exporter the server was built with (nil: none).
func (s *Server) Tracing() *telemetry.Tracing { return s.deps.Tracing }

// Blobs returns the sealed artifact store (nil without a master key).
func (s *Server) Blobs() *blob.Store { return s.deps.Blobs }

// New mounts every surface of cairn-api on one Fiber app, over the
// services assembly.Assemble built.
func New(deps assembly.Deps) (*Server, error) {
	latest, err := db.LatestVersion()
	if err != nil {
		return nil, err
	}
	app := fiber.New(fiber.Config{
		// Bodies are streamed to handlers. With a body limit of one byte,
		// fasthttp pre-reads at most one byte before calling the handler,
		// so every limit is ours to check against the declared length
		// before the body is read. Handlers must read bodies through
		// limited streams, never through Ctx.Body().
		StreamRequestBody:     true,
		BodyLimit:             1,
		ReadBufferSize:        16 << 10,
		ReadTimeout:           15 * time.Minute,
		WriteTimeout:          15 * time.Minute,
		IdleTimeout:           2 * time.Minute,
		DisableStartupMessage: true,
		ErrorHandler:          httpx.ErrorHandler(deps.Logger),
	})
	// On shutdown, close idle keep-alive connections instead of waiting for
	// their clients to hang up.
	app.Server().CloseOnShutdown = true
	s := &Server{App: app, deps: deps, latestVersion: latest}
	app.Use(httpx.RequestContext(deps.Logger, httpx.RequestOptions{
		// Remote-backend clients may carry their own well-formed request
		// IDs; anything else is replaced.
		KeepClientID: func(c *fiber.Ctx) bool { return strings.HasPrefix(c.Path(), "/api/v2/") },
		Probe:        isProbe,
	}))
	app.Use(traceRequests(deps.Tracing, app))
	metrics := telemetry.NewMetrics(deps.DB)
	app.Use(countRequests(metrics))
	app.Get("/health", s.health)
	app.Get("/ready", s.ready)
	app.Get("/metrics", s.metricsAuth, adaptor.HTTPHandler(metrics.Handler()))
	app.Get(credential.IssuerPath+credential.DiscoveryPath, s.openIDConfiguration)
	app.Get(credential.IssuerPath+credential.JWKSPath, s.jwks)
	authDeps := authserver.Deps{
		Identity:       deps.Identity,
		OAuth:          deps.OAuth,
		SCIM:           deps.SCIM,
		SSO:            deps.SSO,
		Logger:         deps.Logger,
		SecureCookies:  deps.Config.SecureCookies,
		DashboardURL:   deps.Config.DashboardURL,
		TrustedProxies: deps.Config.TrustedProxyPrefixes(),
		VouchKey:       clientaddr.VouchKey(deps.Config),
	}
	authserver.MountDiscovery(app, authDeps)
	authserver.Mount(app.Group("/api/auth"), authDeps)
	remote := tfe.Deps{
		Config: deps.Config, DB: deps.DB, Logger: deps.Logger, Identity: deps.Identity,
		ServiceAccounts: deps.Services.ServiceAccounts, Workspaces: deps.Services.Workspaces,
		State: deps.Services.State, Launch: deps.Services.Launch, Runs: deps.Services.Runs,
		Teams: deps.Services.Teams, Capabilities: capability.NewSigner(deps.Config.AuthSecret),
		Registry: deps.Services.Registry, VariableSets: deps.Services.Varsets, Triggers: deps.Services.Triggers,
	}
	// The module registry protocol takes the remote-backend API's tokens:
	// the same CLIs present the same credentials for the host.
	modules := modulesv1.Deps{Registry: deps.Services.Registry, Runs: deps.Services.Runs, Launch: deps.Services.Launch,
		Authenticate: tfe.Authenticator(remote), Capabilities: remote.Capabilities, Logger: deps.Logger,
		DownloadTTL: deps.Config.RegistryDownloadTTL}
	if modulesv1.Ready(modules) {
		remote.ModulesV1 = true
	}
	tfe.Mount(app, remote)
	modulesv1.Mount(app, modules)
	operator.Mount(app.Group("/operator/v1"), operator.Deps{
		Token: deps.Config.OperatorToken, Launch: deps.Services.Launch, Logger: deps.Logger,
	})
	v1deps := v1.Deps{Config: deps.Config, DB: deps.DB, Logger: deps.Logger, Services: deps.Services}
	if deps.Identity != nil {
		v1deps.Sessions = deps.Identity
	}
	if deps.OAuth != nil {
		v1deps.Agents = deps.OAuth
	}
	s.V1 = v1.Mount(app, v1deps)
	return s, nil
}

// V1Services returns the domain services the server was assembled with.
func (s *Server) V1Services() domain.Services { return s.deps.Services }

// isProbe reports whether a request is a liveness, readiness or metrics
// probe, which monitoring repeats all day long.
func isProbe(c *fiber.Ctx) bool {
	switch c.Path() {
	case "/health", "/ready", "/metrics":
		return c.Method() == fiber.MethodGet
	}
	return false
}

// metricsAuth admits scrapers presenting the operator token: figures of
// the installation are for its operator. Without a token configured the
// endpoint is closed, like the operator API.
func (s *Server) metricsAuth(c *fiber.Ctx) error {
	token := s.deps.Config.OperatorToken.Reveal()
	presented, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
	if token == "" || !ok || subtle.ConstantTimeCompare([]byte(presented), []byte(token)) != 1 {
		return fiber.ErrNotFound
	}
	return c.Next()
}

// health answers without touching the database: liveness plus which
// bindings are configured, as booleans only.
func (s *Server) health(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{
		"status":   "ok",
		"version":  buildinfo.Version,
		"bindings": s.deps.Config.Bindings(),
		"meta":     httpx.Meta{RequestID: httpx.RequestID(c)},
	})
}

// ready checks connectivity, the applied schema version and the core tables.
func (s *Server) ready(c *fiber.Ctx) error {
	meta := httpx.Meta{RequestID: httpx.RequestID(c)}
	if s.deps.DB == nil {
		return c.Status(http.StatusServiceUnavailable).JSON(fiber.Map{"status": "unavailable", "database": "unconfigured", "meta": meta})
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), 3*time.Second)
	defer cancel()
	status, err := db.CheckSchema(ctx, s.deps.DB.DB, s.latestVersion)
	if err != nil {
		s.deps.Logger.WarnContext(ctx, "readiness check failed", "request_id", meta.RequestID, "error", err)
		return c.Status(http.StatusServiceUnavailable).JSON(fiber.Map{"status": "unavailable", "database": "unreachable", "meta": meta})
	}
	if !status.Ready() {
		return c.Status(http.StatusServiceUnavailable).JSON(fiber.Map{"status": "unavailable", "schema": "migration_required", "meta": meta})
	}
	return c.JSON(fiber.Map{"status": "ready", "schema": "current", "meta": meta})
}
