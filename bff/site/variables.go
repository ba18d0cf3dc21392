package site

import (
	"context"
	"errors"
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
	// Effective is what a run created now would get, each key's winner
	// with the candidates it overrides; EffectiveProblem is set instead
	// when that could not be read, so the section says so rather than
	// showing an empty list.
	Effective        []effectiveVariable
	EffectiveProblem *apiclient.Error
}

// effectiveVariable is one key a new run of the workspace would get: the
// winning value and where it comes from, and the candidates it overrides
// in precedence order.
type effectiveVariable struct {
	Key        string           `json:"key"`
	Category   string           `json:"category"`
	Value      *string          `json:"value"`
	Sensitive  bool             `json:"sensitive"`
	HCL        bool             `json:"hcl"`
	Source     variableSource   `json:"source"`
	Overridden []variableSource `json:"overridden"`
}

// variableSource is where a candidate value comes from: the workspace's
// own variables or a variable set, with the set's scope and priority.
type variableSource struct {
	Kind     string `json:"kind"`
	ID       string `json:"id"`
	Name     string `json:"name"`
	Scope    string `json:"scope"`
	Priority bool   `json:"priority"`
}

// FromSet reports whether the value comes from a variable set.
func (v variableSource) FromSet() bool { return v.Kind == "variable_set" }

func (s *Site) loadVariables(ctx context.Context, r *http.Request, token string, sh *workspaceShell) (any, error) {
	page := variablesPage{workspaceShell: sh, Editing: r.URL.Query().Get("edit")}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/delete") && r.PostFormValue("confirm") != "yes" {
		page.ConfirmDelete = r.PathValue("variableId")
	}
	workspace := "/v1/workspaces/" + url.PathEscape(sh.Workspace.ID)
	if err := s.api.Call(ctx, token, http.MethodGet, workspace+"/variables", nil, &page.Variables); err != nil {
		return nil, err
	}
	var effective struct {
		Items []effectiveVariable `json:"items"`
	}
	err := s.api.Call(ctx, token, http.MethodGet, workspace+"/effective-variables", nil, &effective)
	var apiErr *apiclient.Error
	switch {
	case err == nil:
		page.Effective = effective.Items
	case errors.As(err, &apiErr) && apiErr.Status != http.StatusUnauthorized:
		page.EffectiveProblem = apiErr
	default:
		return nil, err
	}
	return page, nil
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
	body := map[string]any{"sensitive": r.PostFormValue("sensitive") == "on", "hcl": r.PostFormValue("hcl") == "on",
		"description": strings.TrimSpace(r.PostFormValue("description"))}
	value, ok := editedValue(r, current.Sensitive)
	if !ok {
		s.showWorkspaceTab(w, r, token, "variables", s.loadVariables, http.StatusUnprocessableEntity, plainNeedsValue)
		return
	}
	if value != nil {
		body["value"] = *value
	}
	err = s.api.Mutate(r.Context(), token, http.MethodPut, "/v1/workspace-variables/"+url.PathEscape(current.ID), newKey(), body, nil)
	if err != nil {
		s.refused(w, r, token, "variables", s.loadVariables, err)
		return
	}
	backTo(w, r, "variables", "variable-saved")
}

// plainNeedsValue refuses an edit that would make a secret plain without
// a new value.
const plainNeedsValue = "A sensitive variable becomes plain only with a new value."

// editedValue is the value an edit form sends: nil keeps the stored one.
// A sensitive value is write-only, so its form never holds it and an empty
// field keeps it; turning a secret into a plain variable would show it, so
// that takes a new value (ok is false without one).
func editedValue(r *http.Request, wasSensitive bool) (value *string, ok bool) {
	posted := r.PostFormValue("value")
	switch {
	case !wasSensitive || posted != "":
		return &posted, true
	case r.PostFormValue("sensitive") != "on":
		return nil, false
	}
	return nil, true
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
