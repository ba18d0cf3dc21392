package tfe

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/registry"
)

// Registry modules on /api/v2 are the private module registry in HCP
// Terraform's shape, as go-tfe calls it: modules without a VCS connection
// are created here, and their versions are published by uploading a
// tar.gz to a signed upload link that needs no bearer token. The registry
// service decides who may do what; another organization's module answers
// exactly as a missing one.

func (s *server) registerRegistryModules(r fiber.Router) {
	// Without the registry service (no database) these routes fail closed.
	route := func(method, path string, h fiber.Handler) {
		r.Add(method, path, func(c *fiber.Ctx) error {
			if s.Registry == nil {
				return s.writeError(c, fault.ErrUnavailable)
			}
			return c.Next()
		}, h)
	}
	const modules = "/organizations/:org/registry-modules"
	const address = modules + "/:registry/:namespace/:name/:provider"
	route(http.MethodGet, modules, s.guard(s.byOrganization, s.listRegistryModules))
	route(http.MethodPost, modules, s.guard(s.byOrganization, s.createRegistryModule))
	route(http.MethodGet, address, s.guard(s.byOrganization, s.readRegistryModule))
	route(http.MethodDelete, modules+"/:registry/:namespace/:name", s.guardStop(s.byOrganization, s.deleteRegistryModules))
	route(http.MethodDelete, address, s.guardStop(s.byOrganization, s.deleteRegistryModules))
	route(http.MethodPost, address+"/versions", s.guard(s.byOrganization, s.createRegistryModuleVersion))
	route(http.MethodGet, address+"/version", s.guard(s.byOrganization, s.readRegistryModuleVersion))
	route(http.MethodPatch, address+"/:version", s.guard(s.byOrganization, s.updateRegistryModuleVersion))
	route(http.MethodDelete, address+"/:version", s.guardStop(s.byOrganization, s.deleteRegistryModuleVersion))
	// The deprecated spellings go-tfe still uses: versions are created under
	// registry-modules/:org/:name/:provider, and deletes (its test cleanup)
	// go through actions/delete. Both name private modules only. The delete
	// routes come first: their fifth segment is a name, never "versions".
	const deprecated = "/registry-modules/actions/delete/:org/:name"
	route(http.MethodPost, deprecated, s.guardStop(s.byOrganization, s.deleteRegistryModules))
	route(http.MethodPost, deprecated+"/:provider", s.guardStop(s.byOrganization, s.deleteRegistryModules))
	route(http.MethodPost, deprecated+"/:provider/:version", s.guardStop(s.byOrganization, s.deleteRegistryModuleVersion))
	route(http.MethodPost, "/registry-modules/:org/:name/:provider/versions", s.guard(s.byOrganization, s.createRegistryModuleVersion))
	route(http.MethodGet, "/registry-modules/:id", s.guard(s.byRegistryModule, s.readRegistryModuleByID))
	// HCP's upload links name an object store path; go-tfe's tests look
	// for "/object/" in them.
	route(http.MethodPut, strings.TrimPrefix(registryUploadPrefix, "/api/v2")+":id", s.uploadRegistryModuleVersion)
}

const registryUploadPrefix = "/api/v2/object/registry-module-versions/"

