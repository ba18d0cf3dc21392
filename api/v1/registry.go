package v1

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/registry"
)

// The private module registry on /v1: modules, their versions (uploaded
// here as .tar.gz archives), the facts read from each archive, and
// HCP's deprecation and revocation. Consumption by the CLIs is the
// separate modules.v1 protocol.

// ModuleSourceView is a module's code-host binding.
type ModuleSourceView struct {
	RepositoryID int64  `json:"repository_id"`
	Owner        string `json:"owner"`
	Repository   string `json:"repository"`
	Directory    string `json:"directory" doc:"The module's directory in the repository; empty for its root."`
	TagPrefix    string `json:"tag_prefix" doc:"Tags <prefix>v?MAJOR.MINOR.PATCH… publish versions."`
}

// ModuleView is a registry module.
type ModuleView struct {
	ID             string            `json:"id" doc:"Module ID (mod_…)."`
	Object         string            `json:"object" enum:"registry_module"`
	OrganizationID string            `json:"organization_id"`
	RegistryName   string            `json:"registry_name" enum:"private,public"`
	Namespace      string            `json:"namespace" doc:"The organization's name for private modules."`
	Name           string            `json:"name"`
	Provider       string            `json:"provider"`
	Status         string            `json:"status" enum:"pending,setup_complete,setup_failed,no_version_tags"`
	Source         *ModuleSourceView `json:"source" doc:"The code-host binding; null when versions are uploaded."`
	VersionCount   int               `json:"version_count"`
	LatestVersion  *string           `json:"latest_version" doc:"The newest resolvable release (else prerelease); null when none."`
	SourceAddress  string            `json:"source_address" doc:"What a configuration's module source says: <host>/<namespace>/<name>/<provider>."`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
}

func (a *API) moduleView(m registry.Module) ModuleView {
	v := ModuleView{ID: m.ID, Object: "registry_module", OrganizationID: m.OrganizationID, RegistryName: m.RegistryName,
		Namespace: m.Namespace, Name: m.Name, Provider: m.Provider, Status: m.Status, VersionCount: m.VersionCount,
		LatestVersion: m.LatestVersion, SourceAddress: a.registryHost() + "/" + m.Namespace + "/" + m.Name + "/" + m.Provider,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
	if s := m.Source; s != nil {
		v.Source = &ModuleSourceView{RepositoryID: s.RepositoryID, Owner: s.Owner, Repository: s.Repository,
			Directory: s.Directory, TagPrefix: s.TagPrefix}
	}
	return v
}

// registryHost is the host (and port) of the API's public URL: the
// hostname a module source names.
func (a *API) registryHost() string {
	u, err := url.Parse(a.deps.Config.PublicURL)
	if err != nil || u.Host == "" {
		return "localhost"
	}
	return u.Host
}

// ModuleVersionErrorView is why a version's archive was refused.
type ModuleVersionErrorView struct {
	Code    string `json:"code" doc:"archive_* (the archive rules) or module_* (the module's configuration)."`
	Message string `json:"message"`
}

// DeprecationView is a version's deprecation.
type DeprecationView struct {
	Reason string    `json:"reason"`
	Link   *string   `json:"link" doc:"An https URL; null when none."`
	At     time.Time `json:"at"`
}

// RevocationView is a version's revocation.
type RevocationView struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// ModuleVersionView is a version of a registry module.
type ModuleVersionView struct {
	ID            string                  `json:"id" doc:"Module version ID (modv_…)."`
	Object        string                  `json:"object" enum:"registry_module_version"`
	ModuleID      string                  `json:"module_id"`
	Version       string                  `json:"version" doc:"The exact semantic version, prerelease and build metadata included."`
	Status        string                  `json:"status" enum:"pending,ok,errored"`
	Error         *ModuleVersionErrorView `json:"error" doc:"Why an errored version's archive was refused; null otherwise."`
	Deprecation   *DeprecationView        `json:"deprecation" doc:"Still resolvable, with a warning; null when not deprecated."`
	Revocation    *RevocationView         `json:"revocation" doc:"Never resolvable again; null when not revoked."`
	ArchiveSHA256 *string                 `json:"archive_sha256" doc:"Hex SHA-256 of the archive; null while pending or when refused unread."`
	ArchiveBytes  *int64                  `json:"archive_bytes"`
	Origin        string                  `json:"origin" enum:"upload,tag"`
	Tag           *string                 `json:"tag"`
	CommitSHA     *string                 `json:"commit_sha"`
	CreatedAt     time.Time               `json:"created_at"`
	PublishedAt   *time.Time              `json:"published_at"`
}

func moduleVersionView(v registry.Version) ModuleVersionView {
	out := ModuleVersionView{ID: v.ID, Object: "registry_module_version", ModuleID: v.ModuleID, Version: v.Version,
		Status: v.Status, ArchiveSHA256: v.ArchiveSHA256, ArchiveBytes: v.ArchiveBytes, Origin: v.Origin, Tag: v.Tag,
		CommitSHA: v.CommitSHA, CreatedAt: v.CreatedAt, PublishedAt: v.PublishedAt}
	if v.ErrorCode != nil {
		out.Error = &ModuleVersionErrorView{Code: *v.ErrorCode}
		if v.ErrorMessage != nil {
			out.Error.Message = *v.ErrorMessage
		}
	}
	if d := v.Deprecation; d != nil {
		out.Deprecation = &DeprecationView{Reason: d.Reason, At: d.At}
		if d.Link != "" {
			link := d.Link
			out.Deprecation.Link = &link
		}
	}
	if r := v.Revocation; r != nil {
		out.Revocation = &RevocationView{Reason: r.Reason, At: r.At}
	}
	return out
}

// ModuleInputView is a variable of a module.
type ModuleInputView struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description"`
	Default     any    `json:"default" doc:"The default value; null when none."`
	Required    bool   `json:"required"`
	Sensitive   bool   `json:"sensitive"`
}

