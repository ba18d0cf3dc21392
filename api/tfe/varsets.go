package tfe

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/varset"
	"github.com/cairnhq/cairn/api/workspace"
)

// Variable sets on /api/v2 are HCP Terraform's varsets, as go-tfe calls
// them. The varset service decides who sees and changes what; a set the
// caller cannot read answers like a missing one. Stacks and project-owned
// sets do not exist in Cairn and are refused with a sentence saying so.

func (s *server) registerVarsets(r fiber.Router) {
	r.Get("/organizations/:org/varsets", s.guard(s.byOrganization, s.withVarsets(s.listVarsets)))
	r.Post("/organizations/:org/varsets", s.guard(s.byOrganization, s.withVarsets(s.createVarset)))
	r.Get("/workspaces/:id/varsets", s.guard(s.byWorkspaceID, s.withVarsets(s.listWorkspaceVarsets)))
	r.Get("/projects/:id/varsets", s.guard(s.byProject, s.withVarsets(s.listProjectVarsets)))
	r.Get("/varsets/:id", s.guard(s.byVarset, s.withVarsets(s.readVarset)))
	r.Patch("/varsets/:id", s.guard(s.byVarset, s.withVarsets(s.updateVarset)))
	r.Delete("/varsets/:id", s.guardStop(s.byVarset, s.withVarsets(s.deleteVarset)))
	for _, typ := range []string{"workspaces", "projects"} {
		r.Post("/varsets/:id/relationships/"+typ, s.guard(s.byVarset, s.withVarsets(s.changeVarsetScope(true, typ))))
		r.Delete("/varsets/:id/relationships/"+typ, s.guardStop(s.byVarset, s.withVarsets(s.changeVarsetScope(false, typ))))
	}
	r.Post("/varsets/:id/relationships/stacks", s.guard(s.byVarset, s.refuseStacks))
	r.Delete("/varsets/:id/relationships/stacks", s.guardStop(s.byVarset, s.refuseStacks))
	r.Get("/varsets/:id/relationships/vars", s.guard(s.byVarset, s.withVarsets(s.listVarsetVariables)))
	r.Post("/varsets/:id/relationships/vars", s.guard(s.byVarset, s.withVarsets(s.createVarsetVariable)))
	r.Get("/varsets/:id/relationships/vars/:var", s.guard(s.byVarset, s.withVarsets(s.readVarsetVariable)))
	r.Patch("/varsets/:id/relationships/vars/:var", s.guard(s.byVarset, s.withVarsets(s.updateVarsetVariable)))
	r.Delete("/varsets/:id/relationships/vars/:var", s.guardStop(s.byVarset, s.withVarsets(s.deleteVarsetVariable)))
}

