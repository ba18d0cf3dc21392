package site

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/cairnhq/cairn/bff/apiclient"
)

// workspaceInfo is a workspace as the API reads it.
type workspaceInfo struct {
	ID                string `json:"id"`
	Name              string `json:"name"`
	ProjectID         string `json:"project_id"`
	Slug              string `json:"slug"`
	CloudName         string `json:"cloud_name"`
	ExecutionSettings struct {
		Version     int    `json:"version"`
		ToolVersion string `json:"tool_version"`
		Region      string `json:"region"`
		Platform    string `json:"platform"`
	} `json:"execution_settings"`
	ExecutionMode string `json:"execution_mode"`
	Locked        bool   `json:"locked"`
	LockedBy      *struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
	} `json:"locked_by"`
	CreatedAt time.Time `json:"created_at"`
}

// workspaceShell is what every workspace tab shows around its content: the
// workspace, the tab bar, what the caller may do, and the outcome of the
// last action.
type workspaceShell struct {
	Workspace workspaceInfo
	Tab       string
	Caller    caller
	Notice    string
	Error     string
}

// workspaceTabs are the tabs in the order the tab bar shows them.
var workspaceTabs = []struct{ Name, Label string }{
	{"overview", "Overview"}, {"runs", "Runs"}, {"states", "States"}, {"variables", "Variables"},
	{"policies", "Policies"}, {"settings", "Settings"},
}

// Tabs lists the tab bar.
func (workspaceShell) Tabs() []struct{ Name, Label string } { return workspaceTabs }

// workspaceNotices are the notices an action redirects back with; the query
// only picks one, so a page never repeats request input.
var workspaceNotices = map[string]string{
	"variable-added":   "Variable added. Runs created from now on use it.",
	"variable-saved":   "Variable saved. Runs created from now on use it.",
	"variable-deleted": "Variable deleted. Runs created from now on no longer see it.",
	"settings-saved":   "Settings saved. Runs created from now on use them.",
	"sharing-saved":    "Remote state sharing saved. It applies to the consumers' next state read.",
	"policy-attached":  "Policy attached. Runs created from now on evaluate it.",
	"policy-detached":  "Policy detached. Existing runs keep their snapshot.",
	"set-created":      "Policy set created.",
	"grant-added":      "Team access granted. The team's members have it from their next request.",
	"grant-saved":      "Team access changed. It applies from the members' next request.",
	"grant-revoked":    "Team access revoked. The team's members lose it on their next request.",
	"trigger-added":    "Run trigger source added. Its next applied run makes this workspace run.",
	"trigger-removed":  "Run trigger source removed. Its applied runs no longer make this workspace run.",
}

// tabLoader reads one tab's content; an error renders the page unavailable.
type tabLoader func(ctx context.Context, r *http.Request, token string, sh *workspaceShell) (any, error)

// workspaceTab serves GET of a tab.
func (s *Site) workspaceTab(tab string, load tabLoader) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, token string) {
		s.showWorkspaceTab(w, r, token, tab, load, http.StatusOK, "")
	}
}

// showWorkspaceTab renders a tab, with message as the error of a refused
// action (status then says why the page is shown again).
func (s *Site) showWorkspaceTab(w http.ResponseWriter, r *http.Request, token, tab string, load tabLoader, status int, message string) {
	f := s.frame(r, "Workspace")
	ctx := r.Context()
	sh := workspaceShell{Tab: tab, Notice: workspaceNotices[r.URL.Query().Get("done")], Error: message}
	if message != "" {
		sh.Notice = ""
	}
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/workspaces/"+url.PathEscape(r.PathValue("id")), nil, &sh.Workspace); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	var err error
	if sh.Caller, err = s.effectiveCaller(ctx, token, f, sh.Workspace.ID); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page, err := load(ctx, r, token, &sh)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	f.Title, f.Page = sh.Workspace.Name, page
	s.render(w, r, status, "workspace-"+tab+".html", f)
}

// refused renders a tab again after a refused action.
func (s *Site) refused(w http.ResponseWriter, r *http.Request, token, tab string, load tabLoader, err error) {
	status := apiclient.StatusOf(err)
	if status < 400 || status >= 500 {
		status = http.StatusOK
	}
	if apiclient.StatusOf(err) == http.StatusUnauthorized {
		s.unavailable(w, r, s.frame(r, "Workspace"), err)
		return
	}
	message := refusal(err)
	switch apiclient.CodeOf(err) {
	case "VALIDATION_FAILED":
		message = "Check what you entered: the API refused it as invalid."
	case "WORKSPACE_NAME_TAKEN":
		message = "Another workspace already has that name."
	case "WORKSPACE_VARIABLE_KEY_TAKEN":
		message = "This workspace already has a variable with that key."
	case "WORKSPACE_VARIABLE_VALUE_REQUIRED":
		message = "Changing whether a variable is sensitive needs a new value."
	case "WORKSPACE_VARIABLE_HCL_INVALID":
		message = "That value is not a valid HCL expression."
	case "SOURCE_INGESTION_COMMIT_MISMATCH":
		message = "That is not this pull request's held head commit; reload the page and check the commit again."
	case "SOURCE_INGESTION_NOT_HELD":
		message = "This pull request no longer waits for a person: it was planned already."
	}
	s.showWorkspaceTab(w, r, token, tab, load, status, message)
}

