package v1

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/varset"
)

// Variable sets on /v1: sets of variables an organization applies to
// every workspace, to chosen projects' workspaces or to chosen
// workspaces, and the effective variables of a workspace (what a new run
// gets, with the values each winner overrides).

// NamedRef is a workspace or project by ID and name.
type NamedRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// VariableSetView is a variable set.
type VariableSetView struct {
	ID            string    `json:"id" doc:"Variable set ID (varset_…)."`
	Object        string    `json:"object" enum:"variable_set"`
	Name          string    `json:"name"`
	Description   string    `json:"description"`
	Global        bool      `json:"global" doc:"Applies to every workspace of the organization."`
	Priority      bool      `json:"priority" doc:"Its values win over every other value, run variables included."`
	WorkspaceIDs  []string  `json:"workspace_ids"`
	ProjectIDs    []string  `json:"project_ids"`
	VariableCount int       `json:"variable_count"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func variableSetView(s varset.Set) VariableSetView {
	return VariableSetView{ID: s.ID, Object: "variable_set", Name: s.Name, Description: s.Description, Global: s.Global,
		Priority: s.Priority, WorkspaceIDs: nonNilIDs(s.WorkspaceIDs), ProjectIDs: nonNilIDs(s.ProjectIDs),
		VariableCount: s.VariableCount, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

func nonNilIDs(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// VariableSetDetailView is a set with its scope by name and its variables.
type VariableSetDetailView struct {
	VariableSetView
	Workspaces []NamedRef                `json:"workspaces" doc:"The listed workspaces the caller can read."`
	Projects   []NamedRef                `json:"projects" doc:"The listed projects the caller can read."`
	Variables  []VariableSetVariableView `json:"variables"`
}

// VariableSetVariableView is a variable of a set.
type VariableSetVariableView struct {
	ID           string    `json:"id" doc:"Variable ID (vsv_…)."`
	Key          string    `json:"key"`
	Value        *string   `json:"value" doc:"The value; null for sensitive variables."`
	Description  string    `json:"description"`
	Category     string    `json:"category" enum:"terraform,env"`
	HCL          bool      `json:"hcl"`
	Sensitive    bool      `json:"sensitive"`
	ValueVersion int       `json:"value_version" doc:"Advances only when the value changes."`
	UpdatedAt    time.Time `json:"updated_at"`
}

func variableSetVariableView(v varset.Variable) VariableSetVariableView {
	value := v.Value
	if v.Sensitive {
		value = nil
	}
	return VariableSetVariableView{ID: v.ID, Key: v.Key, Value: value, Description: v.Description, Category: v.Category,
		HCL: v.HCL, Sensitive: v.Sensitive, ValueVersion: v.ValueVersion, UpdatedAt: v.UpdatedAt}
}

// VariableSourceView is where an effective value comes from.
type VariableSourceView struct {
	Kind     string `json:"kind" enum:"workspace,variable_set"`
	ID       string `json:"id" doc:"The workspace's or the set's ID."`
	Name     string `json:"name"`
	Scope    string `json:"scope" enum:"workspace,project,global"`
	Priority bool   `json:"priority"`
}

// EffectiveVariableView is the value a new run gets for a category and
// key, and the sources it wins over.
type EffectiveVariableView struct {
	Key        string               `json:"key"`
	Category   string               `json:"category" enum:"terraform,env"`
	Value      *string              `json:"value" doc:"The value; null when sensitive."`
	Sensitive  bool                 `json:"sensitive"`
	HCL        bool                 `json:"hcl"`
	Source     VariableSourceView   `json:"source"`
	Overridden []VariableSourceView `json:"overridden" doc:"The other sources of this key, highest precedence first."`
}

// EffectiveVariablesView is a workspace's effective variables, by category
// then key.
type EffectiveVariablesView struct {
	Items []EffectiveVariableView `json:"items"`
}

func effectiveVariablesView(cands []varset.Candidate) EffectiveVariablesView {
	out := EffectiveVariablesView{Items: []EffectiveVariableView{}}
	for _, c := range cands {
		source := VariableSourceView{Kind: c.Source, ID: c.SourceID, Name: c.SourceName, Scope: c.Scope, Priority: c.Priority}
		if c.Wins {
			out.Items = append(out.Items, EffectiveVariableView{Key: c.Key, Category: c.Category, Value: c.Value,
				Sensitive: c.Sensitive, HCL: c.HCL, Source: source, Overridden: []VariableSourceView{}})
			continue
		}
		last := &out.Items[len(out.Items)-1]
		last.Overridden = append(last.Overridden, source)
	}
	return out
}

// VariableSetRequest is the body of creating or changing a set; an absent
// field keeps its value (name is required on create).
type VariableSetRequest struct {
	Name        *string `json:"name,omitempty" maxLength:"512" doc:"1–128 characters, unique in the organization ignoring case."`
	Description *string `json:"description,omitempty" maxLength:"2048" doc:"At most 512 characters."`
	Global      *bool   `json:"global,omitempty" doc:"Making a set global clears its workspace and project lists."`
	Priority    *bool   `json:"priority,omitempty"`
}

func (r VariableSetRequest) input() varset.SetInput {
	return varset.SetInput{Name: r.Name, Description: r.Description, Global: r.Global, Priority: r.Priority}
}

// VariableSetScopeRequest replaces a set's scope.
type VariableSetScopeRequest struct {
	Global       bool     `json:"global"`
	WorkspaceIDs []string `json:"workspace_ids,omitempty" maxItems:"1000"`
	ProjectIDs   []string `json:"project_ids,omitempty" maxItems:"1000"`
}

// VariableSetVariableRequest is the body of adding or changing a set
// variable.
type VariableSetVariableRequest struct {
	Key         string  `json:"key,omitempty" maxLength:"128" doc:"Required on create; omitted keeps it."`
	Value       *string `json:"value,omitempty" maxLength:"65536" doc:"Required on create; omitted on change keeps the stored value (sensitive must then equal the stored flag)."`
	Description string  `json:"description,omitempty" maxLength:"512"`
	Category    string  `json:"category,omitempty" enum:"terraform,env" doc:"terraform (default on create) or env; omitted on change keeps it."`
	HCL         bool    `json:"hcl,omitempty" doc:"terraform only."`
	Sensitive   bool    `json:"sensitive" doc:"Sealed at rest and never returned by any read."`
}

func (r VariableSetVariableRequest) input() varset.VariableInput {
	return varset.VariableInput{Key: r.Key, Category: r.Category, Description: r.Description, Value: r.Value, HCL: r.HCL,
		Sensitive: r.Sensitive}
}

type listVariableSetsInput struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"20" doc:"Page size, 1–100."`
	Cursor string `query:"cursor" maxLength:"256" doc:"The next_cursor of the previous page of this same list."`
	Query  string `query:"q" maxLength:"128" doc:"Only sets whose name contains this, ignoring case."`
}

