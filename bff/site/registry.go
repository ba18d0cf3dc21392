package site

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/bff/apiclient"
)

// The dashboard's module registry: the organization's private modules, a
// module's versions with their README and facts, and what writers do with
// them. Every page reads /v1/registry/...; the API decides every action
// again, so a control the page hides is also refused upstream.

// registryModule is a module as /v1 reads it.
type registryModule struct {
	ID            string          `json:"id"`
	RegistryName  string          `json:"registry_name"`
	Namespace     string          `json:"namespace"`
	Name          string          `json:"name"`
	Provider      string          `json:"provider"`
	Status        string          `json:"status"`
	Source        *registrySource `json:"source"`
	VersionCount  int             `json:"version_count"`
	LatestVersion *string         `json:"latest_version"`
	SourceAddress string          `json:"source_address"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
}

// registrySource is a module's code-host binding.
type registrySource struct {
	RepositoryID int64  `json:"repository_id"`
	Owner        string `json:"owner"`
	Repository   string `json:"repository"`
	Directory    string `json:"directory"`
	TagPrefix    string `json:"tag_prefix"`
}

// moduleVersion is one version of a module.
type moduleVersion struct {
	ID       string `json:"id"`
	ModuleID string `json:"module_id"`
	Version  string `json:"version"`
	Status   string `json:"status"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Deprecation *struct {
		Reason string    `json:"reason"`
		Link   string    `json:"link"`
		At     time.Time `json:"at"`
	} `json:"deprecation"`
	Revocation *struct {
		Reason string    `json:"reason"`
		At     time.Time `json:"at"`
	} `json:"revocation"`
	ArchiveSHA256 string     `json:"archive_sha256"`
	ArchiveBytes  int64      `json:"archive_bytes"`
	Origin        string     `json:"origin"`
	Tag           string     `json:"tag"`
	CommitSHA     string     `json:"commit_sha"`
	CreatedAt     time.Time  `json:"created_at"`
	PublishedAt   *time.Time `json:"published_at"`
}

// Published reports whether the version is ok, the only status with facts.
func (v moduleVersion) Published() bool { return v.Status == "ok" }

// Prerelease reports whether the version has a prerelease part, which a
// version constraint other than an exact pin never selects.
func (v moduleVersion) Prerelease() bool {
	core, _, _ := strings.Cut(v.Version, "+")
	return strings.Contains(core, "-")
}

// Actions are the version actions a writer is offered, in the HCP rules:
// deprecate a published version, restore or revoke a deprecated one,
// un-revoke a revoked one.
func (v moduleVersion) Actions() []string {
	switch {
	case v.Revocation != nil:
		return []string{"unrevoke"}
	case v.Deprecation != nil:
		return []string{"restore", "revoke"}
	case v.Published():
		return []string{"deprecate"}
	}
	return nil
}

// moduleFacts is what the API read from a version's archive.
type moduleFacts struct {
	Readme     string           `json:"readme"`
	Inputs     []moduleInput    `json:"inputs"`
	Outputs    []moduleOutput   `json:"outputs"`
	Resources  []moduleResource `json:"resources"`
	Providers  []moduleProvider `json:"providers"`
	Submodules []submodule      `json:"submodules"`
}

type moduleInput struct {
	Name        string          `json:"name"`
	Type        string          `json:"type"`
	Description string          `json:"description"`
	Default     json.RawMessage `json:"default"`
	Required    bool            `json:"required"`
	Sensitive   bool            `json:"sensitive"`
}

// DefaultShown is the default value as HCL-like JSON, "" when there is none.
func (i moduleInput) DefaultShown() string {
	if i.Required || len(i.Default) == 0 || string(i.Default) == "null" {
		return ""
	}
	return string(i.Default)
}

type moduleOutput struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Sensitive   bool   `json:"sensitive"`
}

type moduleResource struct {
	Type string `json:"type"`
	Name string `json:"name"`
	Mode string `json:"mode"`
}

