package modulesv1

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/capability"
	"github.com/cairnhq/cairn/api/platform/discovery"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/problem"
	"github.com/cairnhq/cairn/api/registry"
	"github.com/cairnhq/cairn/api/run"
)

// Paths of the protocol. ModulesPath is what service discovery announces
// as modules.v1; the CLIs append <namespace>/<name>/<provider>/….
const (
	basePath    = "/api/registry/v1"
	ModulesPath = discovery.ModulesV1Path
	archivePath = basePath + "/_dl/"
)

// DefaultDownloadTTL is how long a signed archive URL lasts: long enough
// for a slow `init` of many modules, as HCP's and OTF's do.
const DefaultDownloadTTL = time.Hour

// Deps is what the protocol serves with. Without Registry, Runs, Launch or
// Authenticate every route answers 503.
type Deps struct {
	Registry *registry.Service
	// Runs records the versions a run token downloads as the run's
	// evidence.
	Runs   *run.Service
	Launch *launch.Service
	// Authenticate resolves a bearer token to its principal: the tokens
	// the remote-backend API accepts.
	Authenticate func(ctx context.Context, token string) (access.Principal, error)
	// Capabilities signs and checks archive URLs.
	Capabilities capability.Signer
	Logger       *slog.Logger
	// DownloadTTL is how long a signed archive URL lasts
	// (DefaultDownloadTTL when zero).
	DownloadTTL time.Duration
	// Now is the clock archive URLs are signed and checked with
	// (time.Now when nil).
	Now func() time.Time
}

type server struct {
	Deps
	ready bool
}