// ModuleOutputView is an output value of a module.
type ModuleOutputView struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Sensitive   bool   `json:"sensitive"`
}

// ModuleResourceView is a resource a module declares.
type ModuleResourceView struct {
	Type string `json:"type"`
	Name string `json:"name"`
	Mode string `json:"mode" enum:"managed,data"`
}

// ModuleProviderView is a provider a module requires.
type ModuleProviderView struct {
	Name               string   `json:"name"`
	Source             string   `json:"source"`
	VersionConstraints []string `json:"version_constraints"`
}

// SubmoduleView is a module under modules/ in the archive.
type SubmoduleView struct {
	Path      string               `json:"path"`
	Inputs    []ModuleInputView    `json:"inputs"`
	Outputs   []ModuleOutputView   `json:"outputs"`
	Resources []ModuleResourceView `json:"resources"`
}

// ModuleFactsView is what a published version's archive says.
type ModuleFactsView struct {
	README     string               `json:"readme" doc:"The root README.md as raw, untrusted markdown; empty when absent or over 256 KiB."`
	Inputs     []ModuleInputView    `json:"inputs"`
	Outputs    []ModuleOutputView   `json:"outputs"`
	Resources  []ModuleResourceView `json:"resources"`
	Providers  []ModuleProviderView `json:"providers"`
	Submodules []SubmoduleView      `json:"submodules"`
}

func moduleFactsView(f registry.Facts) ModuleFactsView {
	out := ModuleFactsView{README: f.README, Inputs: inputViews(f.Inputs), Outputs: mapSlice(f.Outputs, outputView),
		Resources: mapSlice(f.Resources, resourceView), Submodules: []SubmoduleView{},
		Providers: mapSlice(f.Providers, func(p registry.Provider) ModuleProviderView {
			return ModuleProviderView{Name: p.Name, Source: p.Source, VersionConstraints: p.VersionConstraints}
		})}
	for _, s := range f.Submodules {
		out.Submodules = append(out.Submodules, SubmoduleView{Path: s.Path, Inputs: inputViews(s.Inputs),
			Outputs: mapSlice(s.Outputs, outputView), Resources: mapSlice(s.Resources, resourceView)})
	}
	return out
}