type moduleProvider struct {
	Name               string   `json:"name"`
	Source             string   `json:"source"`
	VersionConstraints []string `json:"version_constraints"`
}

type submodule struct {
	Path      string           `json:"path"`
	Inputs    []moduleInput    `json:"inputs"`
	Outputs   []moduleOutput   `json:"outputs"`
	Resources []moduleResource `json:"resources"`
}

// factsView is one module's facts as a page section: the root module's
// (ID "") or a submodule's, whose ID keeps its tables' element IDs apart.
type factsView struct {
	ID        string
	Path      string
	Inputs    []moduleInput
	Outputs   []moduleOutput
	Resources []moduleResource
}

// Root is the root module's facts.
func (f moduleFacts) Root() factsView {
	return factsView{Inputs: f.Inputs, Outputs: f.Outputs, Resources: f.Resources}
}

// SubmoduleViews are the submodules' facts, in the API's order.
func (f moduleFacts) SubmoduleViews() []factsView {
	views := make([]factsView, 0, len(f.Submodules))
	for i, m := range f.Submodules {
		views = append(views, factsView{ID: "-sub-" + strconv.Itoa(i), Path: m.Path, Inputs: m.Inputs, Outputs: m.Outputs, Resources: m.Resources})
	}
	return views
}

// registryRefusal explains a refused registry change without the API's text.
func registryRefusal(err error) string {
	switch apiclient.CodeOf(err) {
	case "REGISTRY_MODULE_EXISTS":
		return "The organization already has a module with that name and provider."
	case "REGISTRY_MODULE_VERSION_EXISTS":
		return "The module already has that version: published versions never change, so publish a new version number."
	case "REGISTRY_MODULE_NOT_BOUND":
		return "The module is not bound to a repository: bind it before syncing."
	case "REGISTRY_MODULE_SOURCE_UNAVAILABLE":
		return "The repository cannot be reached through the organization's code-host app right now."
	case "REGISTRY_MODULE_VERSION_REVOKED":
		return "That version is revoked: lift the revocation first."
	case "REGISTRY_MODULE_VERSION_NOT_DEPRECATED":
		return "Only a deprecated version can be revoked: deprecate it first."
	}
	switch apiclient.StatusOf(err) {
	case http.StatusConflict:
		return "That conflicts with what exists: the module or version is there already, or the version's state does not allow it."
	case http.StatusUnprocessableEntity, http.StatusBadRequest:
		return "Check what you entered: the API refused it as invalid."
	case http.StatusNotFound:
		return "That module or version no longer exists, or you cannot see it."
	case http.StatusRequestEntityTooLarge:
		return "That archive is over the 100 MB limit."
	}
	return refusal(err)
}

// registryPage is the module list with its filters and the publish form.
type registryPage struct {
	Modules  []registryModule
	Query    string
	Provider string
	MoreURL  string
	Error    string
	Notice   string
	CanWrite bool
	// Repositories are the code host's repositories a module may be bound
	// to; nil when the organization has none or they could not be read.
	Repositories []sourceRepository
}

func (s *Site) registry(w http.ResponseWriter, r *http.Request, token string) {
	page := registryPage{}
	if r.URL.Query().Get("done") == "deleted" {
		page.Notice = "Module deleted, with every version."
	}
	s.renderRegistry(w, r, token, http.StatusOK, page)
}