// Mount registers the protocol's routes on app. Anything else under its
// prefix is the protocol's own 404.
func Mount(app *fiber.App, deps Deps) {
	s := &server{Deps: deps, ready: Ready(deps)}
	if s.DownloadTTL <= 0 {
		s.DownloadTTL = DefaultDownloadTTL
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	g := app.Group(basePath)
	// Fiber's Get also answers HEAD, which the download client sends first.
	g.Get("/modules/:namespace/:name/:provider/versions", s.versions)
	g.Get("/modules/:namespace/:name/:provider/:version/download", s.download)
	g.Get("/_dl/:file", s.archive)
	g.Use(func(c *fiber.Ctx) error { return s.writeError(c, fault.ErrNotFound) })
}

// Ready reports whether deps can serve the protocol: discovery announces
// modules.v1 only then.
func Ready(deps Deps) bool {
	return deps.Registry != nil && deps.Runs != nil && deps.Launch != nil && deps.Authenticate != nil
}

// errNoCredentials is a request without a bearer token.
var errNoCredentials = errors.New("no bearer token")

// versionsDocument is the versions answer; the CLIs read modules[0] only.
type versionsDocument struct {
	Modules []moduleVersions `json:"modules"`
}

type moduleVersions struct {
	Source   string         `json:"source"`
	Versions []versionEntry `json:"versions"`
}

// versionEntry carries HCP's per-version deprecation: null when the
// version is not deprecated.
type versionEntry struct {
	Version     string           `json:"version"`
	Deprecation *deprecationView `json:"deprecation"`
}

type deprecationView struct {
	Reason string  `json:"reason"`
	Link   *string `json:"link"`
}

// versions lists a module's resolvable versions: published and not
// revoked; deprecated ones stay, with their deprecation.
func (s *server) versions(c *fiber.Ctx) error {
	p, addr, err := s.admit(c)
	if err != nil {
		return s.writeError(c, err)
	}
	list, err := s.Registry.ResolvableVersions(c.UserContext(), p, addr.namespace, addr.name, addr.provider)
	if err != nil {
		return s.writeError(c, err)
	}
	entries := make([]versionEntry, 0, len(list))
	for _, v := range list {
		e := versionEntry{Version: v.Version}
		if d := v.Deprecation; d != nil {
			e.Deprecation = &deprecationView{Reason: d.Reason}
			if d.Link != "" {
				e.Deprecation.Link = &d.Link
			}
		}
		entries = append(entries, e)
	}
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	return c.JSON(versionsDocument{Modules: []moduleVersions{{Source: addr.String(), Versions: entries}}})
}

// download answers 204 with the version's signed archive URL in
// X-Terraform-Get, the only form Terraform 1.5.7 reads. The URL is
// relative (the CLIs resolve it against this request's, which holds behind
// a proxy) and ends in .tar.gz, so the CLIs fetch it as one archive. A run
// token's download is recorded as its run's evidence first: a run never
// uses a version its evidence does not name.
func (s *server) download(c *fiber.Ctx) error {
	p, addr, err := s.admit(c)
	if err != nil {
		return s.writeError(c, err)
	}
	ctx := c.UserContext()
	version, err := url.PathUnescape(c.Params("version"))
	if err != nil {
		return s.writeError(c, fault.ErrNotFound)
	}
	v, err := s.resolve(ctx, p, addr, version)
	if err != nil {
		return s.writeError(c, err)
	}
	evidence := run.RegistryModule{Address: addr.String(), Version: v.Version, VersionID: v.ID, ArchiveSHA256: *v.ArchiveSHA256}
	if v.Deprecation != nil {
		reason := v.Deprecation.Reason
		evidence.Deprecated, evidence.DeprecationReason = true, &reason
	}
	if err := s.Runs.RecordRegistryDownload(ctx, p, evidence); err != nil {
		return s.writeError(c, err)
	}
	token := signGrant(s.Capabilities, archiveGrant{OrganizationID: v.OrganizationID, ModuleID: v.ModuleID,
		VersionID: v.ID, SHA256: *v.ArchiveSHA256}, s.Now().Add(s.DownloadTTL))
	c.Set("X-Terraform-Get", archivePath+token+archiveSuffix)
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	return c.SendStatus(http.StatusNoContent)
}

// resolve finds one resolvable version of the module by its exact string.
// A revoked, pending or errored version is not found, as is a version of
// a module the principal cannot see.
func (s *server) resolve(ctx context.Context, p access.Principal, addr moduleAddress, version string) (registry.Version, error) {
	m, err := s.Registry.ModuleByAddress(ctx, p, registry.RegistryPrivate, addr.namespace, addr.name, addr.provider)
	if err != nil {
		return registry.Version{}, err
	}
	// One row by its exact string, not the module's whole version list:
	// this is on every module download.
	v, err := s.Registry.VersionByString(ctx, p, m.ID, version)
	if err != nil {
		return registry.Version{}, err
	}
	if !v.Resolvable() || v.ArchiveSHA256 == nil {
		return registry.Version{}, fault.ErrNotFound
	}
	return v, nil
}

// archive streams a version's sealed archive to whoever holds a valid
// grant for it, in constant memory: HEAD answers the same headers without
// the body. Query parameters (go-getter adds some) are ignored; the grant
// is all in the path. A tampered, expired or unknown grant is not found.
func (s *server) archive(c *fiber.Ctx) error {
	if !s.ready {
		return s.writeError(c, fault.ErrUnavailable)
	}
	token, ok := strings.CutSuffix(c.Params("file"), archiveSuffix)
	if !ok {
		return s.writeError(c, fault.ErrNotFound)
	}
	g, ok := openGrant(s.Capabilities, token, s.Now())
	if !ok {
		return s.writeError(c, fault.ErrNotFound)
	}
	ctx := c.UserContext()
	// A download is a read: the gate applies to its organization, a
	// suspension does not.
	if _, err := s.Launch.RequireBy(ctx, nil, launch.Subject{OrganizationID: g.OrganizationID}, launch.AdmitAccess); err != nil {
		return s.writeError(c, err)
	}
	body, size, err := s.Registry.OpenArchive(ctx, g.VersionID, g.SHA256)
	if err != nil {
		return s.writeError(c, err)
	}
	c.Set(fiber.HeaderContentType, "application/gzip")
	c.Set(fiber.HeaderAcceptRanges, "none")
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Status(http.StatusOK)
	// fasthttp copies the stream in fixed buffers and closes it; for HEAD
	// it sends the length and closes it unread.
	c.Context().SetBodyStream(body, int(size))
	return nil
}

// moduleAddress is a module's address in the protocol: the namespace is
// the organization's name.
type moduleAddress struct {
	namespace, name, provider string
}

func (a moduleAddress) String() string { return a.namespace + "/" + a.name + "/" + a.provider }

// admit authenticates a request and admits it through launch control as a
// read of the principal's own organization (and, for a run token, its own
// workspace), and reads the module address from the path.
func (s *server) admit(c *fiber.Ctx) (access.Principal, moduleAddress, error) {
	if !s.ready {
		return access.Principal{}, moduleAddress{}, fault.ErrUnavailable
	}
	token, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
	token = strings.TrimSpace(token)
	if !ok || token == "" {
		return access.Principal{}, moduleAddress{}, errNoCredentials
	}
	ctx := c.UserContext()
	p, err := s.Authenticate(ctx, token)
	if err != nil {
		return access.Principal{}, moduleAddress{}, err
	}
	// The installation operator is no tenant: it has no registry, and
	// nothing here is found for it.
	if p.OrganizationID == "" {
		return access.Principal{}, moduleAddress{}, fault.ErrNotFound
	}
	subject := launch.Subject{OrganizationID: p.OrganizationID}
	if p.Kind == access.KindRun {
		subject.WorkspaceID = p.WorkspaceID
	}
	if _, err := s.Launch.RequireBy(ctx, nil, subject, launch.AdmitAccess); err != nil {
		return access.Principal{}, moduleAddress{}, err
	}
	var addr moduleAddress
	for _, f := range []struct {
		param string
		into  *string
	}{{"namespace", &addr.namespace}, {"name", &addr.name}, {"provider", &addr.provider}} {
		v, err := url.PathUnescape(c.Params(f.param))
		if err != nil {
			return access.Principal{}, moduleAddress{}, fault.ErrNotFound
		}
		*f.into = v
	}
	return p, addr, nil
}

// writeError answers in the registry protocol's error form,
// {"errors": [...]}, with the status the one mapping gives. A request
// without credentials, or with credentials that are not valid, is 401 with
// the bearer challenge; the CLIs then say the lookup was unauthorized.
func (s *server) writeError(c *fiber.Ctx, err error) error {
	var status int
	var code string
	if errors.Is(err, errNoCredentials) {
		status, code = http.StatusUnauthorized, "unauthenticated"
	} else {
		p := problem.Of(c.UserContext(), s.Logger, err)
		status, code = p.Status, p.Code
		if p.RetryAfter > 0 {
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(p.RetryAfter))
		}
	}
	if status == http.StatusUnauthorized {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="modules.v1"`)
	}
	message := http.StatusText(status)
	if code != "" && status < http.StatusInternalServerError {
		message += ": " + strings.ToLower(code)
	}
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	return c.Status(status).JSON(fiber.Map{"errors": []string{message}})
}
