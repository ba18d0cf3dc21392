package tfe

import (
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/varset"
	"github.com/cairnhq/cairn/api/workspace"
)

// Workspace variables on the remote-backend protocol
// (/workspaces/{id}/vars): what go-tfe's Variables and the tfe provider's
// tfe_variable use. They are the same variables as /v1's, with HCP's
// partial updates.
func (s *server) registerVariables(r fiber.Router) {
	r.Get("/workspaces/:id/vars", s.guard(s.byWorkspaceID, s.listVariables))
	r.Get("/workspaces/:id/all-vars", s.guard(s.byWorkspaceID, s.withVarsets(s.listAllVariables)))
	r.Post("/workspaces/:id/vars", s.guard(s.byWorkspaceID, s.createVariable))
	r.Get("/workspaces/:id/vars/:var", s.guard(s.byWorkspaceID, s.readVariable))
	r.Patch("/workspaces/:id/vars/:var", s.guard(s.byWorkspaceID, s.updateVariable))
	r.Delete("/workspaces/:id/vars/:var", s.guardStop(s.byWorkspaceID, s.deleteVariable))
}

// variableResource renders a workspace variable; a sensitive value is
// never read back (an empty value, as HCP shows it).
func variableResource(v workspace.Variable) resource {
	value := ""
	if v.Value != nil && !v.Sensitive {
		value = *v.Value
	}
	return resource{
		ID: v.ID, Type: "vars",
		Attributes: map[string]any{
			"key": v.Key, "value": value, "description": v.Description, "category": v.Category,
			"hcl": v.HCL, "sensitive": v.Sensitive, "version-id": workspace.VersionID(v.ID, v.ValueVersion, v.UpdatedAt),
		},
		Relationships: map[string]relationship{"configurable": toOne(v.WorkspaceID, "workspaces")},
		Links:         map[string]string{"self": "/api/v2/workspaces/" + v.WorkspaceID + "/vars/" + v.ID},
	}
}

// errVariableDescription: HCP refuses a variable description over 512
// characters, as variable sets here do; /v1 allows 2,000.
var errVariableDescription = fmt.Errorf("%w: description is over %d characters", fault.ErrValidation, varset.MaxDescriptionChars)

// decodeVariable reads a workspace variable document (the same shape as a
// set variable's).
func decodeVariable(c *fiber.Ctx) (workspace.VariablePatch, error) {
	doc, err := decodeVarsetVariable(c)
	if err != nil {
		return workspace.VariablePatch{}, err
	}
	a := doc.Data.Attributes
	if a.Description != nil && utf8.RuneCountInString(*a.Description) > varset.MaxDescriptionChars {
		return workspace.VariablePatch{}, variableError(errVariableDescription)
	}
	return workspace.VariablePatch{Key: a.Key, Category: a.Category, Value: a.Value, Description: a.Description,
		HCL: a.HCL, Sensitive: a.Sensitive}, nil
}

// variableError marks what the domain refuses in a variable request as an
// attribute error (422), as for set variables.
func variableError(err error) error {
	if errors.Is(err, workspace.ErrVariableValueRequired) {
		return fmt.Errorf("%w: %w", errVarsetAttribute, err)
	}
	return varsetError(err)
}

func (s *server) listVariables(c *fiber.Ctx, p access.Principal, o owner) error {
	vars, err := s.Workspaces.ListVariables(c.UserContext(), p, o.WorkspaceID)
	if err != nil {
		return s.writeError(c, err)
	}
	return writePage(c, vars, variableResource)
}

// writePage writes the requested page of items, each rendered as a
// resource, with its pagination.
func writePage[T any](c *fiber.Ctx, items []T, render func(T) resource) error {
	page, meta := pageOf(c, items)
	data := make([]resource, 0, len(page))
	for _, v := range page {
		data = append(data, render(v))
	}
	return writeWithIncluded(c, http.StatusOK, data, nil, meta)
}

func (s *server) createVariable(c *fiber.Ctx, p access.Principal, o owner) error {
	in, err := decodeVariable(c)
	if err != nil {
		return s.writeError(c, err)
	}
	if in.Key == nil || in.Category == nil {
		return s.writeError(c, errInvalidDocument)
	}
	// A variable created without a value has the empty one.
	value := ""
	if in.Value != nil {
		value = *in.Value
	}
	create := workspace.VariableInput{Key: *in.Key, Category: *in.Category, Value: &value}
	if in.Description != nil {
		create.Description = *in.Description
	}
	if in.HCL != nil {
		create.HCL = *in.HCL
	}
	if in.Sensitive != nil {
		create.Sensitive = *in.Sensitive
	}
	ctx := c.UserContext()
	var v workspace.Variable
	err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		v, err = s.Workspaces.CreateVariable(ctx, tx, p, o.WorkspaceID, create)
		return err
	})
	if err != nil {
		return s.writeError(c, variableError(err))
	}
	return writeData(c, http.StatusCreated, variableResource(v))
}

func (s *server) readVariable(c *fiber.Ctx, p access.Principal, o owner) error {
	v, err := s.Workspaces.Variable(c.UserContext(), p, o.WorkspaceID, c.Params("var"))
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, variableResource(v))
}

func (s *server) updateVariable(c *fiber.Ctx, p access.Principal, o owner) error {
	patch, err := decodeVariable(c)
	if err != nil {
		return s.writeError(c, err)
	}
	ctx := c.UserContext()
	var v workspace.Variable
	err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		v, err = s.Workspaces.PatchVariable(ctx, tx, p, o.WorkspaceID, c.Params("var"), patch)
		return err
	})
	if err != nil {
		return s.writeError(c, variableError(err))
	}
	return writeData(c, http.StatusOK, variableResource(v))
}

func (s *server) deleteVariable(c *fiber.Ctx, p access.Principal, o owner) error {
	ctx := c.UserContext()
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		v, err := s.Workspaces.Variable(ctx, p, o.WorkspaceID, c.Params("var"))
		if err != nil {
			return err
		}
		_, err = s.Workspaces.DeleteVariable(ctx, tx, p, v.ID)
		return err
	})
	if err != nil {
		return s.writeError(c, variableError(err))
	}
	return c.SendStatus(http.StatusNoContent)
}

// listAllVariables is /workspaces/{id}/all-vars: the value of each
// category and key a new run of the workspace gets, from the workspace or
// a variable set (the same precedence run creation uses); the values they
// win over are left out.
func (s *server) listAllVariables(c *fiber.Ctx, p access.Principal, o owner) error {
	ctx := c.UserContext()
	cands, err := s.VariableSets.Effective(ctx, p, o.WorkspaceID)
	if err != nil {
		return s.writeError(c, err)
	}
	own, err := s.Workspaces.ListVariables(ctx, p, o.WorkspaceID)
	if err != nil {
		return s.writeError(c, err)
	}
	byID := map[string]resource{}
	for _, v := range own {
		byID[v.ID] = variableResource(v)
	}
	data := []resource{}
	for _, cand := range cands {
		if !cand.Wins {
			continue
		}
		if cand.Source == workspace.SourceVariableSet {
			if _, ok := byID[cand.ID]; !ok {
				v, err := s.VariableSets.Variable(ctx, p, cand.SourceID, cand.ID)
				if err != nil {
					return s.writeError(c, err)
				}
				byID[cand.ID] = varsetVariableResource(v)
			}
		}
		data = append(data, byID[cand.ID])
	}
	return writePage(c, data, func(r resource) resource { return r })
}