func (s *Site) renderRegistry(w http.ResponseWriter, r *http.Request, token string, status int, page registryPage) {
	f := s.frame(r, "Registry")
	ctx := r.Context()
	q := r.URL.Query()
	page.Query, page.Provider = strings.TrimSpace(q.Get("q")), strings.TrimSpace(q.Get("provider"))
	filter := url.Values{}
	if page.Query != "" {
		filter.Set("q", page.Query)
	}
	if page.Provider != "" {
		filter.Set("provider", page.Provider)
	}
	path := url.Values{"limit": {"50"}}
	for k, v := range filter {
		path[k] = v
	}
	if cur := q.Get("cursor"); cur != "" {
		path.Set("cursor", cur)
	}
	list, err := apiclient.List[registryModule](ctx, s.api, token, "/v1/registry/modules?"+path.Encode())
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Modules = list.Data
	if list.NextCursor != "" {
		filter.Set("cursor", list.NextCursor)
		page.MoreURL = "/registry?" + filter.Encode()
	}
	c, err := s.effectiveCaller(ctx, token, f, "")
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.CanWrite = c.Can(string(access.PermRegistryWrite))
	if page.CanWrite {
		// The binding is optional: without the repositories the form
		// still publishes by upload.
		_ = s.api.Call(ctx, token, http.MethodGet, "/v1/github/repositories", nil, &page.Repositories)
	}
	f.Page = page
	s.render(w, r, status, "registry.html", f)
}

func modulePath(id string) string { return "/registry/modules/" + url.PathEscape(id) }

// modulePage is one module: its versions, the selected version's README
// and facts, the usage snippet and the writer's actions.
type modulePage struct {
	Module   registryModule
	Versions []moduleVersion
	MoreURL  string
	// Selected is the version shown, nil when the module has none.
	Selected *moduleVersion
	Facts    *moduleFacts
	Readme   template.HTML
	// FactsProblem is set when the selected version's facts could not be
	// read: the page says so rather than showing empty tables.
	FactsProblem *apiclient.Error
	Notice       string
	Error        string
	CanWrite     bool
	// ConfirmDelete asks for the second, explicit confirmation.
	ConfirmDelete bool
}

// Usage is the configuration that calls the selected version.
func (p modulePage) Usage() string {
	if p.Selected == nil {
		return ""
	}
	return "module \"" + p.Module.Name + "\" {\n  source  = \"" + p.Module.SourceAddress + "\"\n  version = \"" + p.Selected.Version + "\"\n}\n"
}

// moduleNotices are the notices a module action redirects back with.
var moduleNotices = map[string]string{
	"created":    "Module created. Publish its first version by uploading a .tar.gz of the module's files.",
	"uploaded":   "Version uploaded.",
	"errored":    "The version was created but its archive was refused: the reason is below.",
	"deprecated": "Version deprecated. It still resolves; runs that use it log a warning with the reason.",
	"restored":   "Deprecation removed.",
	"revoked":    "Version revoked. It no longer resolves for new runs.",
	"unrevoked":  "Revocation lifted: the version is deprecated again.",
}

func (s *Site) modulePage(w http.ResponseWriter, r *http.Request, token string) {
	q := r.URL.Query()
	page := modulePage{Notice: moduleNotices[q.Get("done")]}
	if q.Get("done") == "synced" {
		page.Notice = "Sync started: " + strconv.Itoa(atoiOr(q.Get("published"))) + " version(s) publishing, " +
			strconv.Itoa(atoiOr(q.Get("skipped"))) + " tag(s) already published. Each new version ends ok or errored in the list below."
	}
	s.renderModule(w, r, token, r.PathValue("moduleId"), http.StatusOK, page)
}

