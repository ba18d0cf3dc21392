package site

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cairnhq/cairn/bff/apiclient"
)

// variable is a workspace variable; a sensitive one has no value here or
// anywhere else the API answers.
type variable struct {
	ID           string    `json:"id"`
	Key          string    `json:"key"`
	Value        *string   `json:"value"`
	Sensitive    bool      `json:"sensitive"`
	HCL          bool      `json:"hcl"`
	Description  string    `json:"description"`
	ValueVersion int       `json:"value_version"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// variablesPage is the variables tab.
type variablesPage struct {
	*workspaceShell
	Variables []variable
	// Editing is the variable whose edit form is open; ConfirmDelete the
	// one whose delete awaits confirmation.
	Editing       string
	ConfirmDelete string
}

func (s *Site) loadVariables(ctx context.Context, r *http.Request, token string, sh *workspaceShell) (any, error) {
	page := variablesPage{workspaceShell: sh, Editing: r.URL.Query().Get("edit")}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/delete") && r.PostFormValue("confirm") != "yes" {
		page.ConfirmDelete = r.PathValue("variableId")
	}
	err := s.api.Call(ctx, token, http.MethodGet, "/v1/workspaces/"+url.PathEscape(sh.Workspace.ID)+"/variables", nil, &page.Variables)
	return page, err
}

// createVariable adds a workspace variable; a sensitive value is sealed by
// the API and never shown again.
func (s *Site) createVariable(w http.ResponseWriter, r *http.Request, token string) {
	body := map[string]any{"key": strings.TrimSpace(r.PostFormValue("key")), "value": r.PostFormValue("value"),
		"sensitive": r.PostFormValue("sensitive") == "on", "hcl": r.PostFormValue("hcl") == "on",
		"description": strings.TrimSpace(r.PostFormValue("description"))}
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/workspaces/"+url.PathEscape(r.PathValue("id"))+"/variables", newKey(), body, nil)
	if err != nil {
		s.refused(w, r, token, "variables", s.loadVariables, err)
		return
	}
	backTo(w, r, "variables", "variable-added")
}

// updateVariable replaces a variable. A sensitive value is write-only: the
// form never holds it, and an empty value field keeps the stored one (the
// API keeps it when the value is omitted), so editing a description never
// needs the secret.
func (s *Site) updateVariable(w http.ResponseWriter, r *http.Request, token string) {
	current, err := s.workspaceVariable(r, token)
	if err != nil {
		s.refused(w, r, token, "variables", s.loadVariables, err)
		return
	}
	sensitive := r.PostFormValue("sensitive") == "on"
	body := map[string]any{"sensitive": sensitive, "hcl": r.PostFormValue("hcl") == "on",
		"description": strings.TrimSpace(r.PostFormValue("description"))}
	if value := r.PostFormValue("value"); !current.Sensitive || value != "" {
		body["value"] = value
	} else if !sensitive {
		// Turning a secret into a plain variable would show it; that takes
		// a new value.
		s.showWorkspaceTab(w, r, token, "variables", s.loadVariables, http.StatusUnprocessableEntity,
			"A sensitive variable becomes plain only with a new value.")
		return
	}
	err = s.api.Mutate(r.Context(), token, http.MethodPut, "/v1/workspace-variables/"+url.PathEscape(current.ID), newKey(), body, nil)
	if err != nil {
		s.refused(w, r, token, "variables", s.loadVariables, err)
		return
	}
	backTo(w, r, "variables", "variable-saved")
}

// workspaceVariable finds the posted variable among this workspace's, so
// a page admitted for one workspace never changes another's variable.
func (s *Site) workspaceVariable(r *http.Request, token string) (variable, error) {
	var vars []variable
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/v1/workspaces/"+url.PathEscape(r.PathValue("id"))+"/variables", nil, &vars); err != nil {
		return variable{}, err
	}
	for _, v := range vars {
		if v.ID == r.PathValue("variableId") {
			return v, nil
		}
	}
	return variable{}, &apiclient.Error{Status: http.StatusNotFound, Code: "NOT_FOUND"}
}

// deleteVariable needs a second, explicit confirmation: the first post
// only asks for it.
func (s *Site) deleteVariable(w http.ResponseWriter, r *http.Request, token string) {
	if r.PostFormValue("confirm") != "yes" {
		s.showWorkspaceTab(w, r, token, "variables", s.loadVariables, http.StatusOK, "")
		return
	}
	current, err := s.workspaceVariable(r, token)
	if err == nil {
		err = s.api.Mutate(r.Context(), token, http.MethodDelete, "/v1/workspace-variables/"+url.PathEscape(current.ID), newKey(), nil, nil)
	}
	if err != nil {
		s.refused(w, r, token, "variables", s.loadVariables, err)
		return
	}
	backTo(w, r, "variables", "variable-deleted")
}
