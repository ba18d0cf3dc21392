package site

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/bff/apiclient"
)

// The dashboard's variable sets: the organization's sets with their scope,
// one set's settings, scope and variables, and (in variables.go) what a
// workspace's next run would get from them. Every page reads
// /v1/variable-sets; the API decides every action again, so a control the
// page hides is also refused upstream.

// namedRef is a project or workspace a set applies to.
type namedRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// variableSet is a set as /v1 reads it. The list carries the scope as IDs;
// one set's read names them and holds its variables.
type variableSet struct {
	ID            string        `json:"id"`
	Name          string        `json:"name"`
	Description   string        `json:"description"`
	Global        bool          `json:"global"`
	Priority      bool          `json:"priority"`
	ProjectIDs    []string      `json:"project_ids"`
	WorkspaceIDs  []string      `json:"workspace_ids"`
	Projects      []namedRef    `json:"projects"`
	Workspaces    []namedRef    `json:"workspaces"`
	VariableCount int           `json:"variable_count"`
	Variables     []setVariable `json:"variables"`
	UpdatedAt     time.Time     `json:"updated_at"`
}

// ScopeSummary says where the set applies in a few words: global, or how
// many projects and workspaces it names.
func (v variableSet) ScopeSummary() string {
	if v.Global {
		return "global"
	}
	projects, workspaces := max(len(v.ProjectIDs), len(v.Projects)), max(len(v.WorkspaceIDs), len(v.Workspaces))
	if projects == 0 && workspaces == 0 {
		return "not applied"
	}
	var parts []string
	if projects > 0 {
		parts = append(parts, plural(projects, "project"))
	}
	if workspaces > 0 {
		parts = append(parts, plural(workspaces, "workspace"))
	}
	return strings.Join(parts, " · ")
}