func atoiOr(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func (s *Site) renderModule(w http.ResponseWriter, r *http.Request, token, moduleID string, status int, page modulePage) {
	f := s.frame(r, "Module")
	ctx := r.Context()
	id := url.PathEscape(moduleID)
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/registry/modules/"+id, nil, &page.Module); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	f.Title = page.Module.Namespace + "/" + page.Module.Name + "/" + page.Module.Provider
	q := r.URL.Query()
	path := "/v1/registry/modules/" + id + "/versions?limit=100"
	if cur := q.Get("versions_cursor"); cur != "" {
		path += "&cursor=" + url.QueryEscape(cur)
	}
	versions, err := apiclient.List[moduleVersion](ctx, s.api, token, path)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Versions = versions.Data
	if versions.NextCursor != "" {
		page.MoreURL = modulePath(moduleID) + "?versions_cursor=" + url.QueryEscape(versions.NextCursor)
	}
	if err := s.selectVersion(ctx, token, moduleID, q.Get("version"), &page); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	c, err := s.effectiveCaller(ctx, token, f, "")
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.CanWrite = c.Can(string(access.PermRegistryWrite))
	f.Page = page
	s.render(w, r, status, "registry-module.html", f)
}

// selectVersion picks the version the page shows: the one asked for by ID
// (read on its own, as it may be beyond the first page of versions), else
// the newest published, unrevoked release (what a constraint like "~> 1.0"
// would pick), else the newest published and unrevoked one, else the
// newest. It reads the version's facts when it is published.
func (s *Site) selectVersion(ctx context.Context, token, moduleID, asked string, page *modulePage) error {
	if asked != "" {
		var v moduleVersion
		if err := s.api.Call(ctx, token, http.MethodGet, "/v1/registry/module-versions/"+url.PathEscape(asked), nil, &v); err != nil {
			return err
		}
		if v.ModuleID != moduleID {
			// Another module's version is shown as a missing one.
			return &apiclient.Error{Status: http.StatusNotFound, Code: "NOT_FOUND"}
		}
		page.Selected = &v
	} else {
		page.Selected = defaultVersion(page.Versions)
	}
	if page.Selected == nil || !page.Selected.Published() {
		return nil
	}
	var facts moduleFacts
	err := s.api.Call(ctx, token, http.MethodGet, "/v1/registry/module-versions/"+url.PathEscape(page.Selected.ID)+"/facts", nil, &facts)
	var apiErr *apiclient.Error
	switch {
	case err == nil:
		page.Facts, page.Readme = &facts, renderReadme(facts.Readme)
	case errors.As(err, &apiErr) && apiErr.Status != http.StatusUnauthorized:
		page.FactsProblem = apiErr
	default:
		return err
	}
	return nil
}

// defaultVersion is the version a module page shows unless asked for
// another (selectVersion); nil when there are none. versions are newest
// first.
func defaultVersion(versions []moduleVersion) *moduleVersion {
	resolvable := func(v moduleVersion) bool { return v.Published() && v.Revocation == nil }
	for _, wanted := range []func(moduleVersion) bool{
		func(v moduleVersion) bool { return resolvable(v) && !v.Prerelease() },
		resolvable,
		func(moduleVersion) bool { return true },
	} {
		for i := range versions {
			if wanted(versions[i]) {
				return &versions[i]
			}
		}
	}
	return nil
}

// versionAction runs a version action from the module page and redirects
// back to the version with done, or renders the page with the refusal.
func (s *Site) versionAction(action, done string) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, token string) {
		moduleID, versionID := r.PathValue("moduleId"), r.PathValue("versionId")
		var body map[string]string
		switch action {
		case "deprecate":
			body = map[string]string{"reason": strings.TrimSpace(r.PostFormValue("reason"))}
			if link := strings.TrimSpace(r.PostFormValue("link")); link != "" {
				body["link"] = link
			}
		case "revoke":
			body = map[string]string{"reason": strings.TrimSpace(r.PostFormValue("reason"))}
		}
		// The version must belong to the module the form was on, so a
		// redirect never shows one module's page for another's version.
		var v moduleVersion
		err := s.api.Call(r.Context(), token, http.MethodGet, "/v1/registry/module-versions/"+url.PathEscape(versionID), nil, &v)
		if err == nil && v.ModuleID != moduleID {
			err = &apiclient.Error{Status: http.StatusNotFound, Code: "NOT_FOUND"}
		}
		if err == nil {
			var payload any
			if body != nil {
				payload = body
			}
			err = s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/registry/module-versions/"+url.PathEscape(versionID)+"/actions/"+action,
				newKey(), payload, nil)
		}
		if err != nil {
			s.renderModule(w, r, token, moduleID, refusedStatus(err), modulePage{Error: registryRefusal(err)})
			return
		}
		http.Redirect(w, r, modulePath(moduleID)+"?done="+done+"&version="+url.QueryEscape(versionID), http.StatusSeeOther)
	}
}