func (s *server) byVarset(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, '' FROM variable_sets v JOIN organizations o ON o.id = v.organization_id
		WHERE v.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

// withVarsets answers 503 when the installation has no varset service,
// like every route whose service is missing.
func (s *server) withVarsets(h handler) handler {
	return func(c *fiber.Ctx, p access.Principal, o owner) error {
		if s.VariableSets == nil {
			return s.writeError(c, fault.ErrUnavailable)
		}
		return h(c, p, o)
	}
}

var (
	// errVarsetAttribute marks a refused attribute of a set or set
	// variable, which HCP answers with 422.
	errVarsetAttribute   = errors.New("variable set attribute refused")
	errStacksNotModelled = fmt.Errorf("stacks are not modelled: %w", errVarsetAttribute)
	errProjectOwnedSet   = fmt.Errorf("project-owned variable sets are not modelled: %w", errVarsetAttribute)
)

// varsetError marks the domain's refusals of what a set or variable
// request sent as attribute errors; every other error is left as it is.
func varsetError(err error) error {
	if errors.Is(err, fault.ErrValidation) || errors.Is(err, workspace.ErrInvalidHCL) || errors.Is(err, varset.ErrValueRequired) {
		return fmt.Errorf("%w: %w", errVarsetAttribute, err)
	}
	return err
}

// refuseStacks answers the stack relationships: Cairn has no stacks, so
// there is nothing to apply a set to or remove it from.
func (s *server) refuseStacks(c *fiber.Ctx, _ access.Principal, _ owner) error {
	return s.writeError(c, errStacksNotModelled)
}

// refList is a to-many relationship as sent; a nil *refList is an absent
// relationship.
type refList struct {
	Data []ref `json:"data"`
}

// ids are the identifiers of the relationship, all of type typ.
func (l *refList) ids(typ string) ([]string, error) {
	out := make([]string, 0, len(l.Data))
	for _, r := range l.Data {
		if r.Type != typ || r.ID == "" {
			return nil, errInvalidDocument
		}
		out = append(out, r.ID)
	}
	return out, nil
}

// varsetDocument is a variable set create or update request. go-tfe sends
// the workspaces relationship (with global false) to replace the set's
// workspaces, and a polymorphic parent on create.
type varsetDocument struct {
	Data struct {
		Type       string `json:"type"`
		Attributes struct {
			Name        *string `json:"name"`
			Description *string `json:"description"`
			Global      *bool   `json:"global"`
			Priority    *bool   `json:"priority"`
		} `json:"attributes"`
		Relationships struct {
			Parent *struct {
				Data *ref `json:"data"`
			} `json:"parent"`
			Workspaces *refList `json:"workspaces"`
			Projects   *refList `json:"projects"`
			Stacks     *refList `json:"stacks"`
		} `json:"relationships"`
	} `json:"data"`
}

// scopeChange is the replacement of a set's scope a document asks for:
// nil lists are kept as they are.
type scopeChange struct {
	workspaceIDs, projectIDs []string
}

func (c scopeChange) requested() bool { return c.workspaceIDs != nil || c.projectIDs != nil }

// decodeVarset reads a varset document; a parent other than the
// organization itself and any stack are refused.
func decodeVarset(c *fiber.Ctx, o owner) (varsetDocument, scopeChange, error) {
	var doc varsetDocument
	var scope scopeChange
	if err := decodeDocument(c, &doc); err != nil {
		return doc, scope, err
	}
	if doc.Data.Type != "varsets" {
		return doc, scope, errInvalidDocument
	}
	rel := doc.Data.Relationships
	if rel.Parent != nil && rel.Parent.Data != nil {
		switch {
		case rel.Parent.Data.Type == "projects":
			return doc, scope, errProjectOwnedSet
		case rel.Parent.Data.Type != "organizations" || rel.Parent.Data.ID != o.OrganizationSlug:
			return doc, scope, errInvalidDocument
		}
	}
	if rel.Stacks != nil && len(rel.Stacks.Data) > 0 {
		return doc, scope, errStacksNotModelled
	}
	var err error
	if rel.Workspaces != nil {
		if scope.workspaceIDs, err = rel.Workspaces.ids("workspaces"); err != nil {
			return doc, scope, err
		}
	}
	if rel.Projects != nil {
		if scope.projectIDs, err = rel.Projects.ids("projects"); err != nil {
			return doc, scope, err
		}
	}
	return doc, scope, nil
}

// varsetResource renders a set with its scope and variables as
// relationships: create, read and list render a set identically.
func varsetResource(o owner, set varset.Set, vars []varset.Variable) resource {
	workspaces := make([]ref, 0, len(set.WorkspaceIDs))
	for _, id := range set.WorkspaceIDs {
		workspaces = append(workspaces, ref{ID: id, Type: "workspaces"})
	}
	projects := make([]ref, 0, len(set.ProjectIDs))
	for _, id := range set.ProjectIDs {
		projects = append(projects, ref{ID: id, Type: "projects"})
	}
	variables := make([]ref, 0, len(vars))
	for _, v := range vars {
		variables = append(variables, ref{ID: v.ID, Type: "vars"})
	}
	return resource{
		ID: set.ID, Type: "varsets",
		Attributes: map[string]any{
			"name": set.Name, "description": set.Description, "global": set.Global, "priority": set.Priority,
			"updated-at": timestamp(set.UpdatedAt), "var-count": set.VariableCount,
			"workspace-count": len(set.WorkspaceIDs), "project-count": len(set.ProjectIDs),
		},
		Relationships: map[string]relationship{
			"organization": toOne(o.OrganizationSlug, "organizations"),
			"parent":       toOne(o.OrganizationSlug, "organizations"),
			"workspaces":   {Data: workspaces}, "projects": {Data: projects}, "vars": {Data: variables},
		},
		Links: map[string]string{"self": "/api/v2/varsets/" + set.ID},
	}
}

// varsetVariableResource renders a set's variable; a sensitive value is
// never read back (an empty value, as for a variable created without
// one).
func varsetVariableResource(v varset.Variable) resource {
	value := ""
	if v.Value != nil && !v.Sensitive {
		value = *v.Value
	}
	return resource{
		ID: v.ID, Type: "vars",
		Attributes: map[string]any{
			"key": v.Key, "value": value, "description": v.Description, "category": v.Category,
			"hcl": v.HCL, "sensitive": v.Sensitive, "version-id": v.VersionID,
		},
		Relationships: map[string]relationship{"varset": toOne(v.SetID, "varsets")},
		Links:         map[string]string{"self": "/api/v2/varsets/" + v.SetID + "/relationships/vars/" + v.ID},
	}
}

// varsetIncludes are the include values a set read or list accepts;
// stacks name nothing in Cairn.
var varsetIncludes = []string{"workspaces", "projects", "vars", "stacks"}

// respondVarsets renders sets with their variables and the included
// resources the request asks for. A workspace or project the caller
// cannot read is left out of the included ones.
func (s *server) respondVarsets(c *fiber.Ctx, status int, p access.Principal, o owner, sets []varset.Set, meta map[string]any, single bool) error {
	want, err := strictIncludes(c, varsetIncludes...)
	if err != nil {
		return s.writeError(c, err)
	}
	ctx := c.UserContext()
	data := make([]resource, 0, len(sets))
	var included []resource
	seen := map[string]bool{}
	for _, set := range sets {
		vars, err := s.VariableSets.Variables(ctx, p, set.ID)
		if err != nil {
			return s.writeError(c, err)
		}
		data = append(data, varsetResource(o, set, vars))
		if want["vars"] {
			for _, v := range vars {
				included = append(included, varsetVariableResource(v))
			}
		}
		more, err := s.scopeIncludes(ctx, p, o, set, want, seen)
		if err != nil {
			return s.writeError(c, err)
		}
		included = append(included, more...)
	}
	if single {
		return writeWithIncluded(c, status, data[0], included, nil)
	}
	return writeWithIncluded(c, status, data, included, meta)
}

// scopeIncludes renders the workspaces and projects of a set that want
// asks for and seen has not rendered yet.
func (s *server) scopeIncludes(ctx context.Context, p access.Principal, o owner, set varset.Set, want, seen map[string]bool) ([]resource, error) {
	var out []resource
	if want["workspaces"] {
		for _, id := range set.WorkspaceIDs {
			if seen[id] {
				continue
			}
			seen[id] = true
			w, err := s.Workspaces.WorkspaceWith(ctx, p, id, access.PermWorkspaceRead)
			if errors.Is(err, fault.ErrNotFound) || errors.Is(err, fault.ErrForbidden) {
				continue
			}
			if err != nil {
				return nil, err
			}
			res, err := s.workspaceResource(ctx, p, o, w)
			if err != nil {
				return nil, err
			}
			out = append(out, res)
		}
	}
	if want["projects"] {
		for _, id := range set.ProjectIDs {
			if seen[id] {
				continue
			}
			seen[id] = true
			proj, err := s.Workspaces.ProjectWith(ctx, p, id, access.PermProjectRead)
			if errors.Is(err, fault.ErrNotFound) || errors.Is(err, fault.ErrForbidden) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, projectResource(p, o, proj))
		}
	}
	return out, nil
}