// setVariable is a set's variable; a sensitive one has no value here or
// anywhere else the API answers.
type setVariable struct {
	ID           string    `json:"id"`
	Key          string    `json:"key"`
	Value        *string   `json:"value"`
	Description  string    `json:"description"`
	Category     string    `json:"category"`
	HCL          bool      `json:"hcl"`
	Sensitive    bool      `json:"sensitive"`
	ValueVersion int       `json:"value_version"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// variableCategories are the categories a set variable may have.
var variableCategories = []string{"terraform", "env"}

// varsetRefusal explains a refused variable set change without the API's
// text.
func varsetRefusal(err error) string {
	switch apiclient.CodeOf(err) {
	case "VARIABLE_SET_NAME_TAKEN":
		return "Another variable set already has that name."
	case "VARIABLE_SET_VARIABLE_KEY_TAKEN":
		return "This set already has a variable with that key and category."
	case "VARIABLE_SET_VARIABLE_VALUE_REQUIRED":
		return "Changing whether a variable is sensitive, or turning on HCL for a sensitive one, needs a new value."
	case "WORKSPACE_VARIABLE_HCL_INVALID":
		return "That value is not a valid HCL expression."
	}
	switch apiclient.StatusOf(err) {
	case http.StatusConflict:
		return "That conflicts with what exists: the name or the key is taken."
	case http.StatusUnprocessableEntity, http.StatusBadRequest:
		return "Check what you entered: the API refused it as invalid."
	case http.StatusNotFound:
		return "That variable set, variable, project or workspace no longer exists, or you cannot see it."
	}
	return refusal(err)
}

// varsetsPage is the list of the organization's sets with the create form.
type varsetsPage struct {
	Tab      string
	Sets     []variableSet
	Query    string
	MoreURL  string
	Paged    bool
	Notice   string
	Error    string
	CanWrite bool
}

func (s *Site) variableSets(w http.ResponseWriter, r *http.Request, token string) {
	page := varsetsPage{}
	if r.URL.Query().Get("done") == "deleted" {
		page.Notice = "Variable set deleted. Runs created from now on no longer get its variables."
	}
	s.renderVariableSets(w, r, token, http.StatusOK, page)
}

// varsetsPageSize is how many sets one page of the list shows.
const varsetsPageSize = 50

func (s *Site) renderVariableSets(w http.ResponseWriter, r *http.Request, token string, status int, page varsetsPage) {
	f := s.frame(r, "Variable sets")
	ctx := r.Context()
	page.Tab = "variable-sets"
	q := r.URL.Query()
	page.Query = strings.TrimSpace(q.Get("q"))
	path := url.Values{"limit": {strconv.Itoa(varsetsPageSize)}}
	if page.Query != "" {
		path.Set("q", page.Query)
	}
	if cur := q.Get("cursor"); cur != "" {
		path.Set("cursor", cur)
		page.Paged = true
	}
	list, err := apiclient.List[variableSet](ctx, s.api, token, "/v1/variable-sets?"+path.Encode())
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Sets = list.Data
	if list.NextCursor != "" {
		next := url.Values{"cursor": {list.NextCursor}}
		if page.Query != "" {
			next.Set("q", page.Query)
		}
		page.MoreURL = "/organization/variable-sets?" + next.Encode()
	}
	c, err := s.effectiveCaller(ctx, token, f, "")
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.CanWrite = c.Can(string(access.PermVarsetWrite))
	f.Page = page
	s.render(w, r, status, "varsets.html", f)
}

func varsetPath(id string) string { return "/organization/variable-sets/" + url.PathEscape(id) }

// apiVarsetPath is a set's /v1 path, from the route's {setId}.
func apiVarsetPath(r *http.Request) string {
	return "/v1/variable-sets/" + url.PathEscape(r.PathValue("setId"))
}

func (s *Site) createVariableSet(w http.ResponseWriter, r *http.Request, token string) {
	body := map[string]any{"name": strings.TrimSpace(r.PostFormValue("name")), "description": strings.TrimSpace(r.PostFormValue("description")),
		"priority": r.PostFormValue("priority") == "on", "global": r.PostFormValue("global") == "on"}
	var created variableSet
	if err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/variable-sets", newKey(), body, &created); err != nil {
		s.renderVariableSets(w, r, token, refusedStatus(err), varsetsPage{Error: varsetRefusal(err)})
		return
	}
	http.Redirect(w, r, varsetPath(created.ID)+"?done=created", http.StatusSeeOther)
}

// scopeChoice is a project or workspace the scope editor offers.
type scopeChoice struct {
	ID     string
	Name   string
	Chosen bool
}

// varsetPage is one set: its settings, scope and variables.
type varsetPage struct {
	Tab string
	Set variableSet
	// Projects and Workspaces are the scope editor's choices: what the
	// caller can see, and what the set names already.
	Projects   []scopeChoice
	Workspaces []scopeChoice
	Categories []string
	CanWrite   bool
	Notice     string
	Error      string
	// Editing is the variable whose edit form is open; ConfirmDelete the
	// one whose delete awaits confirmation; ConfirmDeleteSet asks for the
	// set's.
	Editing          string
	ConfirmDelete    string
	ConfirmDeleteSet bool
}

// varsetNotices are the notices a set action redirects back with.
var varsetNotices = map[string]string{
	"created":          "Variable set created. Add its variables, then choose where it applies.",
	"saved":            "Variable set saved. Runs created from now on use it.",
	"scope-saved":      "Scope saved. Runs created from now on in these workspaces get the set's variables.",
	"variable-added":   "Variable added. Runs created from now on where the set applies use it.",
	"variable-saved":   "Variable saved. Runs created from now on where the set applies use it.",
	"variable-deleted": "Variable deleted. Runs created from now on no longer see it.",
}

func (s *Site) variableSetPage(w http.ResponseWriter, r *http.Request, token string) {
	q := r.URL.Query()
	s.renderVariableSet(w, r, token, http.StatusOK, varsetPage{Notice: varsetNotices[q.Get("done")], Editing: q.Get("edit")})
}

func (s *Site) renderVariableSet(w http.ResponseWriter, r *http.Request, token string, status int, page varsetPage) {
	f := s.frame(r, "Variable set")
	ctx := r.Context()
	page.Tab, page.Categories = "variable-sets", variableCategories
	if err := s.api.Call(ctx, token, http.MethodGet, apiVarsetPath(r), nil, &page.Set); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	f.Title = page.Set.Name
	c, err := s.effectiveCaller(ctx, token, f, "")
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.CanWrite = c.Can(string(access.PermVarsetWrite))
	if page.CanWrite {
		projects, err := reachable(apiclient.List[project](ctx, s.api, token, "/v1/projects?limit=100"))
		if err != nil {
			s.unavailable(w, r, f, err)
			return
		}
		workspaces, err := s.reachableWorkspaces(ctx, token)
		if err != nil {
			s.unavailable(w, r, f, err)
			return
		}
		page.Projects = scopeChoices(page.Set.Projects, projectRefs(projects.Data))
		page.Workspaces = scopeChoices(page.Set.Workspaces, workspaceRefs(workspaces))
	}
	f.Page = page
	s.render(w, r, status, "varset.html", f)
}

func projectRefs(ps []project) []namedRef {
	out := make([]namedRef, 0, len(ps))
	for _, p := range ps {
		out = append(out, namedRef{ID: p.ID, Name: p.Name})
	}
	return out
}

func workspaceRefs(ws []workspaceRef) []namedRef {
	out := make([]namedRef, 0, len(ws))
	for _, w := range ws {
		out = append(out, namedRef{ID: w.ID, Name: w.Name})
	}
	return out
}

// scopeChoices offers every visible item, ticking those the set names;
// an item the set names beyond the first page of the list is offered too,
// so saving the editor never drops it unseen. Ordered by name.
func scopeChoices(chosen, visible []namedRef) []scopeChoice {
	out := make([]scopeChoice, 0, len(visible)+len(chosen))
	seen := map[string]bool{}
	for _, c := range chosen {
		out = append(out, scopeChoice{ID: c.ID, Name: c.Name, Chosen: true})
		seen[c.ID] = true
	}
	for _, v := range visible {
		if !seen[v.ID] {
			out = append(out, scopeChoice{ID: v.ID, Name: v.Name})
			seen[v.ID] = true
		}
	}
	slices.SortStableFunc(out, func(a, b scopeChoice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// varsetAction runs a set mutation and redirects back to the set with
// done, or renders the set page again with the refusal.
func (s *Site) varsetAction(w http.ResponseWriter, r *http.Request, token, method, path string, body any, done string) {
	if err := s.api.Mutate(r.Context(), token, method, path, newKey(), body, nil); err != nil {
		s.renderVariableSet(w, r, token, refusedStatus(err), varsetPage{Error: varsetRefusal(err)})
		return
	}
	http.Redirect(w, r, varsetPath(r.PathValue("setId"))+"?done="+done, http.StatusSeeOther)
}

func (s *Site) updateVariableSet(w http.ResponseWriter, r *http.Request, token string) {
	s.varsetAction(w, r, token, http.MethodPatch, apiVarsetPath(r), map[string]any{"name": strings.TrimSpace(r.PostFormValue("name")),
		"description": strings.TrimSpace(r.PostFormValue("description")), "priority": r.PostFormValue("priority") == "on"}, "saved")
}

// scopeVariableSet replaces where the set applies with what the editor
// ticked. A global set applies everywhere; the API clears its lists.
func (s *Site) scopeVariableSet(w http.ResponseWriter, r *http.Request, token string) {
	body := map[string]any{"global": r.PostFormValue("applies") == "global",
		"project_ids": nonNil(r.PostForm["project_id"]), "workspace_ids": nonNil(r.PostForm["workspace_id"])}
	s.varsetAction(w, r, token, http.MethodPut, apiVarsetPath(r)+"/scope", body, "scope-saved")
}

// nonNil keeps an empty list a list in JSON: a scope with nothing ticked
// clears it rather than leaving it unchanged.
func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

func (s *Site) createSetVariable(w http.ResponseWriter, r *http.Request, token string) {
	body := map[string]any{"key": strings.TrimSpace(r.PostFormValue("key")), "value": r.PostFormValue("value"),
		"category": r.PostFormValue("category"), "description": strings.TrimSpace(r.PostFormValue("description")),
		"sensitive": r.PostFormValue("sensitive") == "on", "hcl": r.PostFormValue("hcl") == "on"}
	s.varsetAction(w, r, token, http.MethodPost, apiVarsetPath(r)+"/variables", body, "variable-added")
}

// setVariable finds the posted variable in the set as the API reads it,
// so the edit knows whether the stored value is sensitive.
func (s *Site) setVariable(r *http.Request, token string) (setVariable, error) {
	var set variableSet
	if err := s.api.Call(r.Context(), token, http.MethodGet, apiVarsetPath(r), nil, &set); err != nil {
		return setVariable{}, err
	}
	for _, v := range set.Variables {
		if v.ID == r.PathValue("variableId") {
			return v, nil
		}
	}
	return setVariable{}, &apiclient.Error{Status: http.StatusNotFound, Code: "NOT_FOUND"}
}

func apiSetVariablePath(r *http.Request) string {
	return apiVarsetPath(r) + "/variables/" + url.PathEscape(r.PathValue("variableId"))
}

// updateSetVariable changes a variable; a sensitive value is write-only,
// as on a workspace's variables (editedValue).
func (s *Site) updateSetVariable(w http.ResponseWriter, r *http.Request, token string) {
	current, err := s.setVariable(r, token)
	if err != nil {
		s.renderVariableSet(w, r, token, refusedStatus(err), varsetPage{Error: varsetRefusal(err)})
		return
	}
	body := map[string]any{"key": strings.TrimSpace(r.PostFormValue("key")), "category": r.PostFormValue("category"),
		"description": strings.TrimSpace(r.PostFormValue("description")), "sensitive": r.PostFormValue("sensitive") == "on",
		"hcl": r.PostFormValue("hcl") == "on"}
	value, ok := editedValue(r, current.Sensitive)
	if !ok {
		s.renderVariableSet(w, r, token, http.StatusUnprocessableEntity, varsetPage{Error: plainNeedsValue, Editing: current.ID})
		return
	}
	if value != nil {
		body["value"] = *value
	}
	s.varsetAction(w, r, token, http.MethodPatch, apiSetVariablePath(r), body, "variable-saved")
}

// deleteSetVariable needs a second, explicit confirmation.
func (s *Site) deleteSetVariable(w http.ResponseWriter, r *http.Request, token string) {
	if r.PostFormValue("confirm") != "yes" {
		s.renderVariableSet(w, r, token, http.StatusOK, varsetPage{ConfirmDelete: r.PathValue("variableId")})
		return
	}
	s.varsetAction(w, r, token, http.MethodDelete, apiSetVariablePath(r), nil, "variable-deleted")
}

// deleteVariableSet needs a second, explicit confirmation.
func (s *Site) deleteVariableSet(w http.ResponseWriter, r *http.Request, token string) {
	if r.PostFormValue("confirm") != "yes" {
		s.renderVariableSet(w, r, token, http.StatusOK, varsetPage{ConfirmDeleteSet: true})
		return
	}
	if err := s.api.Mutate(r.Context(), token, http.MethodDelete, apiVarsetPath(r), newKey(), nil, nil); err != nil {
		s.renderVariableSet(w, r, token, refusedStatus(err), varsetPage{Error: varsetRefusal(err)})
		return
	}
	http.Redirect(w, r, "/organization/variable-sets?done=deleted", http.StatusSeeOther)
}

// routeVariableSets registers the variable set pages, in the organization
// route group.
func (s *Site) routeVariableSets(mux *http.ServeMux, org func(func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc) {
	mux.HandleFunc("GET /organization/variable-sets", org(s.variableSets))
	mux.HandleFunc("POST /organization/variable-sets", s.form(org(s.createVariableSet)))
	mux.HandleFunc("GET /organization/variable-sets/{setId}", org(s.variableSetPage))
	mux.HandleFunc("POST /organization/variable-sets/{setId}", s.form(org(s.updateVariableSet)))
	mux.HandleFunc("POST /organization/variable-sets/{setId}/scope", s.form(org(s.scopeVariableSet)))
	mux.HandleFunc("POST /organization/variable-sets/{setId}/delete", s.form(org(s.deleteVariableSet)))
	mux.HandleFunc("POST /organization/variable-sets/{setId}/variables", s.form(org(s.createSetVariable)))
	mux.HandleFunc("POST /organization/variable-sets/{setId}/variables/{variableId}", s.form(org(s.updateSetVariable)))
	mux.HandleFunc("POST /organization/variable-sets/{setId}/variables/{variableId}/delete", s.form(org(s.deleteSetVariable)))
}
