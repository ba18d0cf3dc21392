package site

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/bff/apiclient"
)

// installationStatus is the organization's code-host app installation.
type installationStatus struct {
	Status         string     `json:"status"`
	InstallationID *int64     `json:"installation_id"`
	AccountLogin   *string    `json:"account_login"`
	ConnectedAt    *time.Time `json:"connected_at"`
}

type sourceRepository struct {
	RepositoryID int64  `json:"repository_id"`
	Owner        string `json:"owner"`
	Name         string `json:"name"`
}

// sourceVersion is one immutable source settings version.
type sourceVersion struct {
	ID                             string    `json:"id"`
	Version                        int       `json:"version"`
	RepositoryID                   int64     `json:"repository_id"`
	RepositoryOwner                string    `json:"repository_owner"`
	RepositoryName                 string    `json:"repository_name"`
	TrackedBranch                  string    `json:"tracked_branch"`
	WorkingDirectory               string    `json:"working_directory"`
	TriggerPaths                   []string  `json:"trigger_paths"`
	SpeculativeCredentialVersionID *string   `json:"speculative_credential_version_id"`
	ForkPullRequests               string    `json:"fork_pull_requests"`
	CreatedBy                      string    `json:"created_by"`
	CreatedAt                      time.Time `json:"created_at"`
}

type workspaceSource struct {
	Current *sourceVersion  `json:"current"`
	History []sourceVersion `json:"history"`
}

// speculativeChoice is a credential version a pull-request plan may use.
type speculativeChoice struct {
	ID    string
	Label string
}

type sourcePage struct {
	Workspace struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	// Installation is nil when its status could not be read.
	Installation *installationStatus
	Repositories []sourceRepository
	Source       workspaceSource
	Speculative  []speculativeChoice
	// Unselectable is the current speculative credential version when it
	// is no longer selectable (revoked, archived, unverified): shown by its
	// exact ID, never silently dropped.
	Unselectable string
	// Loaded says every inventory the form needs was read; until then its
	// controls stay disabled.
	Loaded bool
	// SourceLoaded says the current version and history were read.
	SourceLoaded bool
	// Unavailable names the inventories that failed to load.
	Unavailable []string
	CanSave     bool
	CanInstall  bool
	Notice      string
	// Form is what the form shows: the current version, or what was just
	// refused.
	Form sourceForm
}

type sourceForm struct {
	RepositoryID     int64
	TrackedBranch    string
	WorkingDirectory string
	TriggerPaths     string
	SpeculativeID    string
	// ForkPullRequests is "hold" (the default) or "plan".
	ForkPullRequests string
}

func sourcePath(workspaceID string) string {
	return "/workspaces/" + url.PathEscape(workspaceID) + "/settings/source"
}

// sourceNotices are what an action redirects back with; the query only
// picks one, so the page never repeats request input.
var sourceNotices = map[string]string{
	"saved": "Source settings saved as a new version: pushes and pull requests from now on use it.",
}

func (s *Site) sourceSettings(w http.ResponseWriter, r *http.Request, token string) {
	s.renderSource(w, r, token, sourceNotices[r.URL.Query().Get("done")], nil)
}