func (s *server) listVarsets(c *fiber.Ctx, p access.Principal, o owner) error {
	number, size := pageParams(c)
	sets, total, err := s.VariableSets.ListPage(c.UserContext(), p, varset.ListQuery{Query: c.Query("q")}, number, size)
	if err != nil {
		return s.writeError(c, err)
	}
	return s.respondVarsets(c, http.StatusOK, p, o, sets, paginate(number, size, total), false)
}

func (s *server) listWorkspaceVarsets(c *fiber.Ctx, p access.Principal, o owner) error {
	sets, err := s.VariableSets.ForWorkspace(c.UserContext(), p, o.WorkspaceID)
	if err != nil {
		return s.writeError(c, err)
	}
	page, meta := pageOf(c, sets)
	return s.respondVarsets(c, http.StatusOK, p, o, page, meta, false)
}

func (s *server) listProjectVarsets(c *fiber.Ctx, p access.Principal, o owner) error {
	sets, err := s.VariableSets.ForProject(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	page, meta := pageOf(c, sets)
	return s.respondVarsets(c, http.StatusOK, p, o, page, meta, false)
}

func (s *server) createVarset(c *fiber.Ctx, p access.Principal, o owner) error {
	doc, scope, err := decodeVarset(c, o)
	if err != nil {
		return s.writeError(c, err)
	}
	a := doc.Data.Attributes
	if a.Name == nil {
		return s.writeError(c, errInvalidDocument)
	}
	ctx := c.UserContext()
	var set varset.Set
	err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		set, err = s.VariableSets.Create(ctx, tx, p, varset.SetInput{Name: a.Name, Description: a.Description, Global: a.Global, Priority: a.Priority})
		if err != nil || !scope.requested() {
			return err
		}
		set, err = s.VariableSets.ReplaceScope(ctx, tx, p, set.ID, set.Global, scope.workspaceIDs, scope.projectIDs)
		return err
	})
	if err != nil {
		return s.writeError(c, varsetError(err))
	}
	return s.respondVarsets(c, http.StatusCreated, p, o, []varset.Set{set}, nil, true)
}

