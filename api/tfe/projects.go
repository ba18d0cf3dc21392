package tfe

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/workspace"
)

// Projects on /api/v2 are Cairn's projects in HCP Terraform's shape. The
// project service decides who sees and changes what; a project the caller
// cannot read answers like a missing one.

func (s *server) registerProjects(r fiber.Router) {
	r.Get("/organizations/:org/projects", s.guard(s.byOrganization, s.listProjects))
	r.Post("/organizations/:org/projects", s.guard(s.byOrganization, s.createProject))
	r.Get("/projects/:id", s.guard(s.byProject, s.readProject))
	r.Patch("/projects/:id", s.guard(s.byProject, s.updateProject))
	r.Delete("/projects/:id", s.guardStop(s.byProject, s.deleteProject))
}

func (s *server) byProject(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, '' FROM projects x JOIN organizations o ON o.id = x.organization_id
		WHERE x.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

// projectNamePattern is HCP Terraform's rule for project names, which
// clients of this protocol expect to be held to.
var projectNamePattern = regexp.MustCompile(`^[A-Za-z0-9 _-]+$`)

var errProjectName = fmt.Errorf("project name: %w", fault.ErrValidation)

// projectDocument is a project create or update request.
type projectDocument struct {
	Data struct {
		Type       string `json:"type"`
		Attributes struct {
			Name        *string `json:"name"`
			Description *string `json:"description"`
		} `json:"attributes"`
	} `json:"data"`
}

// decodeProject reads a project document; a name outside HCP's
// characters is refused with HCP's sentence.
func decodeProject(c *fiber.Ctx) (projectDocument, error) {
	var doc projectDocument
	if err := decodeDocument(c, &doc); err != nil {
		return doc, err
	}
	if doc.Data.Type != "projects" {
		return doc, errInvalidDocument
	}
	if n := doc.Data.Attributes.Name; n != nil && !projectNamePattern.MatchString(strings.TrimSpace(*n)) {
		return doc, errProjectName
	}
	return doc, nil
}

func projectResource(p access.Principal, o owner, proj workspace.Project) resource {
	on := p.PermissionsOnProject(proj.ID)
	in := p.PermissionsIn("", proj.ID)
	return resource{
		ID: proj.ID, Type: "projects",
		Attributes: map[string]any{
			"name": proj.Name, "description": proj.Description, "created-at": timestamp(proj.CreatedAt),
			"is-unified": false, "auto-destroy-activity-duration": nil,
			"permissions": map[string]bool{
				"can-read": on.Has(access.PermProjectRead), "can-update": on.Has(access.PermProjectWrite),
				"can-destroy": on.Has(access.PermProjectWrite), "can-create-workspace": in.Has(access.PermWorkspaceWrite),
			},
		},
		Relationships: map[string]relationship{"organization": toOne(o.OrganizationSlug, "organizations")},
		Links:         map[string]string{"self": "/api/v2/projects/" + proj.ID},
	}
}

func (s *server) listProjects(c *fiber.Ctx, p access.Principal, o owner) error {
	var names []string
	if v := c.Query("filter[names]"); v != "" {
		names = strings.Split(v, ",")
	}
	projects, err := s.Workspaces.SearchProjects(c.UserContext(), p, names, c.Query("q"))
	if err != nil {
		return s.writeError(c, err)
	}
	page, meta := pageOf(c, projects)
	data := make([]resource, 0, len(page))
	for _, proj := range page {
		data = append(data, projectResource(p, o, proj))
	}
	return writeWithIncluded(c, http.StatusOK, data, nil, meta)
}

func (s *server) createProject(c *fiber.Ctx, p access.Principal, o owner) error {
	doc, err := decodeProject(c)
	if err != nil {
		return s.writeError(c, err)
	}
	a := doc.Data.Attributes
	if a.Name == nil {
		return s.writeError(c, errInvalidDocument)
	}
	description := ""
	if a.Description != nil {
		description = *a.Description
	}
	ctx := c.UserContext()
	var proj workspace.Project
	err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		proj, err = s.Workspaces.CreateDescribedProject(ctx, tx, p, *a.Name, description)
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusCreated, projectResource(p, o, proj))
}

func (s *server) readProject(c *fiber.Ctx, p access.Principal, o owner) error {
	proj, err := s.Workspaces.ProjectWith(c.UserContext(), p, c.Params("id"), access.PermProjectRead)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, projectResource(p, o, proj))
}

func (s *server) updateProject(c *fiber.Ctx, p access.Principal, o owner) error {
	doc, err := decodeProject(c)
	if err != nil {
		return s.writeError(c, err)
	}
	a := doc.Data.Attributes
	ctx := c.UserContext()
	var proj workspace.Project
	err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		proj, err = s.Workspaces.UpdateProject(ctx, tx, p, c.Params("id"),
			workspace.UpdateProjectInput{Name: a.Name, Description: a.Description})
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, projectResource(p, o, proj))
}

func (s *server) deleteProject(c *fiber.Ctx, p access.Principal, _ owner) error {
	ctx := c.UserContext()
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		_, err := s.Workspaces.DeleteProject(ctx, tx, p, c.Params("id"))
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return c.SendStatus(http.StatusNoContent)
}