// syncModule starts publishing the versions of every matching tag the
// bound repository has and the module lacks.
func (s *Site) syncModule(w http.ResponseWriter, r *http.Request, token string) {
	moduleID := r.PathValue("moduleId")
	var result struct {
		Published []json.RawMessage `json:"published"`
		Skipped   []json.RawMessage `json:"skipped"`
	}
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/registry/modules/"+url.PathEscape(moduleID)+"/actions/sync", newKey(), nil, &result)
	if err != nil {
		s.renderModule(w, r, token, moduleID, refusedStatus(err), modulePage{Error: registryRefusal(err)})
		return
	}
	http.Redirect(w, r, modulePath(moduleID)+"?done=synced&published="+strconv.Itoa(len(result.Published))+
		"&skipped="+strconv.Itoa(len(result.Skipped)), http.StatusSeeOther)
}

// deleteModule needs a second, explicit confirmation.
func (s *Site) deleteModule(w http.ResponseWriter, r *http.Request, token string) {
	moduleID := r.PathValue("moduleId")
	if r.PostFormValue("confirm") != "yes" {
		s.renderModule(w, r, token, moduleID, http.StatusOK, modulePage{ConfirmDelete: true})
		return
	}
	if err := s.api.Mutate(r.Context(), token, http.MethodDelete, "/v1/registry/modules/"+url.PathEscape(moduleID), newKey(), nil, nil); err != nil {
		s.renderModule(w, r, token, moduleID, refusedStatus(err), modulePage{Error: registryRefusal(err)})
		return
	}
	http.Redirect(w, r, "/registry?done=deleted", http.StatusSeeOther)
}

// uploadModuleVersion streams an archive to the API as a new version of
// the module; the API answers with it published or errored.
func (s *Site) uploadModuleVersion(ctx context.Context, token, moduleID, version string, archive io.Reader) (moduleVersion, error) {
	var v moduleVersion
	resp, err := s.api.Stream(ctx, token, http.MethodPost, "/v1/registry/modules/"+url.PathEscape(moduleID)+"/versions?version="+url.QueryEscape(version),
		"application/gzip", archive, "Idempotency-Key", newKey(), "Accept", "application/json")
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	var env struct {
		Data moduleVersion `json:"data"`
	}
	if err := decodeBounded(resp.Body, &env); err != nil || env.Data.ID == "" {
		return v, &apiclient.Error{Status: http.StatusBadGateway, Code: "UPSTREAM_RESPONSE_INVALID"}
	}
	return env.Data, nil
}

// publishModule creates a module from the publish form, bound to a
// repository when one was chosen, and publishes the uploaded archive as
// its first version.
func (s *Site) publishModule(w http.ResponseWriter, r *http.Request, token string) {
	var created registryModule
	var uploaded moduleVersion
	create := func(fields map[string]string) error {
		body := map[string]any{"name": strings.TrimSpace(fields["name"]), "provider": strings.TrimSpace(fields["provider"])}
		if repo := strings.TrimSpace(fields["repository_id"]); repo != "" {
			id, err := strconv.ParseInt(repo, 10, 64)
			if err != nil {
				return &apiclient.Error{Status: http.StatusUnprocessableEntity, Code: "VALIDATION_FAILED"}
			}
			source := map[string]any{"repository_id": id}
			if dir := strings.TrimSpace(fields["directory"]); dir != "" {
				source["directory"] = dir
			}
			if prefix := strings.TrimSpace(fields["tag_prefix"]); prefix != "" {
				source["tag_prefix"] = prefix
			}
			body["source"] = source
		}
		return s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/registry/modules", newKey(), body, &created)
	}
	fields, err := s.streamForm(r, "archive", func(fields map[string]string, archive io.Reader) error {
		if err := create(fields); err != nil {
			return err
		}
		version := strings.TrimSpace(fields["version"])
		if version == "" {
			return errNoVersion
		}
		v, err := s.uploadModuleVersion(r.Context(), token, created.ID, version, archive)
		uploaded = v
		return err
	})
	if answerForm(w, err) {
		return
	}
	if err == nil && created.ID == "" {
		err = create(fields)
	}
	switch {
	case err != nil && created.ID == "":
		s.renderRegistry(w, r, token, refusedStatus(err), registryPage{Error: uploadMessage(err)})
	case err != nil:
		// The module exists; the page says why its version does not.
		s.renderModule(w, r, token, created.ID, refusedStatus(err), modulePage{Notice: moduleNotices["created"], Error: uploadMessage(err)})
	case uploaded.ID != "":
		http.Redirect(w, r, uploadedPath(created.ID, uploaded), http.StatusSeeOther)
	default:
		http.Redirect(w, r, modulePath(created.ID)+"?done=created", http.StatusSeeOther)
	}
}