func (s *server) byRegistryModule(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, '' FROM registry_modules m JOIN organizations o ON o.id = m.organization_id
		WHERE m.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

var (
	errRegistryName = fmt.Errorf("registry name: %w", registry.ErrInvalid)
	errNamespace    = fmt.Errorf("registry module namespace: %w", registry.ErrInvalid)
	errNoCode       = fmt.Errorf("no-code modules: %w", registry.ErrInvalid)
	errVersionBody  = fmt.Errorf("module version change: %w", registry.ErrInvalid)
)

// pathParam is a path segment as the client meant it: go-tfe escapes
// segments, and a version's build metadata may arrive as %2B.
func pathParam(c *fiber.Ctx, name string) (string, error) {
	v, err := url.PathUnescape(c.Params(name))
	if err != nil {
		return "", fault.ErrNotFound
	}
	return v, nil
}

// moduleAddress is the module a request's path names. The deprecated
// spellings have neither registry nor namespace: they mean the
// organization's private registry.
type moduleAddress struct {
	registry, namespace, name, provider string
}

func addressOf(c *fiber.Ctx, o owner) (moduleAddress, error) {
	a := moduleAddress{registry: registry.RegistryPrivate, namespace: o.OrganizationSlug}
	var err error
	for _, f := range []struct {
		param string
		into  *string
	}{{"registry", &a.registry}, {"namespace", &a.namespace}, {"name", &a.name}, {"provider", &a.provider}} {
		if c.Params(f.param) == "" {
			continue
		}
		if *f.into, err = pathParam(c, f.param); err != nil {
			return a, err
		}
	}
	return a, nil
}

func (s *server) moduleAt(c *fiber.Ctx, p access.Principal, o owner) (registry.Module, error) {
	a, err := addressOf(c, o)
	if err != nil {
		return registry.Module{}, err
	}
	return s.Registry.ModuleByAddress(c.UserContext(), p, a.registry, a.namespace, a.name, a.provider)
}

// versionAt is the version a request names, by the path's :version or the
// module_version query parameter.
func (s *server) versionAt(c *fiber.Ctx, p access.Principal, o owner) (registry.Module, registry.Version, error) {
	m, err := s.moduleAt(c, p, o)
	if err != nil {
		return m, registry.Version{}, err
	}
	v := c.Query("module_version")
	if c.Params("version") != "" {
		if v, err = pathParam(c, "version"); err != nil {
			return m, registry.Version{}, err
		}
	}
	if v == "" {
		return m, registry.Version{}, fault.ErrNotFound
	}
	version, err := s.Registry.VersionByString(c.UserContext(), p, m.ID, v)
	return m, version, err
}

// versionStatus is HCP's name for a version's state: an errored version
// failed ingestion.
func versionStatus(v registry.Version) string {
	if v.Status == registry.VersionErrored {
		return "reg_ingress_failed"
	}
	return v.Status
}

// registryModuleResource renders a module with every version's status.
// Permissions say what the caller may do; a module bound to a repository
// shows the binding as its vcs-repo.
func registryModuleResource(p access.Principal, o owner, m registry.Module, versions []registry.Version) resource {
	write := p.OrganizationPermissions().Has(access.PermRegistryWrite)
	statuses := make([]map[string]string, 0, len(versions))
	for _, v := range versions {
		e := ""
		if v.ErrorMessage != nil {
			e = *v.ErrorMessage
		}
		statuses = append(statuses, map[string]string{"version": v.Version, "status": versionStatus(v), "error": e})
	}
	attrs := map[string]any{
		"name": m.Name, "provider": m.Provider, "registry-name": m.RegistryName, "namespace": m.Namespace,
		"no-code": false, "status": m.Status, "version-statuses": statuses, "test-config": nil,
		"permissions":          map[string]bool{"can-delete": write, "can-resync": write, "can-retry": write},
		"publishing-mechanism": nil, "vcs-repo": nil,
		"created-at": timestamp(m.CreatedAt), "updated-at": timestamp(m.UpdatedAt),
	}
	if src := m.Source; src != nil {
		identifier := src.Owner + "/" + src.Repository
		attrs["publishing-mechanism"] = "git_tag"
		attrs["vcs-repo"] = map[string]any{
			"identifier": identifier, "display-identifier": identifier, "service-provider": "github",
			"repository-http-url": "https://github.com/" + identifier, "tags": true, "tag-prefix": src.TagPrefix,
			"source-directory": src.Directory, "branch": "", "ingress-submodules": true,
		}
	}
	return resource{
		ID: m.ID, Type: "registry-modules", Attributes: attrs,
		Relationships: map[string]relationship{"organization": toOne(o.OrganizationSlug, "organizations")},
		Links:         map[string]string{"self": "/api/v2/registry-modules/" + m.ID},
	}
}

// registryVersionResource renders a version. A pending version carries its
// upload link for callers who may publish: the link needs no bearer, so
// handing it to a reader would let the reader publish.
func (s *server) registryVersionResource(p access.Principal, v registry.Version) resource {
	source := "tfe-api"
	if v.Origin == registry.OriginTag {
		source = "github"
	}
	updated := v.CreatedAt
	if v.PublishedAt != nil {
		updated = *v.PublishedAt
	}
	attrs := map[string]any{
		"source": source, "status": versionStatus(v), "version": v.Version, "commit-sha": v.CommitSHA,
		"created-at": timestamp(v.CreatedAt), "updated-at": timestamp(updated),
		"error": v.ErrorCode, "error-message": v.ErrorMessage, "deprecation": nil, "revocation": nil,
	}
	if d := v.Deprecation; d != nil {
		attrs["deprecation"] = map[string]any{"reason": d.Reason, "link": d.Link}
	}
	if r := v.Revocation; r != nil {
		attrs["revocation"] = map[string]any{"status": "Revoked", "message": r.Reason}
	}
	res := resource{
		ID: v.ID, Type: "registry-module-versions", Attributes: attrs,
		Relationships: map[string]relationship{"registry-module": toOne(v.ModuleID, "registry-modules")},
	}
	if v.Status == registry.VersionPending && p.OrganizationPermissions().Has(access.PermRegistryWrite) {
		res.Links = map[string]string{"upload": s.signedURL(http.MethodPut, registryUploadPrefix+v.ID, uploadURLLifetime)}
	}
	return res
}

// allVersions reads every version of a module, newest first.
func (s *server) allVersions(ctx context.Context, p access.Principal, moduleID string) ([]registry.Version, error) {
	var all []registry.Version
	q := registry.ListVersionsQuery{Limit: 100}
	for {
		page, next, err := s.Registry.ListVersions(ctx, p, moduleID, q)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		q.Cursor = next
	}
}

func (s *server) writeRegistryModule(c *fiber.Ctx, status int, p access.Principal, o owner, m registry.Module) error {
	versions, err := s.allVersions(c.UserContext(), p, m.ID)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, status, registryModuleResource(p, o, m, versions))
}