// backTo redirects to a workspace tab with a notice code.
func backTo(w http.ResponseWriter, r *http.Request, tab, done string) {
	path := "/workspaces/" + url.PathEscape(r.PathValue("id"))
	if tab != "overview" {
		path += "/" + tab
	}
	http.Redirect(w, r, path+"?done="+url.QueryEscape(done), http.StatusSeeOther)
}

// overviewPage is the workspace's front page.
type overviewPage struct {
	*workspaceShell
	Chart  runChart
	Recent []runSummary
	// Current is the newest state version; nil with StateKnown means the
	// workspace has none yet.
	Current *stateVersion
	Outputs []stateOutput
	// Held are pull requests waiting for a person to plan them.
	Held heldPullRequests
	// Triggers are the workspaces this one's applied runs make run.
	Triggers []runTrigger
	// ConsumedBy is who may read this workspace's state (sharing.go).
	ConsumedBy sharingSection
}

// overviewRuns is how many recent runs the chart draws.
const overviewRuns = chartSlots

func (s *Site) loadOverview(ctx context.Context, r *http.Request, token string, sh *workspaceShell) (any, error) {
	page := overviewPage{workspaceShell: sh}
	runs, err := apiclient.List[runSummary](ctx, s.api, token, "/v1/runs?limit="+strconv.Itoa(overviewRuns)+"&workspace_id="+url.QueryEscape(sh.Workspace.ID))
	if err != nil {
		return nil, err
	}
	page.Chart = chartOf(runs.Data)
	page.Recent = runs.Data[:min(5, len(runs.Data))]
	page.Held = s.loadHeldPullRequests(ctx, token, sh.Workspace.ID)
	page.Triggers = s.outboundTriggers(ctx, token, sh.Workspace.ID)
	page.ConsumedBy = s.loadSharing(ctx, token, sh.Workspace.ID, false)
	// A team grant may read the workspace and its runs without its state
	// (state versions: none) or without raw state (read-outputs): the
	// overview then leaves out what the API refuses.
	states, err := apiclient.List[stateVersion](ctx, s.api, token, "/v1/workspaces/"+url.PathEscape(sh.Workspace.ID)+"/state-versions?limit=1")
	if apiclient.StatusOf(err) == http.StatusForbidden {
		return page, nil
	}
	if err != nil {
		return nil, err
	}
	if len(states.Data) > 0 {
		page.Current = &states.Data[0]
		if page.Outputs, err = s.outputs(ctx, token, page.Current.ID); apiclient.StatusOf(err) == http.StatusForbidden {
			page.Outputs = nil
		} else if err != nil {
			return nil, err
		}
	}
	return page, nil
}

// workspaceRun is a listed run with who started it and from where.
type workspaceRun struct {
	runSummary
	Source    string `json:"source"`
	CreatedBy struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
	} `json:"created_by"`
	// Author is CreatedBy by name where the dashboard can tell.
	Author string `json:"-"`
}

// SourceLabel says where the run came from in a user's words.
func (r workspaceRun) SourceLabel() string {
	switch r.Source {
	case "tfe":
		return "CLI (remote backend)"
	case "api":
		return "API or dashboard"
	}
	return r.Source
}

// workspaceRunsPage is the runs tab: one cursor page at a time.
type workspaceRunsPage struct {
	*workspaceShell
	Runs     []workspaceRun
	MoreURL  string
	Paged    bool
	FirstURL string
}

func (s *Site) loadWorkspaceRuns(ctx context.Context, r *http.Request, token string, sh *workspaceShell) (any, error) {
	page := workspaceRunsPage{workspaceShell: sh, FirstURL: "/workspaces/" + url.PathEscape(sh.Workspace.ID) + "/runs"}
	path := "/v1/runs?limit=25&workspace_id=" + url.QueryEscape(sh.Workspace.ID)
	if c := r.URL.Query().Get("cursor"); c != "" {
		path += "&cursor=" + url.QueryEscape(c)
		page.Paged = true
	}
	list, err := apiclient.List[workspaceRun](ctx, s.api, token, path)
	if err != nil {
		return nil, err
	}
	names := s.actorNames(ctx, token)
	for i := range list.Data {
		list.Data[i].Author = names.of(list.Data[i].CreatedBy.Kind, list.Data[i].CreatedBy.ID)
	}
	page.Runs = list.Data
	if list.NextCursor != "" {
		page.MoreURL = page.FirstURL + "?cursor=" + url.QueryEscape(list.NextCursor)
	}
	return page, nil
}