// uploadedPath is the module page showing a version just uploaded, with
// the notice its outcome calls for.
func uploadedPath(moduleID string, v moduleVersion) string {
	done := "uploaded"
	if v.Status == "errored" {
		done = "errored"
	}
	return modulePath(moduleID) + "?done=" + done + "&version=" + url.QueryEscape(v.ID)
}

// errNoVersion is an archive uploaded without the version to publish it as.
var errNoVersion = errors.New("no version given")

// uploadMessage explains a refused version upload.
func uploadMessage(err error) string {
	switch {
	case errors.Is(err, errNoVersion):
		return "Give the version to publish the archive as, e.g. 1.2.0."
	case errors.Is(err, errFormBroken):
		return "The form did not arrive whole; try again."
	}
	return registryRefusal(err)
}

// uploadVersion publishes an uploaded archive as a new version.
func (s *Site) uploadVersion(w http.ResponseWriter, r *http.Request, token string) {
	moduleID := r.PathValue("moduleId")
	var uploaded moduleVersion
	_, err := s.streamForm(r, "archive", func(fields map[string]string, archive io.Reader) error {
		version := strings.TrimSpace(fields["version"])
		if version == "" {
			return errNoVersion
		}
		v, err := s.uploadModuleVersion(r.Context(), token, moduleID, version, archive)
		uploaded = v
		return err
	})
	if answerForm(w, err) {
		return
	}
	if err == nil && uploaded.ID == "" {
		s.renderModule(w, r, token, moduleID, http.StatusOK, modulePage{Error: "Choose the .tar.gz archive to publish."})
		return
	}
	if err != nil {
		s.renderModule(w, r, token, moduleID, refusedStatus(err), modulePage{Error: uploadMessage(err)})
		return
	}
	http.Redirect(w, r, uploadedPath(moduleID, uploaded), http.StatusSeeOther)
}

// routeRegistry adds the registry pages and actions. The upload forms are
// multipart: streamForm checks origin and CSRF itself.
func (s *Site) routeRegistry(mux *http.ServeMux) {
	org := func(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
		return s.signedIn(s.admitted(scopeOrganization, h))
	}
	mux.HandleFunc("GET /registry", org(s.registry))
	mux.HandleFunc("POST /registry/modules", org(s.publishModule))
	mux.HandleFunc("GET /registry/modules/{moduleId}", org(s.modulePage))
	mux.HandleFunc("POST /registry/modules/{moduleId}/versions", org(s.uploadVersion))
	mux.HandleFunc("POST /registry/modules/{moduleId}/sync", s.form(org(s.syncModule)))
	mux.HandleFunc("POST /registry/modules/{moduleId}/delete", s.form(org(s.deleteModule)))
	for action, done := range map[string]string{"deprecate": "deprecated", "restore": "restored", "revoke": "revoked", "unrevoke": "unrevoked"} {
		mux.HandleFunc("POST /registry/modules/{moduleId}/versions/{versionId}/"+action, s.form(org(s.versionAction(action, done))))
	}
}