func (s *server) readVarset(c *fiber.Ctx, p access.Principal, o owner) error {
	set, err := s.VariableSets.Get(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	return s.respondVarsets(c, http.StatusOK, p, o, []varset.Set{set}, nil, true)
}

// updateVarset changes the attributes sent and replaces the scope lists
// sent (an empty list clears one; an absent one is kept), in one
// transaction.
func (s *server) updateVarset(c *fiber.Ctx, p access.Principal, o owner) error {
	doc, scope, err := decodeVarset(c, o)
	if err != nil {
		return s.writeError(c, err)
	}
	a := doc.Data.Attributes
	ctx := c.UserContext()
	var set varset.Set
	err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		set, err = s.VariableSets.Update(ctx, tx, p, c.Params("id"), varset.SetInput{Name: a.Name, Description: a.Description,
			Global: a.Global, Priority: a.Priority})
		if err != nil || !scope.requested() {
			return err
		}
		workspaceIDs, projectIDs := scope.workspaceIDs, scope.projectIDs
		if workspaceIDs == nil {
			workspaceIDs = set.WorkspaceIDs
		}
		if projectIDs == nil {
			projectIDs = set.ProjectIDs
		}
		set, err = s.VariableSets.ReplaceScope(ctx, tx, p, set.ID, set.Global, workspaceIDs, projectIDs)
		return err
	})
	if err != nil {
		return s.writeError(c, varsetError(err))
	}
	return s.respondVarsets(c, http.StatusOK, p, o, []varset.Set{set}, nil, true)
}

func (s *server) deleteVarset(c *fiber.Ctx, p access.Principal, _ owner) error {
	ctx := c.UserContext()
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		_, err := s.VariableSets.Delete(ctx, tx, p, c.Params("id"))
		return err
	})
	if err != nil {
		return s.writeError(c, varsetError(err))
	}
	return c.SendStatus(http.StatusNoContent)
}

// changeVarsetScope applies a set to, or removes it from, the workspaces
// or projects the document names. A workspace or project the caller
// cannot read, or of another organization, is not found.
func (s *server) changeVarsetScope(add bool, typ string) handler {
	return func(c *fiber.Ctx, p access.Principal, _ owner) error {
		var doc refList
		if err := decodeDocument(c, &doc); err != nil {
			return s.writeError(c, err)
		}
		if len(doc.Data) == 0 {
			return s.writeError(c, errInvalidDocument)
		}
		ids, err := doc.ids(typ)
		if err != nil {
			return s.writeError(c, err)
		}
		change := map[[2]bool]func(context.Context, *sqlx.Tx, access.Principal, string, []string) (varset.Set, error){
			{true, true}: s.VariableSets.AddWorkspaces, {false, true}: s.VariableSets.RemoveWorkspaces,
			{true, false}: s.VariableSets.AddProjects, {false, false}: s.VariableSets.RemoveProjects,
		}[[2]bool{add, typ == "workspaces"}]
		ctx := c.UserContext()
		err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
			_, err := change(ctx, tx, p, c.Params("id"), ids)
			return err
		})
		if err != nil {
			return s.writeError(c, varsetError(err))
		}
		return c.SendStatus(http.StatusNoContent)
	}
}