// renderSource shows the workspace's source settings: the installation,
// the current version and its history, and the form for a new version.
// The form's controls are enabled only when the repository, current-source
// and credential-profile inventories all loaded and the caller holds
// workspace:admin; a failed read shows as unavailable, never as empty.
func (s *Site) renderSource(w http.ResponseWriter, r *http.Request, token, notice string, refused *sourceForm) {
	id := r.PathValue("id")
	f := s.frame(r, "Source")
	ctx := r.Context()
	esc := url.PathEscape(id)
	page := sourcePage{Notice: notice}
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/workspaces/"+esc, nil, &page.Workspace); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	perms := s.permissions(r, token)
	page.CanSave, page.CanInstall = perms.Has(access.PermWorkspaceAdmin), perms.Has(access.PermVCSInstall)

	var inst installationStatus
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/github/installation", nil, &inst); err == nil {
		page.Installation = &inst
	} else {
		page.Unavailable = append(page.Unavailable, "installation status")
	}
	repos := s.api.Call(ctx, token, http.MethodGet, "/v1/github/repositories", nil, &page.Repositories)
	if repos != nil {
		page.Unavailable = append(page.Unavailable, "repositories")
	}
	current := s.api.Call(ctx, token, http.MethodGet, "/v1/workspaces/"+esc+"/source", nil, &page.Source)
	if current != nil {
		page.Unavailable = append(page.Unavailable, "current source")
	}
	choices, profiles := s.speculativeChoices(r, token, esc)
	if profiles != nil {
		page.Unavailable = append(page.Unavailable, "credential profiles")
	}
	page.Speculative = choices
	page.SourceLoaded = current == nil
	page.Loaded = repos == nil && current == nil && profiles == nil

	if c := page.Source.Current; c != nil {
		page.Form = sourceForm{RepositoryID: c.RepositoryID, TrackedBranch: c.TrackedBranch, WorkingDirectory: c.WorkingDirectory,
			TriggerPaths: strings.Join(c.TriggerPaths, "\n"), ForkPullRequests: c.ForkPullRequests}
		if c.SpeculativeCredentialVersionID != nil {
			page.Form.SpeculativeID = *c.SpeculativeCredentialVersionID
		}
	}
	if refused != nil {
		page.Form = *refused
	}
	if sel := page.Form.SpeculativeID; sel != "" && page.Loaded &&
		!slices.ContainsFunc(page.Speculative, func(c speculativeChoice) bool { return c.ID == sel }) {
		page.Unselectable = sel
	}
	f.Title, f.Page = "Source · "+page.Workspace.Name, page
	s.render(w, r, http.StatusOK, "source.html", f)
}

// speculativeChoices lists the workspace's credential versions a
// same-repository pull request may plan with: verified, enabled
// speculative_plan versions of cloud federation profiles that are not
// archived.
func (s *Site) speculativeChoices(r *http.Request, token, workspaceEsc string) ([]speculativeChoice, error) {
	ctx := r.Context()
	profiles, err := apiclient.List[credentialProfile](ctx, s.api, token, "/v1/workspaces/"+workspaceEsc+"/credential-profiles?limit=100")
	if err != nil {
		return nil, err
	}
	var out []speculativeChoice
	for _, p := range profiles.Data {
		if p.Provider == "generic_secret" || p.State == "archived" {
			continue
		}
		versions, err := apiclient.List[credentialVersion](ctx, s.api, token, "/v1/credential-profiles/"+url.PathEscape(p.ID)+"/versions?limit=100")
		if err != nil {
			return nil, err
		}
		for _, v := range versions.Data {
			if v.Phase == "speculative_plan" && v.Verified && !v.Disabled {
				out = append(out, speculativeChoice{ID: v.ID, Label: fmt.Sprintf("%s v%d (%s)", p.Name, v.Number, p.Provider)})
			}
		}
	}
	return out, nil
}

// permissions are what the caller's role in the active organization
// grants, from the one role table; unknown means none.
func (s *Site) permissions(r *http.Request, token string) access.PermissionSet {
	c, err := s.caller(r.Context(), token)
	if err != nil {
		return access.NewPermissionSet()
	}
	return c.perms
}

// saveSource writes a new source settings version from the form.
func (s *Site) saveSource(w http.ResponseWriter, r *http.Request, token string) {
	id := r.PathValue("id")
	form := sourceForm{TrackedBranch: strings.TrimSpace(r.PostFormValue("tracked_branch")),
		WorkingDirectory: strings.TrimSpace(r.PostFormValue("working_directory")),
		TriggerPaths:     r.PostFormValue("trigger_paths"), SpeculativeID: r.PostFormValue("speculative_credential_version_id"),
		ForkPullRequests: r.PostFormValue("fork_pull_requests")}
	repo, err := strconv.ParseInt(r.PostFormValue("repository_id"), 10, 64)
	if err != nil || repo <= 0 {
		s.renderSource(w, r, token, "Choose a repository.", &form)
		return
	}
	form.RepositoryID = repo
	paths := []string{}
	for _, line := range strings.Split(form.TriggerPaths, "\n") {
		if p := strings.TrimSpace(line); p != "" {
			paths = append(paths, p)
		}
	}
	body := map[string]any{"repository_id": repo, "tracked_branch": form.TrackedBranch,
		"working_directory": form.WorkingDirectory, "trigger_paths": paths}
	if form.ForkPullRequests != "" {
		body["fork_pull_requests"] = form.ForkPullRequests
	}
	if form.SpeculativeID != "" {
		body["speculative_credential_version_id"] = form.SpeculativeID
	}
	if err := s.api.Mutate(r.Context(), token, http.MethodPut, "/v1/workspaces/"+url.PathEscape(id)+"/source", newKey(), body, nil); err != nil {
		s.renderSource(w, r, token, sourceRefusal(err), &form)
		return
	}
	http.Redirect(w, r, sourcePath(id)+"?done=saved", http.StatusSeeOther)
}

