package site

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cairnhq/cairn/bff/apiclient"
)

type attachmentView struct {
	ID              string    `json:"id"`
	PolicySetID     string    `json:"policy_set_id"`
	PolicySetName   string    `json:"policy_set_name"`
	PolicyVersionID string    `json:"policy_version_id"`
	VersionNumber   int       `json:"version_number"`
	Scope           string    `json:"scope"`
	EnforcementMode string    `json:"enforcement_mode"`
	CreatedAt       time.Time `json:"created_at"`
}

type publishedVersion struct {
	ID      string
	SetID   string
	SetName string
	Number  int
}

type stateVersion struct {
	ID        string    `json:"id"`
	Serial    int       `json:"serial"`
	CreatedAt time.Time `json:"created_at"`
	RunID     *string   `json:"run_id"`
}

type policySet struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type variable struct {
	ID          string  `json:"id"`
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	Sensitive   bool    `json:"sensitive"`
	HCL         bool    `json:"hcl"`
	Description string  `json:"description"`
}

type workspacePage struct {
	Workspace struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		ProjectID string `json:"project_id"`
	}
	Runs        []runSummary
	States      []stateVersion
	Attachments []attachmentView
	Published   []publishedVersion
	Sets        []policySet
	Variables   []variable
	Modes       []string
	Notice      string
	// ConfirmDetach names the attachment whose detach awaits the second,
	// explicit confirmation.
	ConfirmDetach string
}

func (s *Site) workspace(w http.ResponseWriter, r *http.Request, token string) {
	s.renderWorkspace(w, r, token, r.URL.Query().Get("notice"), r.URL.Query().Get("detach"))
}

func (s *Site) renderWorkspace(w http.ResponseWriter, r *http.Request, token, notice, confirmDetach string) {
	id := r.PathValue("id")
	f := s.frame(r, "Workspace")
	if err := s.probe(r.Context(), token, "/workspaces/"+url.PathEscape(id)); err != nil {
		f.Nav = false
		s.unavailable(w, r, f, err)
		return
	}
	page := workspacePage{Modes: []string{"advisory", "soft_mandatory", "hard_mandatory"}, Notice: notice, ConfirmDetach: confirmDetach}
	ctx := r.Context()
	esc := url.PathEscape(id)
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/workspaces/"+esc, nil, &page.Workspace); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	runs, err := apiclient.List[runSummary](ctx, s.api, token, "/v1/runs?limit=5&workspace_id="+url.QueryEscape(id))
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Runs = runs.Data
	states, err := apiclient.List[stateVersion](ctx, s.api, token, "/v1/workspaces/"+esc+"/state-versions?limit=5")
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.States = states.Data
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/workspaces/"+esc+"/policy-attachments", nil, &page.Attachments); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/workspaces/"+esc+"/variables", nil, &page.Variables); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/policy-sets", nil, &page.Sets); err == nil {
		for _, set := range page.Sets {
			var versions []struct {
				ID     string `json:"id"`
				Number int    `json:"number"`
				Status string `json:"status"`
			}
			if s.api.Call(ctx, token, http.MethodGet, "/v1/policy-sets/"+url.PathEscape(set.ID)+"/versions", nil, &versions) != nil {
				continue
			}
			for _, v := range versions {
				if v.Status == "published" {
					page.Published = append(page.Published, publishedVersion{ID: v.ID, SetID: set.ID, SetName: set.Name, Number: v.Number})
				}
			}
		}
	}
	f.Title, f.Page = page.Workspace.Name, page
	s.render(w, r, http.StatusOK, "workspace.html", f)
}

// attachPolicy attaches a published version chosen from the form.
func (s *Site) attachPolicy(w http.ResponseWriter, r *http.Request, token string) {
	id := r.PathValue("id")
	body := map[string]string{"policy_version_id": r.PostFormValue("policy_version_id"), "enforcement_mode": r.PostFormValue("enforcement_mode")}
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/workspaces/"+url.PathEscape(id)+"/policy-attachments", newKey(), body, nil)
	if err != nil {
		s.renderWorkspace(w, r, token, refusal(err), "")
		return
	}
	http.Redirect(w, r, "/workspaces/"+url.PathEscape(id)+"?notice="+url.QueryEscape("Policy attached. Runs created from now on evaluate it."), http.StatusSeeOther)
}

// detachPolicy needs a second, explicit confirmation: the first post only
// asks for it.
func (s *Site) detachPolicy(w http.ResponseWriter, r *http.Request, token string) {
	id, attachment := r.PathValue("id"), r.PathValue("attachmentId")
	if r.PostFormValue("confirm") != "yes" {
		s.renderWorkspace(w, r, token, "", attachment)
		return
	}
	err := s.api.Mutate(r.Context(), token, http.MethodDelete,
		"/v1/workspaces/"+url.PathEscape(id)+"/policy-attachments/"+url.PathEscape(attachment), newKey(), nil, nil)
	if err != nil {
		s.renderWorkspace(w, r, token, refusal(err), "")
		return
	}
	http.Redirect(w, r, "/workspaces/"+url.PathEscape(id)+"?notice="+url.QueryEscape("Policy detached. Existing runs keep their snapshot."), http.StatusSeeOther)
}

// createPolicySet creates a named set to upload versions into.
func (s *Site) createPolicySet(w http.ResponseWriter, r *http.Request, token string) {
	id := r.PathValue("id")
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/policy-sets", newKey(),
		map[string]string{"name": strings.TrimSpace(r.PostFormValue("name"))}, nil)
	if err != nil {
		s.renderWorkspace(w, r, token, refusal(err), "")
		return
	}
	http.Redirect(w, r, "/workspaces/"+url.PathEscape(id)+"?notice="+url.QueryEscape("Policy set created."), http.StatusSeeOther)
}

// createVariable adds a workspace variable; a sensitive value is sealed by
// the API and never shown again.
func (s *Site) createVariable(w http.ResponseWriter, r *http.Request, token string) {
	id := r.PathValue("id")
	body := map[string]any{"key": strings.TrimSpace(r.PostFormValue("key")), "value": r.PostFormValue("value"),
		"sensitive": r.PostFormValue("sensitive") == "on", "hcl": r.PostFormValue("hcl") == "on"}
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/workspaces/"+url.PathEscape(id)+"/variables", newKey(), body, nil)
	if err != nil {
		s.renderWorkspace(w, r, token, refusal(err), "")
		return
	}
	http.Redirect(w, r, "/workspaces/"+url.PathEscape(id)+"?notice="+url.QueryEscape("Variable added. Runs created from now on use it."), http.StatusSeeOther)
}

type project struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type workspacesPage struct {
	Workspaces []workspaceRef
	Projects   []project
	Error      string
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
	if _, page.Workspaces, err = s.workspaceNames(r.Context(), token); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	projects, err := apiclient.List[project](r.Context(), s.api, token, "/v1/projects?limit=100")
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Projects = projects.Data
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
