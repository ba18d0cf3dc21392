package tfe

import (
	"context"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/team"
)

// Team access on /api/v2: team-workspaces and team-projects, HCP's fixed
// levels or custom attributes, decided by the one mapping in api/access.

func (s *server) registerTeamAccess(r fiber.Router) {
	r.Get("/team-workspaces", s.guard(s.byFilteredWorkspace, s.listWorkspaceGrants))
	r.Post("/team-workspaces", s.guard(s.byTeamInDocument, s.createWorkspaceGrant))
	r.Get("/team-workspaces/:id", s.guard(s.byWorkspaceGrant, s.readWorkspaceGrant))
	r.Patch("/team-workspaces/:id", s.guard(s.byWorkspaceGrant, s.updateWorkspaceGrant))
	r.Delete("/team-workspaces/:id", s.guardStop(s.byWorkspaceGrant, s.deleteWorkspaceGrant))
	r.Get("/team-projects", s.guard(s.byFilteredProject, s.listProjectGrants))
	r.Post("/team-projects", s.guard(s.byTeamInDocument, s.createProjectGrant))
	r.Get("/team-projects/:id", s.guard(s.byProjectGrant, s.readProjectGrant))
	r.Patch("/team-projects/:id", s.guard(s.byProjectGrant, s.updateProjectGrant))
	r.Delete("/team-projects/:id", s.guardStop(s.byProjectGrant, s.deleteProjectGrant))
}

func (s *server) byFilteredWorkspace(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, w.id FROM workspaces w JOIN organizations o ON o.id = w.organization_id
		WHERE w.id = $1 AND ($2 = '' OR o.id = $2)`, c.Query("filter[workspace][id]"))
}

func (s *server) byFilteredProject(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, '' FROM projects x JOIN organizations o ON o.id = x.organization_id
		WHERE x.id = $1 AND ($2 = '' OR o.id = $2)`, c.Query("filter[project][id]"))
}