// listRegistryModules pages the organization's modules by number, as
// go-tfe does. filter[organization_name] names the owning organization: any
// other one has nothing here.
func (s *server) listRegistryModules(c *fiber.Ctx, p access.Principal, o owner) error {
	if _, err := strictIncludes(c, "no-code-modules"); err != nil {
		return s.writeError(c, err)
	}
	ctx := c.UserContext()
	var modules []registry.Module
	if org := c.Query("filter[organization_name]"); org == "" || org == o.OrganizationSlug {
		q := registry.ListModulesQuery{Query: c.Query("q"), Provider: c.Query("filter[provider]"),
			RegistryName: c.Query("filter[registry_name]"), Limit: 100}
		for {
			page, next, err := s.Registry.ListModules(ctx, p, q)
			if err != nil {
				return s.writeError(c, err)
			}
			modules = append(modules, page...)
			if next == "" {
				break
			}
			q.Cursor = next
		}
	}
	page, meta := pageOf(c, modules)
	data := make([]resource, 0, len(page))
	for _, m := range page {
		versions, err := s.allVersions(ctx, p, m.ID)
		if err != nil {
			return s.writeError(c, err)
		}
		data = append(data, registryModuleResource(p, o, m, versions))
	}
	return writeWithIncluded(c, http.StatusOK, data, nil, meta)
}