func inputViews(in []registry.Input) []ModuleInputView {
	return mapSlice(in, func(i registry.Input) ModuleInputView {
		var def any
		_ = json.Unmarshal(i.Default, &def)
		return ModuleInputView{Name: i.Name, Type: i.Type, Description: i.Description, Default: def,
			Required: i.Required, Sensitive: i.Sensitive}
	})
}

func outputView(o registry.Output) ModuleOutputView {
	return ModuleOutputView{Name: o.Name, Description: o.Description, Sensitive: o.Sensitive}
}

func resourceView(r registry.Resource) ModuleResourceView {
	return ModuleResourceView{Type: r.Type, Name: r.Name, Mode: r.Mode}
}

// CreateModuleRequest is the body of POST /v1/registry/modules.
type CreateModuleRequest struct {
	Name     string          `json:"name" minLength:"1" maxLength:"64" doc:"Letters, digits, '-' and '_', starting and ending with a letter or digit."`
	Provider string          `json:"provider" minLength:"1" maxLength:"64" doc:"Lowercase letters and digits (the main provider the module uses)."`
	Source   json.RawMessage `json:"source,omitempty" doc:"A code-host binding {repository_id, directory?, tag_prefix?}; refused with 422 REGISTRY_MODULE_SOURCE_UNSUPPORTED until publishing from the code host is available."`
}

type createModuleInput struct {
	IdempotencyHeader
	Body CreateModuleRequest
}

type listModulesInput struct {
	Limit    int    `query:"limit" minimum:"1" maximum:"100" default:"20" doc:"Page size, 1–100."`
	Cursor   string `query:"cursor" doc:"The next_cursor of the previous page of this same list; any other value is rejected."`
	Query    string `query:"q" maxLength:"64" doc:"Only modules whose name contains this, ignoring case."`
	Provider string `query:"provider" maxLength:"64"`
}