func (s *server) byWorkspaceGrant(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, '' FROM team_workspace_access g JOIN organizations o ON o.id = g.organization_id
		WHERE g.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

func (s *server) byProjectGrant(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, '' FROM team_project_access g JOIN organizations o ON o.id = g.organization_id
		WHERE g.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

// grantDocument is a team-workspaces or team-projects request.
type grantDocument struct {
	Data struct {
		Type       string `json:"type"`
		Attributes struct {
			Access           *string `json:"access"`
			Runs             *string `json:"runs"`
			Variables        *string `json:"variables"`
			StateVersions    *string `json:"state-versions"`
			SentinelMocks    *string `json:"sentinel-mocks"`
			WorkspaceLocking *bool   `json:"workspace-locking"`
			RunTasks         *bool   `json:"run-tasks"`
			ProjectAccess    *struct {
				Settings     *string `json:"settings"`
				Teams        *string `json:"teams"`
				VariableSets *string `json:"variable-sets"`
			} `json:"project-access"`
			WorkspaceAccess *struct {
				Runs          *string `json:"runs"`
				Variables     *string `json:"variables"`
				StateVersions *string `json:"state-versions"`
				SentinelMocks *string `json:"sentinel-mocks"`
				Create        *bool   `json:"create"`
				Locking       *bool   `json:"locking"`
				Move          *bool   `json:"move"`
				Delete        *bool   `json:"delete"`
				RunTasks      *bool   `json:"run-tasks"`
			} `json:"workspace-access"`
		} `json:"attributes"`
		Relationships struct {
			Team      relationshipRef `json:"team"`
			Workspace relationshipRef `json:"workspace"`
			Project   relationshipRef `json:"project"`
		} `json:"relationships"`
	} `json:"data"`
}

type relationshipRef struct {
	Data *ref `json:"data"`
}

func (r relationshipRef) id() string {
	if r.Data == nil {
		return ""
	}
	return r.Data.ID
}

func (d grantDocument) workspaceInput() team.WorkspaceAccessInput {
	a := d.Data.Attributes
	in := team.WorkspaceAccessInput{Runs: a.Runs, Variables: a.Variables, StateVersions: a.StateVersions,
		SentinelMocks: a.SentinelMocks, WorkspaceLocking: a.WorkspaceLocking, RunTasks: a.RunTasks}
	if a.Access != nil {
		in.Access = *a.Access
	}
	return in
}

func (d grantDocument) projectInput() team.ProjectAccessInput {
	a := d.Data.Attributes
	var in team.ProjectAccessInput
	if a.Access != nil {
		in.Access = *a.Access
	}
	if pa := a.ProjectAccess; pa != nil {
		in.Settings, in.Teams, in.VariableSets = pa.Settings, pa.Teams, pa.VariableSets
	}
	if wa := a.WorkspaceAccess; wa != nil {
		in.Runs, in.Variables, in.StateVersions, in.SentinelMocks = wa.Runs, wa.Variables, wa.StateVersions, wa.SentinelMocks
		in.Create, in.Locking, in.Move, in.Delete, in.RunTasks = wa.Create, wa.Locking, wa.Move, wa.Delete, wa.RunTasks
	}
	return in
}

const grantDocumentKey = "tfe.grantDocument"

// byTeamInDocument reads a grant request's document (its team names the
// organization) and keeps it for the handler.
func (s *server) byTeamInDocument(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	body, err := httpx.ReadBody(c, documentLimit)
	if err != nil {
		return owner{}, err
	}
	var doc grantDocument
	if err := decodeBody(body, &doc); err != nil {
		return owner{}, err
	}
	c.Locals(grantDocumentKey, doc)
	return s.project(ctx, p, `
		SELECT o.id, o.slug, '' FROM teams t JOIN organizations o ON o.id = t.organization_id
		WHERE t.id = $1 AND ($2 = '' OR o.id = $2)`, doc.Data.Relationships.Team.id())
}

func workspaceGrantResource(g team.WorkspaceGrant) resource {
	return resource{
		ID: g.ID, Type: "team-workspaces",
		Attributes: map[string]any{
			"access": g.Access, "runs": g.Runs, "variables": g.Variables, "state-versions": g.StateVersions,
			"sentinel-mocks": g.SentinelMocks, "workspace-locking": g.WorkspaceLocking, "run-tasks": g.RunTasks,
		},
		Relationships: map[string]relationship{
			"team": toOne(g.TeamID, "teams"), "workspace": toOne(g.WorkspaceID, "workspaces"),
		},
		Links: map[string]string{"self": "/api/v2/team-workspaces/" + g.ID},
	}
}

func projectGrantResource(g team.ProjectGrant) resource {
	return resource{
		ID: g.ID, Type: "team-projects",
		Attributes: map[string]any{
			"access": g.Access,
			"project-access": map[string]string{
				"settings": g.Settings, "teams": g.Teams, "variable-sets": g.VariableSets,
			},
			"workspace-access": map[string]any{
				"runs": g.Runs, "variables": g.Variables, "state-versions": g.StateVersions, "sentinel-mocks": g.SentinelMocks,
				"create": g.Create, "locking": g.Locking, "move": g.Move, "delete": g.Delete, "run-tasks": g.RunTasks,
			},
		},
		Relationships: map[string]relationship{
			"team": toOne(g.TeamID, "teams"), "project": toOne(g.ProjectID, "projects"),
		},
		Links: map[string]string{"self": "/api/v2/team-projects/" + g.ID},
	}
}

// listed renders a grant list: whole unless a page is asked for.
func listed[G any](c *fiber.Ctx, all []G, render func(G) resource) error {
	items := all
	var meta map[string]any
	if c.Query("page[number]") != "" || c.Query("page[size]") != "" {
		number, size := pageParams(c)
		start := min((number-1)*size, len(all))
		items = all[start:min(start+size, len(all))]
		meta = paginate(number, size, len(all))
	}
	data := make([]resource, 0, len(items))
	for _, g := range items {
		data = append(data, render(g))
	}
	return writeWithIncluded(c, http.StatusOK, data, nil, meta)
}

func (s *server) listWorkspaceGrants(c *fiber.Ctx, p access.Principal, o owner) error {
	grants, err := s.Teams.WorkspaceGrants(c.UserContext(), p, o.WorkspaceID)
	if err != nil {
		return s.writeError(c, err)
	}
	return listed(c, grants, workspaceGrantResource)
}

func (s *server) createWorkspaceGrant(c *fiber.Ctx, p access.Principal, _ owner) error {
	doc, _ := c.Locals(grantDocumentKey).(grantDocument)
	if doc.Data.Type != "team-workspaces" || doc.Data.Attributes.Access == nil {
		return s.writeError(c, errInvalidDocument)
	}
	ctx := c.UserContext()
	var g team.WorkspaceGrant
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		g, err = s.Teams.GrantWorkspace(ctx, tx, p, doc.Data.Relationships.Team.id(),
			doc.Data.Relationships.Workspace.id(), doc.workspaceInput())
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusCreated, workspaceGrantResource(g))
}

func (s *server) readWorkspaceGrant(c *fiber.Ctx, p access.Principal, _ owner) error {
	g, err := s.Teams.WorkspaceGrant(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, workspaceGrantResource(g))
}

func (s *server) updateWorkspaceGrant(c *fiber.Ctx, p access.Principal, _ owner) error {
	var doc grantDocument
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	if doc.Data.Type != "team-workspaces" {
		return s.writeError(c, errInvalidDocument)
	}
	ctx := c.UserContext()
	var g team.WorkspaceGrant
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		g, err = s.Teams.UpdateWorkspaceGrant(ctx, tx, p, c.Params("id"), doc.workspaceInput())
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, workspaceGrantResource(g))
}