// varsetVariableDocument is a set variable create or update request;
// absent attributes keep their values on update.
type varsetVariableDocument struct {
	Data struct {
		Type       string `json:"type"`
		Attributes struct {
			Key         *string `json:"key"`
			Value       *string `json:"value"`
			Description *string `json:"description"`
			Category    *string `json:"category"`
			HCL         *bool   `json:"hcl"`
			Sensitive   *bool   `json:"sensitive"`
		} `json:"attributes"`
	} `json:"data"`
}

func decodeVarsetVariable(c *fiber.Ctx) (varsetVariableDocument, error) {
	var doc varsetVariableDocument
	if err := decodeDocument(c, &doc); err != nil {
		return doc, err
	}
	if doc.Data.Type != "vars" {
		return doc, errInvalidDocument
	}
	return doc, nil
}

// patch is the input that applies the document's attributes over cur.
func (d varsetVariableDocument) patch(cur varset.VariableInput) varset.VariableInput {
	a := d.Data.Attributes
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&cur.Key, a.Key)
	set(&cur.Description, a.Description)
	set(&cur.Category, a.Category)
	if a.HCL != nil {
		cur.HCL = *a.HCL
	}
	if a.Sensitive != nil {
		cur.Sensitive = *a.Sensitive
	}
	cur.Value = a.Value
	return cur
}

func (s *server) listVarsetVariables(c *fiber.Ctx, p access.Principal, _ owner) error {
	vars, err := s.VariableSets.Variables(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	return writePage(c, vars, varsetVariableResource)
}

func (s *server) createVarsetVariable(c *fiber.Ctx, p access.Principal, _ owner) error {
	doc, err := decodeVarsetVariable(c)
	if err != nil {
		return s.writeError(c, err)
	}
	if doc.Data.Attributes.Key == nil || doc.Data.Attributes.Category == nil {
		return s.writeError(c, errInvalidDocument)
	}
	in := doc.patch(varset.VariableInput{})
	if in.Value == nil {
		// A variable created without a value has the empty one.
		in.Value = new(string)
	}
	ctx := c.UserContext()
	var v varset.Variable
	err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		v, err = s.VariableSets.CreateVariable(ctx, tx, p, c.Params("id"), in)
		return err
	})
	if err != nil {
		return s.writeError(c, varsetError(err))
	}
	return writeData(c, http.StatusCreated, varsetVariableResource(v))
}

func (s *server) readVarsetVariable(c *fiber.Ctx, p access.Principal, _ owner) error {
	v, err := s.VariableSets.Variable(c.UserContext(), p, c.Params("id"), c.Params("var"))
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, varsetVariableResource(v))
}

func (s *server) updateVarsetVariable(c *fiber.Ctx, p access.Principal, _ owner) error {
	doc, err := decodeVarsetVariable(c)
	if err != nil {
		return s.writeError(c, err)
	}
	ctx := c.UserContext()
	var v varset.Variable
	err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		cur, err := s.VariableSets.Variable(ctx, p, c.Params("id"), c.Params("var"))
		if err != nil {
			return err
		}
		in := doc.patch(varset.VariableInput{Key: cur.Key, Category: cur.Category, Description: cur.Description,
			HCL: cur.HCL, Sensitive: cur.Sensitive})
		if in.Sensitive && !cur.Sensitive && in.Value == nil {
			// HCP lets a value become sensitive without sending it
			// again: it is sealed as it stands.
			in.Value = cur.Value
		}
		v, err = s.VariableSets.UpdateVariable(ctx, tx, p, c.Params("id"), c.Params("var"), in)
		return err
	})
	if err != nil {
		return s.writeError(c, varsetError(err))
	}
	return writeData(c, http.StatusOK, varsetVariableResource(v))
}

func (s *server) deleteVarsetVariable(c *fiber.Ctx, p access.Principal, _ owner) error {
	ctx := c.UserContext()
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		return s.VariableSets.DeleteVariable(ctx, tx, p, c.Params("id"), c.Params("var"))
	})
	if err != nil {
		return s.writeError(c, varsetError(err))
	}
	return c.SendStatus(http.StatusNoContent)
}