type variableSetInput struct {
	IdempotencyHeader
	Body VariableSetRequest
}

type changeVariableSetInput struct {
	IdempotencyHeader
	IDPath
	Body VariableSetRequest
}

type deleteVariableSetInput struct {
	IdempotencyHeader
	IDPath
}

type variableSetScopeInput struct {
	IdempotencyHeader
	IDPath
	Body VariableSetScopeRequest
}

type createVariableSetVariableInput struct {
	IdempotencyHeader
	IDPath
	Body VariableSetVariableRequest
}

// VariableSetVariablePath names a variable of a set.
type VariableSetVariablePath struct {
	IDPath
	VariableID string `path:"variable_id" maxLength:"64"`
}

type changeVariableSetVariableInput struct {
	IdempotencyHeader
	VariableSetVariablePath
	Body VariableSetVariableRequest
}

type deleteVariableSetVariableInput struct {
	IdempotencyHeader
	VariableSetVariablePath
}

func (a *API) registerVarsets() {
	tags := []string{"Variable sets"}
	sets := func() *varset.Service { return a.deps.Services.Varsets }
	register(a, huma.Operation{
		OperationID: "list-variable-sets", Method: http.MethodGet, Path: "/v1/variable-sets",
		Summary: "List the organization's variable sets by name", Tags: tags,
		Description: "Needs varset:read (reader and above).",
	}, operationOptions{}, func(ctx context.Context, in *listVariableSetsInput) (*Listed[VariableSetView], error) {
		return registryList(ctx, a, func(p access.Principal) ([]varset.Set, string, error) {
			return sets().List(ctx, p, varset.ListQuery{Query: in.Query, Cursor: in.Cursor, Limit: in.Limit})
		}, variableSetView)
	})

	register(a, huma.Operation{
		OperationID: "create-variable-set", Method: http.MethodPost, Path: "/v1/variable-sets",
		Summary: "Create a variable set", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Needs varset:write (admin, owner). Apply it with PUT /v1/variable-sets/{id}/scope.",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *variableSetInput) (*Mutated[VariableSetView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (VariableSetView, error) {
				s, err := sets().Create(ctx, tx, p, in.Body.input())
				return variableSetView(s), err
			})
	})

	register(a, huma.Operation{
		OperationID: "get-variable-set", Method: http.MethodGet, Path: "/v1/variable-sets/{id}",
		Summary: "Read a variable set with its scope and variables", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[VariableSetDetailView], error) {
		return single(ctx, a, func(p access.Principal) (VariableSetDetailView, error) {
			return a.variableSetDetail(ctx, p, in.ID)
		})
	})

	register(a, huma.Operation{
		OperationID: "update-variable-set", Method: http.MethodPatch, Path: "/v1/variable-sets/{id}",
		Summary: "Change a variable set's name, description, global or priority flag", Tags: tags,
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *changeVariableSetInput) (*Mutated[VariableSetView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (VariableSetView, error) {
				s, err := sets().Update(ctx, tx, p, in.ID, in.Body.input())
				return variableSetView(s), err
			})
	})

	register(a, huma.Operation{
		OperationID: "delete-variable-set", Method: http.MethodDelete, Path: "/v1/variable-sets/{id}",
		Summary: "Delete a variable set with its variables", Tags: tags,
		Description: "Runs already created keep the values they pinned.",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *deleteVariableSetInput) (*Mutated[VariableSetView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (VariableSetView, error) {
				s, err := sets().Delete(ctx, tx, p, in.ID)
				return variableSetView(s), err
			})
	})

	register(a, huma.Operation{
		OperationID: "replace-variable-set-scope", Method: http.MethodPut, Path: "/v1/variable-sets/{id}/scope",
		Summary: "Replace where a variable set applies", Tags: tags,
		Description: "Global, or exactly the workspaces and projects listed (each readable by the caller, else 404).",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *variableSetScopeInput) (*Mutated[VariableSetView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (VariableSetView, error) {
				s, err := sets().ReplaceScope(ctx, tx, p, in.ID, in.Body.Global, in.Body.WorkspaceIDs, in.Body.ProjectIDs)
				return variableSetView(s), err
			})
	})

	register(a, huma.Operation{
		OperationID: "create-variable-set-variable", Method: http.MethodPost, Path: "/v1/variable-sets/{id}/variables",
		Summary: "Add a variable to a variable set", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "An env key may not be a name the runner sets or one that changes how the sandbox or the CLI behaves.",
	}, operationOptions{mutation: true, admit: admitOrganization, bodyLimit: VariableBodyLimit}, func(ctx context.Context, in *createVariableSetVariableInput) (*Mutated[VariableSetVariableView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (VariableSetVariableView, error) {
				v, err := sets().CreateVariable(ctx, tx, p, in.ID, in.Body.input())
				return variableSetVariableView(v), err
			})
	})

	register(a, huma.Operation{
		OperationID: "update-variable-set-variable", Method: http.MethodPatch, Path: "/v1/variable-sets/{id}/variables/{variable_id}",
		Summary: "Change a variable of a variable set", Tags: tags,
	}, operationOptions{mutation: true, admit: admitOrganization, bodyLimit: VariableBodyLimit}, func(ctx context.Context, in *changeVariableSetVariableInput) (*Mutated[VariableSetVariableView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (VariableSetVariableView, error) {
				v, err := sets().UpdateVariable(ctx, tx, p, in.ID, in.VariableID, in.Body.input())
				return variableSetVariableView(v), err
			})
	})

	register(a, huma.Operation{
		OperationID: "delete-variable-set-variable", Method: http.MethodDelete, Path: "/v1/variable-sets/{id}/variables/{variable_id}",
		Summary: "Delete a variable of a variable set", Tags: tags, DefaultStatus: http.StatusNoContent,
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *deleteVariableSetVariableInput) (*Deleted, error) {
		return a.deletion(ctx, in.IdempotencyKey, func(ctx context.Context, tx *sqlx.Tx, p access.Principal) ([]string, error) {
			return nil, sets().DeleteVariable(ctx, tx, p, in.ID, in.VariableID)
		})
	})

	register(a, huma.Operation{
		OperationID: "get-workspace-effective-variables", Method: http.MethodGet, Path: "/v1/workspaces/{id}/effective-variables",
		Summary: "What a new run of the workspace gets: each variable's winning value and what it overrides", Tags: tags,
		Description: "Needs variable:read on the workspace. Precedence, highest first: priority global set, priority project set, " +
			"priority workspace set, run variables, workspace variables, workspace set, project set, global set; within a tier " +
			"the set whose name sorts first. Terraform and env variables are separate.",
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[EffectiveVariablesView], error) {
		return single(ctx, a, func(p access.Principal) (EffectiveVariablesView, error) {
			cands, err := sets().Effective(ctx, p, in.ID)
			return effectiveVariablesView(cands), err
		})
	})
}

// variableSetDetail reads a set with its scope by name and its variables.
func (a *API) variableSetDetail(ctx context.Context, p access.Principal, setID string) (VariableSetDetailView, error) {
	sets := a.deps.Services.Varsets
	s, err := sets.Get(ctx, p, setID)
	if err != nil {
		return VariableSetDetailView{}, err
	}
	vars, err := sets.Variables(ctx, p, setID)
	if err != nil {
		return VariableSetDetailView{}, err
	}
	ws, prj, err := sets.ScopeNames(ctx, p, s)
	if err != nil {
		return VariableSetDetailView{}, err
	}
	named := func(n varset.Named) NamedRef { return NamedRef{ID: n.ID, Name: n.Name} }
	return VariableSetDetailView{VariableSetView: variableSetView(s), Workspaces: mapSlice(ws, named),
		Projects: mapSlice(prj, named), Variables: mapSlice(vars, variableSetVariableView)}, nil
}