func (s *server) deleteWorkspaceGrant(c *fiber.Ctx, p access.Principal, _ owner) error {
	ctx := c.UserContext()
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		_, err := s.Teams.RevokeWorkspaceGrant(ctx, tx, p, c.Params("id"))
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return c.SendStatus(http.StatusNoContent)
}

func (s *server) listProjectGrants(c *fiber.Ctx, p access.Principal, _ owner) error {
	grants, err := s.Teams.ProjectGrants(c.UserContext(), p, c.Query("filter[project][id]"))
	if err != nil {
		return s.writeError(c, err)
	}
	return listed(c, grants, projectGrantResource)
}

func (s *server) createProjectGrant(c *fiber.Ctx, p access.Principal, _ owner) error {
	doc, _ := c.Locals(grantDocumentKey).(grantDocument)
	if doc.Data.Type != "team-projects" || doc.Data.Attributes.Access == nil {
		return s.writeError(c, errInvalidDocument)
	}
	ctx := c.UserContext()
	var g team.ProjectGrant
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		g, err = s.Teams.GrantProject(ctx, tx, p, doc.Data.Relationships.Team.id(),
			doc.Data.Relationships.Project.id(), doc.projectInput())
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusCreated, projectGrantResource(g))
}

func (s *server) readProjectGrant(c *fiber.Ctx, p access.Principal, _ owner) error {
	g, err := s.Teams.ProjectGrant(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, projectGrantResource(g))
}

func (s *server) updateProjectGrant(c *fiber.Ctx, p access.Principal, _ owner) error {
	var doc grantDocument
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	if doc.Data.Type != "team-projects" {
		return s.writeError(c, errInvalidDocument)
	}
	ctx := c.UserContext()
	var g team.ProjectGrant
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		g, err = s.Teams.UpdateProjectGrant(ctx, tx, p, c.Params("id"), doc.projectInput())
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, projectGrantResource(g))
}

func (s *server) deleteProjectGrant(c *fiber.Ctx, p access.Principal, _ owner) error {
	ctx := c.UserContext()
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		_, err := s.Teams.RevokeProjectGrant(ctx, tx, p, c.Params("id"))
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return c.SendStatus(http.StatusNoContent)
}