// createRegistryModule creates a module without a VCS connection. A
// private module's namespace is its organization; a public one names its
// own (HCP keeps public modules as curated references).
func (s *server) createRegistryModule(c *fiber.Ctx, p access.Principal, o owner) error {
	var doc struct {
		Data struct {
			Type       string `json:"type"`
			Attributes struct {
				Name         *string `json:"name"`
				Provider     *string `json:"provider"`
				RegistryName string  `json:"registry-name"`
				Namespace    string  `json:"namespace"`
				NoCode       bool    `json:"no-code"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	a := doc.Data.Attributes
	if doc.Data.Type != "registry-modules" || a.Name == nil || a.Provider == nil {
		return s.writeError(c, errInvalidDocument)
	}
	in := registry.CreateModuleInput{RegistryName: a.RegistryName, Namespace: a.Namespace, Name: *a.Name, Provider: *a.Provider}
	switch in.RegistryName {
	case "", registry.RegistryPrivate:
		if in.Namespace != "" {
			return s.writeError(c, errNamespace)
		}
		in.RegistryName, in.Namespace = registry.RegistryPrivate, o.OrganizationSlug
	case registry.RegistryPublic:
		if in.Namespace == "" {
			return s.writeError(c, errNamespace)
		}
	default:
		return s.writeError(c, errRegistryName)
	}
	if a.NoCode {
		return s.writeError(c, errNoCode)
	}
	m, err := s.Registry.CreateModule(c.UserContext(), p, in)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusCreated, registryModuleResource(p, o, m, nil))
}

func (s *server) readRegistryModule(c *fiber.Ctx, p access.Principal, o owner) error {
	m, err := s.moduleAt(c, p, o)
	if err != nil {
		return s.writeError(c, err)
	}
	return s.writeRegistryModule(c, http.StatusOK, p, o, m)
}

func (s *server) readRegistryModuleByID(c *fiber.Ctx, p access.Principal, o owner) error {
	m, err := s.Registry.Module(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	return s.writeRegistryModule(c, http.StatusOK, p, o, m)
}

// deleteRegistryModules deletes every provider of a module name, or one
// provider's module when the path names it, with all their versions. The
// deprecated path names no registry: it deletes the name in every
// registry and namespace of the organization, as HCP's does (go-tfe
// cleans up public modules through it).
func (s *server) deleteRegistryModules(c *fiber.Ctx, p access.Principal, o owner) error {
	a, err := addressOf(c, o)
	if err != nil {
		return s.writeError(c, err)
	}
	if c.Params("registry") == "" {
		a.registry, a.namespace = "", ""
	}
	var provider *string
	if a.provider != "" {
		provider = &a.provider
	}
	if err := s.Registry.DeleteModulesByName(c.UserContext(), p, a.registry, a.namespace, a.name, provider); err != nil {
		return s.writeError(c, err)
	}
	return c.SendStatus(http.StatusNoContent)
}

func (s *server) createRegistryModuleVersion(c *fiber.Ctx, p access.Principal, o owner) error {
	var doc struct {
		Data struct {
			Type string `json:"type"`
			// HCP's commit-sha is informational for uploads; Cairn records
			// commits only for versions it ingests from tags.
			Attributes struct {
				Version *string `json:"version"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	a := doc.Data.Attributes
	if doc.Data.Type != "registry-module-versions" || a.Version == nil {
		return s.writeError(c, errInvalidDocument)
	}
	m, err := s.moduleAt(c, p, o)
	if err != nil {
		return s.writeError(c, err)
	}
	v, err := s.Registry.CreateVersion(c.UserContext(), p, m.ID, *a.Version, registry.VersionOrigin{Kind: registry.OriginUpload})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusCreated, s.registryVersionResource(p, v))
}

func (s *server) readRegistryModuleVersion(c *fiber.Ctx, p access.Principal, o owner) error {
	_, v, err := s.versionAt(c, p, o)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, s.registryVersionResource(p, v))
}

func (s *server) deleteRegistryModuleVersion(c *fiber.Ctx, p access.Principal, o owner) error {
	_, v, err := s.versionAt(c, p, o)
	if err != nil {
		return s.writeError(c, err)
	}
	if err := s.Registry.DeleteVersion(c.UserContext(), p, v.ID); err != nil {
		return s.writeError(c, err)
	}
	return c.SendStatus(http.StatusNoContent)
}

// updateRegistryModuleVersion deprecates, restores, revokes or un-revokes
// a version with HCP's bodies: exactly one of deprecation
// (deprecated-status Deprecated | Undeprecated) and revocation (status
// Revoked | Unrevoked). The service holds HCP's rules: only a deprecated
// version can be revoked, un-revoking leaves it deprecated.
func (s *server) updateRegistryModuleVersion(c *fiber.Ctx, p access.Principal, o owner) error {
	var doc struct {
		Data struct {
			Type       string `json:"type"`
			Attributes struct {
				Deprecation *struct {
					Status string `json:"deprecated-status"`
					Reason string `json:"reason"`
					Link   string `json:"link"`
				} `json:"deprecation"`
				Revocation *struct {
					Status  string `json:"status"`
					Message string `json:"message"`
				} `json:"revocation"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	a := doc.Data.Attributes
	if (a.Deprecation == nil) == (a.Revocation == nil) {
		return s.writeError(c, errVersionBody)
	}
	_, v, err := s.versionAt(c, p, o)
	if err != nil {
		return s.writeError(c, err)
	}
	ctx := c.UserContext()
	switch {
	case a.Deprecation != nil && a.Deprecation.Status == "Deprecated":
		v, err = s.Registry.Deprecate(ctx, p, v.ID, a.Deprecation.Reason, a.Deprecation.Link)
	case a.Deprecation != nil && a.Deprecation.Status == "Undeprecated":
		v, err = s.Registry.Restore(ctx, p, v.ID)
	case a.Revocation != nil && a.Revocation.Status == "Revoked":
		v, err = s.Registry.Revoke(ctx, p, v.ID, a.Revocation.Message)
	case a.Revocation != nil && a.Revocation.Status == "Unrevoked":
		v, err = s.Registry.Unrevoke(ctx, p, v.ID)
	default:
		err = errVersionBody
	}
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, s.registryVersionResource(p, v))
}

// uploadRegistryModuleVersion receives a version's archive at its signed
// upload link: signature, then admission for the version's organization,
// then the declared length, all before a byte is read. The archive is
// streamed into sealed storage.
func (s *server) uploadRegistryModuleVersion(c *fiber.Ctx) error {
	ctx := c.UserContext()
	id := c.Params("id")
	if !s.validSignature(http.MethodPut, registryUploadPrefix+id, c.Query("expires"), c.Query("signature")) {
		return s.writeError(c, fault.ErrNotFound)
	}
	var organizationID string
	err := s.DB.GetContext(ctx, &organizationID, `SELECT organization_id FROM registry_module_versions WHERE id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return s.writeError(c, fault.ErrNotFound)
	}
	if err != nil {
		return s.writeError(c, fmt.Errorf("resolving module version: %w", err))
	}
	if _, err := s.Launch.Require(ctx, nil, launch.Subject{OrganizationID: organizationID}); err != nil {
		return s.writeError(c, err)
	}
	if int64(c.Request().Header.ContentLength()) > registry.MaxArchiveBytes {
		return s.writeError(c, httpx.ErrTooLarge)
	}
	var body io.Reader = c.Request().BodyStream()
	if body == nil {
		body = bytes.NewReader(c.Body())
	}
	v, err := s.Registry.PublishArchive(ctx, id, body)
	if err != nil {
		return s.writeError(c, err)
	}
	if v.Status == registry.VersionErrored && v.ErrorCode != nil && v.ErrorMessage != nil {
		// The archive broke the rules: the version is errored for good,
		// and the uploader learns why in the version's own safe words.
		return writeDocument(c, http.StatusUnprocessableEntity, map[string]any{"errors": []apiError{{
			Status: "422", Title: titleFor(http.StatusUnprocessableEntity), Code: *v.ErrorCode, Detail: *v.ErrorMessage,
			Meta: map[string]string{"request_id": httpx.RequestID(c)},
		}}})
	}
	return c.SendStatus(http.StatusOK)
}