// startInstallation asks the API for the app's install URL (a signed,
// single-use state) and sends the browser there.
func (s *Site) startInstallation(w http.ResponseWriter, r *http.Request, token string) {
	u, refused := s.installURL(r, token)
	if refused != "" {
		s.renderSource(w, r, token, refused, nil)
		return
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// installURL starts the installation flow: the provider's install page, or
// why it could not be had.
func (s *Site) installURL(r *http.Request, token string) (string, string) {
	var start struct {
		InstallURL string `json:"install_url"`
	}
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/github/installations/start", newKey(), map[string]any{}, &start)
	if err != nil {
		return "", installRefusal(err)
	}
	u, perr := url.Parse(start.InstallURL)
	if perr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", "The code host's install page is unavailable."
	}
	return u.String(), ""
}

func sourceRefusal(err error) string {
	var apiErr *apiclient.Error
	if errors.As(err, &apiErr) {
		switch apiErr.Code {
		case "WORKSPACE_SOURCE_SETTINGS_CONFLICT":
			return "Someone saved a newer version meanwhile; review it and save again."
		case "VALIDATION_FAILED":
			return "Check the settings: a repository selected in the installation, a branch, a repository-relative directory, at most 100 trigger paths using *, ** and ? (no absolute paths, . or .. segments, backslashes or duplicates), and hold or plan for pull requests from forks."
		}
	}
	return refusal(err)
}

func installRefusal(err error) string {
	if apiclient.StatusOf(err) == http.StatusServiceUnavailable {
		return "The code-host app is not configured on this Cairn installation."
	}
	return refusal(err)
}

// runSource is a code-host run's source provenance as its review reports
// it under source_provenance (SPEC §2): the commit, ref and working
// directory the run evaluated. Absent for uploaded runs.
type runSource struct {
	Provider          string `json:"provider"`
	CommitSHA         string `json:"commit_sha"`
	CommitMessage     string `json:"commit_message"`
	Ref               string `json:"ref"`
	Repository        string `json:"repository"`
	PullRequestNumber *int   `json:"pull_request_number"`
	WorkingDirectory  string `json:"working_directory"`
	// web is the code host's web origin, set by the dashboard.
	web string
}

// ShortSHA is the commit's first twelve characters.
func (s runSource) ShortSHA() string {
	if len(s.CommitSHA) > 12 {
		return s.CommitSHA[:12]
	}
	return s.CommitSHA
}

// CommitURL is the commit's page on the code host, or "" when unknown.
func (s runSource) CommitURL() string {
	if s.web == "" || s.Repository == "" || !shaPattern.MatchString(s.CommitSHA) {
		return ""
	}
	owner, name, ok := strings.Cut(s.Repository, "/")
	if !ok {
		return ""
	}
	return s.web + "/" + url.PathEscape(owner) + "/" + url.PathEscape(name) + "/commit/" + s.CommitSHA
}

var shaPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// CodeHostWebURL is the web origin of the code host whose REST API is at
// apiURL: github.com for api.github.com, the host itself for Enterprise
// Server (https://HOST/api/v3) or any other API root.
func CodeHostWebURL(apiURL string) string {
	u, err := url.Parse(apiURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return ""
	}
	if u.Host == "api.github.com" {
		return "https://github.com"
	}
	return u.Scheme + "://" + u.Host
}