type listModuleVersionsInput struct {
	IDPath
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"20" doc:"Page size, 1–100."`
	Cursor string `query:"cursor" doc:"The next_cursor of the previous page of this same list; any other value is rejected."`
}

type deleteRegistryInput struct {
	IdempotencyHeader
	IDPath
}

type uploadModuleVersionInput struct {
	IdempotencyHeader
	IDPath
	Version string `query:"version" required:"true" minLength:"5" maxLength:"128" doc:"The semantic version MAJOR.MINOR.PATCH[-prerelease][+build], without a leading v."`
}

// DeprecateModuleVersionRequest is the optional body of the deprecate
// action.
type DeprecateModuleVersionRequest struct {
	Reason string `json:"reason,omitempty" maxLength:"4000" doc:"At most 1,000 characters."`
	Link   string `json:"link,omitempty" maxLength:"2048" doc:"An https URL with more information."`
}

type deprecateModuleVersionInput struct {
	IdempotencyHeader
	IDPath
	Body *DeprecateModuleVersionRequest
}

// RevokeModuleVersionRequest is the optional body of the revoke action.
type RevokeModuleVersionRequest struct {
	Reason string `json:"reason,omitempty" maxLength:"4000" doc:"At most 1,000 characters."`
}

type revokeModuleVersionInput struct {
	IdempotencyHeader
	IDPath
	Body *RevokeModuleVersionRequest
}

type moduleVersionActionInput struct {
	IdempotencyHeader
	IDPath
}

// Deleted is the output of a deletion: 204 with no body.
type Deleted struct {
	Status   int
	Replayed string `header:"Idempotent-Replayed" doc:"\"true\" when this answer is the stored answer of an earlier request with the same key."`
}

// deletion runs a deletion as an idempotent mutation and then removes the
// archives it released, once it has committed.
func (a *API) deletion(ctx context.Context, key string, del func(ctx context.Context, tx *sqlx.Tx, p access.Principal) ([]string, error)) (*Deleted, error) {
	var keys []string
	out, err := mutation(ctx, a, key, struct{}{}, http.StatusNoContent,
		func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (struct{}, error) {
			var err error
			keys, err = del(ctx, tx, p)
			return struct{}{}, err
		})
	if err != nil {
		return nil, err
	}
	a.deps.Services.Registry.DeleteArchives(ctx, keys)
	return &Deleted{Status: out.Status, Replayed: out.Replayed}, nil
}

// registryList is one page of a registry list: the registry issues its
// own cursors, in each list's own order.
func registryList[T, U any](ctx context.Context, a *API, fetch func(p access.Principal) ([]T, string, error), view func(T) U) (*Listed[U], error) {
	p, err := access.PrincipalFrom(ctx)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	rows, next, err := fetch(p)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	out := &Listed[U]{}
	out.Body.Data = make([]U, 0, len(rows))
	for _, r := range rows {
		out.Body.Data = append(out.Body.Data, view(r))
	}
	if next != "" {
		out.Body.Meta.Page.NextCursor = &next
	}
	return out, nil
}

func (a *API) registerRegistry() {
	tags := []string{"Module registry"}
	reg := func() *registry.Service { return a.deps.Services.Registry }
	register(a, huma.Operation{
		OperationID: "list-registry-modules", Method: http.MethodGet, Path: "/v1/registry/modules",
		Summary: "List the organization's private registry modules by name", Tags: tags,
		Description: "Needs registry:read (every role has it). Invalid cursors are 400 REGISTRY_LIST_CURSOR_INVALID.",
	}, operationOptions{}, func(ctx context.Context, in *listModulesInput) (*Listed[ModuleView], error) {
		return registryList(ctx, a, func(p access.Principal) ([]registry.Module, string, error) {
			return reg().ListModules(ctx, p, registry.ListModulesQuery{Query: in.Query, Provider: in.Provider,
				RegistryName: registry.RegistryPrivate, Cursor: in.Cursor, Limit: in.Limit})
		}, a.moduleView)
	})

	register(a, huma.Operation{
		OperationID: "create-registry-module", Method: http.MethodPost, Path: "/v1/registry/modules",
		Summary: "Create a private registry module", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Needs registry:write. The namespace is the organization's name; a module is unique by name and provider " +
			"(409 REGISTRY_MODULE_EXISTS).",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *createModuleInput) (*Mutated[ModuleView], error) {
		if len(in.Body.Source) > 0 && string(in.Body.Source) != "null" {
			return nil, a.fail(ctx, registry.ErrSourceUnsupported)
		}
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (ModuleView, error) {
				m, err := reg().CreateModuleTx(ctx, tx, p, registry.CreateModuleInput{Name: in.Body.Name, Provider: in.Body.Provider})
				return a.moduleView(m), err
			})
	})

	register(a, huma.Operation{
		OperationID: "get-registry-module", Method: http.MethodGet, Path: "/v1/registry/modules/{id}",
		Summary: "Read a registry module", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[ModuleView], error) {
		return single(ctx, a, func(p access.Principal) (ModuleView, error) {
			m, err := reg().Module(ctx, p, in.ID)
			return a.moduleView(m), err
		})
	})

	register(a, huma.Operation{
		OperationID: "delete-registry-module", Method: http.MethodDelete, Path: "/v1/registry/modules/{id}",
		Summary: "Delete a registry module with all its versions", Tags: tags, DefaultStatus: http.StatusNoContent,
		Description: "Needs registry:write. Configurations that use the module stop resolving it.",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *deleteRegistryInput) (*Deleted, error) {
		return a.deletion(ctx, in.IdempotencyKey, func(ctx context.Context, tx *sqlx.Tx, p access.Principal) ([]string, error) {
			return reg().DeleteModuleTx(ctx, tx, p, in.ID)
		})
	})

	register(a, huma.Operation{
		OperationID: "list-registry-module-versions", Method: http.MethodGet, Path: "/v1/registry/modules/{id}/versions",
		Summary: "List a module's versions, newest (semver) first", Tags: tags,
		Description: "Every version, pending, errored, deprecated and revoked ones included.",
	}, operationOptions{}, func(ctx context.Context, in *listModuleVersionsInput) (*Listed[ModuleVersionView], error) {
		return registryList(ctx, a, func(p access.Principal) ([]registry.Version, string, error) {
			return reg().ListVersions(ctx, p, in.ID, registry.ListVersionsQuery{Cursor: in.Cursor, Limit: in.Limit})
		}, moduleVersionView)
	})

	register(a, huma.Operation{
		OperationID: "upload-registry-module-version", Method: http.MethodPost, Path: "/v1/registry/modules/{id}/versions",
		Summary: "Publish a module version from a .tar.gz archive", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Needs registry:write. The body is the module's .tar.gz (Content-Type: application/gzip), at most 100,000,000 bytes " +
			"(a larger declared length is 413 before anything is stored), streamed into sealed storage while it is validated like a " +
			"configuration archive. The answer is the new version: ok, or errored with the code of the rule the archive broke " +
			"(archive_*, or module_no_configuration when its root has no .tf or .tofu file). A version string the module has is " +
			"409 REGISTRY_MODULE_VERSION_EXISTS: published versions are immutable.",
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
			"application/gzip": {Schema: &huma.Schema{Type: "string", Format: "binary"}},
		}},
	}, operationOptions{mutation: true, admit: admitOrganization, bodyLimit: registry.MaxArchiveBytes},
		func(ctx context.Context, in *uploadModuleVersionInput) (*Mutated[ModuleVersionView], error) {
			return a.uploadModuleVersion(ctx, in)
		})

	register(a, huma.Operation{
		OperationID: "get-registry-module-version", Method: http.MethodGet, Path: "/v1/registry/module-versions/{id}",
		Summary: "Read a module version", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[ModuleVersionView], error) {
		return single(ctx, a, func(p access.Principal) (ModuleVersionView, error) {
			v, err := reg().Version(ctx, p, in.ID)
			return moduleVersionView(v), err
		})
	})

	register(a, huma.Operation{
		OperationID: "get-registry-module-version-facts", Method: http.MethodGet, Path: "/v1/registry/module-versions/{id}/facts",
		Summary: "Read what a published version's archive says: README, inputs, outputs, resources, providers, submodules", Tags: tags,
		Description: "Read from the archive with terraform-config-inspect when the version was published. A version that is not ok has none (404).",
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[ModuleFactsView], error) {
		return single(ctx, a, func(p access.Principal) (ModuleFactsView, error) {
			f, err := reg().Facts(ctx, p, in.ID)
			return moduleFactsView(f), err
		})
	})

	versionAction := func(id, path, summary, description string, op func(ctx context.Context, tx *sqlx.Tx, p access.Principal, versionID string) (registry.Version, error)) {
		register(a, huma.Operation{
			OperationID: id, Method: http.MethodPost, Path: "/v1/registry/module-versions/{id}/actions/" + path,
			Summary: summary, Tags: tags, Description: "Needs registry:write. " + description,
		}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *moduleVersionActionInput) (*Mutated[ModuleVersionView], error) {
			return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
				func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (ModuleVersionView, error) {
					v, err := op(ctx, tx, p, in.ID)
					return moduleVersionView(v), err
				})
		})
	}

	register(a, huma.Operation{
		OperationID: "deprecate-registry-module-version", Method: http.MethodPost, Path: "/v1/registry/module-versions/{id}/actions/deprecate",
		Summary: "Deprecate a published module version", Tags: tags,
		Description: "Needs registry:write. A deprecated version still resolves, and runs that resolve it log a warning. Deprecating " +
			"again replaces the reason and link. A revoked version is 409 REGISTRY_MODULE_VERSION_REVOKED.",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *deprecateModuleVersionInput) (*Mutated[ModuleVersionView], error) {
		body := DeprecateModuleVersionRequest{}
		if in.Body != nil {
			body = *in.Body
		}
		return mutation(ctx, a, in.IdempotencyKey, body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (ModuleVersionView, error) {
				v, err := reg().DeprecateTx(ctx, tx, p, in.ID, body.Reason, body.Link)
				return moduleVersionView(v), err
			})
	})
	versionAction("restore-registry-module-version", "restore", "Clear a module version's deprecation",
		"A revoked version is un-revoked first (409 REGISTRY_MODULE_VERSION_REVOKED).", reg().RestoreTx)

	register(a, huma.Operation{
		OperationID: "revoke-registry-module-version", Method: http.MethodPost, Path: "/v1/registry/module-versions/{id}/actions/revoke",
		Summary: "Revoke a deprecated module version", Tags: tags,
		Description: "Needs registry:write. A revoked version never resolves again; runs that already used it keep their evidence. " +
			"Only a deprecated version is revoked (409 REGISTRY_MODULE_VERSION_NOT_DEPRECATED).",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *revokeModuleVersionInput) (*Mutated[ModuleVersionView], error) {
		body := RevokeModuleVersionRequest{}
		if in.Body != nil {
			body = *in.Body
		}
		return mutation(ctx, a, in.IdempotencyKey, body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (ModuleVersionView, error) {
				v, err := reg().RevokeTx(ctx, tx, p, in.ID, body.Reason)
				return moduleVersionView(v), err
			})
	})
	versionAction("unrevoke-registry-module-version", "unrevoke", "Un-revoke a module version",
		"It returns to deprecated: resolvable, with a warning.", reg().UnrevokeTx)

	register(a, huma.Operation{
		OperationID: "delete-registry-module-version", Method: http.MethodDelete, Path: "/v1/registry/module-versions/{id}",
		Summary: "Delete a module version and its archive", Tags: tags, DefaultStatus: http.StatusNoContent,
		Description: "Needs registry:write.",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *deleteRegistryInput) (*Deleted, error) {
		return a.deletion(ctx, in.IdempotencyKey, func(ctx context.Context, tx *sqlx.Tx, p access.Principal) ([]string, error) {
			return reg().DeleteVersionTx(ctx, tx, p, in.ID)
		})
	})
}

// uploadModuleVersion stages the archive (stored and checked, no row
// yet), then creates the version with its verdict, the idempotency record
// and the audit events in one transaction.
func (a *API) uploadModuleVersion(ctx context.Context, in *uploadModuleVersionInput) (*Mutated[ModuleVersionView], error) {
	p, err := access.PrincipalFrom(ctx)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	reg := a.deps.Services.Registry
	if _, err := registry.ParseSemver(in.Version); err != nil {
		return nil, a.fail(ctx, err)
	}
	body, _ := ctx.Value(bodyStreamKey{}).(io.Reader)
	if body == nil {
		body = http.NoBody
	}
	staged, err := reg.StageUpload(ctx, p, in.ID, body)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	input := map[string]any{"module_id": in.ID, "version": in.Version, "sha256": staged.SHA256()}
	out, err := mutation(ctx, a, in.IdempotencyKey, input, http.StatusCreated,
		func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (ModuleVersionView, error) {
			v, err := reg.PublishStagedTx(ctx, tx, p, in.ID, in.Version, staged)
			return moduleVersionView(v), err
		})
	if err != nil || out.Replayed == "true" || out.Body.Data.Status != registry.VersionOK {
		reg.DiscardStaged(ctx, staged)
	}
	return out, err
}
