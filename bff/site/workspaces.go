package site

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/bff/apiclient"
)

type project struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type workspacesPage struct {
	Workspaces []workspaceRef
	Projects   []project
	// ToolVersions are what the create form offers.
	ToolVersions []toolOption
	Error        string
	// CanCreate offers the new-workspace form.
	CanCreate bool
}

// workspaces lists the organization's workspaces and offers to create one.
func (s *Site) workspaces(w http.ResponseWriter, r *http.Request, token string) {
	s.renderWorkspaces(w, r, token, "")
}

func (s *Site) renderWorkspaces(w http.ResponseWriter, r *http.Request, token, message string) {
	f := s.frame(r, "Workspaces")
	if err := s.probe(r.Context(), token, ""); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page := workspacesPage{Error: message}
	var err error
	if page.Workspaces, err = s.reachableWorkspaces(r.Context(), token); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	projects, err := reachable(apiclient.List[project](r.Context(), s.api, token, "/v1/projects?limit=100"))
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Projects = projects.Data
	if page.ToolVersions, err = s.toolVersions(r.Context(), token, ""); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	c, err := s.effectiveCaller(r.Context(), token, f, "")
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.CanCreate = c.Can(string(access.PermWorkspaceWrite))
	f.Page = page
	s.render(w, r, http.StatusOK, "workspaces.html", f)
}

// createWorkspace creates a workspace, and its project first when the
// organization has none to put it in.
func (s *Site) createWorkspace(w http.ResponseWriter, r *http.Request, token string) {
	ctx := r.Context()
	projectID := r.PostFormValue("project_id")
	if projectID == "" {
		var p project
		if err := s.api.Mutate(ctx, token, http.MethodPost, "/v1/projects", newKey(), map[string]string{"name": "Default"}, &p); err != nil {
			s.renderWorkspaces(w, r, token, refusal(err))
			return
		}
		projectID = p.ID
	}
	var created workspaceRef
	err := s.api.Mutate(ctx, token, http.MethodPost, "/v1/workspaces", newKey(), map[string]any{
		"project_id": projectID, "name": strings.TrimSpace(r.PostFormValue("name")),
		"execution_settings": map[string]string{"tool_version": r.PostFormValue("tool_version"), "region": r.PostFormValue("region"),
			"platform": "linux_amd64"}}, &created)
	if err != nil {
		message := refusal(err)
		var apiErr *apiclient.Error
		if errors.As(err, &apiErr) && apiErr.Code == "WORKSPACE_NAME_TAKEN" {
			message = "A workspace with that name already exists."
		}
		s.renderWorkspaces(w, r, token, message)
		return
	}
	http.Redirect(w, r, "/workspaces/"+url.PathEscape(created.ID), http.StatusSeeOther)
}
