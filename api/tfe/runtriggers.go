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
	"github.com/cairnhq/cairn/api/trigger"
)

// Run triggers on /api/v2 (REFERENCE §13): a workspace's inbound
// (sources) and outbound (destinations) triggers, created on the
// destination with a sourceable workspace relationship.

func (s *server) registerRunTriggers(r fiber.Router) {
	r.Get("/workspaces/:id/run-triggers", s.guard(s.byWorkspaceID, s.listRunTriggers))
	r.Post("/workspaces/:id/run-triggers", s.guard(s.byWorkspaceID, s.createRunTrigger))
	r.Get("/run-triggers/:id", s.guard(s.byRunTrigger, s.readRunTrigger))
	r.Delete("/run-triggers/:id", s.guardStop(s.byRunTrigger, s.deleteRunTrigger))
}

func (s *server) byRunTrigger(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, t.workspace_id FROM run_triggers t JOIN organizations o ON o.id = t.organization_id
		WHERE t.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

// errTriggerFilter is a run-trigger list without its required type filter.
var errTriggerFilter = fmt.Errorf("run trigger filter: %w", errInvalidDocument)

func runTriggerResource(t trigger.Trigger) resource {
	return resource{
		ID: t.ID, Type: "run-triggers",
		Attributes: map[string]any{
			"created-at": timestamp(t.CreatedAt), "sourceable-name": t.SourceCloudName, "workspace-name": t.WorkspaceCloudName,
		},
		// sourceable is both go-tfe's deprecated relation and its
		// polyrelation: one workspace identifier serves both.
		Relationships: map[string]relationship{
			"workspace": toOne(t.WorkspaceID, "workspaces"), "sourceable": toOne(t.SourceWorkspaceID, "workspaces"),
		},
		Links: map[string]string{"self": "/api/v2/run-triggers/" + t.ID},
	}
}

// runTriggerIncluded renders the workspaces include= asks for, once each;
// one the principal cannot read is left out.
func (s *server) runTriggerIncluded(c *fiber.Ctx, p access.Principal, o owner, ts []trigger.Trigger) ([]resource, error) {
	inc, err := strictIncludes(c, "workspace", "sourceable")
	if err != nil || len(inc) == 0 {
		return nil, err
	}
	ctx := c.UserContext()
	seen := map[string]bool{}
	var out []resource
	add := func(workspaceID string) error {
		if seen[workspaceID] {
			return nil
		}
		seen[workspaceID] = true
		w, err := s.Workspaces.GetWorkspace(ctx, p, workspaceID)
		if errors.Is(err, fault.ErrNotFound) || errors.Is(err, fault.ErrForbidden) {
			return nil
		}
		if err != nil {
			return err
		}
		r, err := s.workspaceResource(ctx, p, o, w)
		out = append(out, r)
		return err
	}
	for _, t := range ts {
		if inc["workspace"] {
			if err := add(t.WorkspaceID); err != nil {
				return nil, err
			}
		}
		if inc["sourceable"] {
			if err := add(t.SourceWorkspaceID); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (s *server) listRunTriggers(c *fiber.Ctx, p access.Principal, o owner) error {
	ctx := c.UserContext()
	var ts []trigger.Trigger
	var err error
	switch c.Query("filter[run-trigger][type]") {
	case "inbound":
		ts, err = s.Triggers.Inbound(ctx, p, o.WorkspaceID)
	case "outbound":
		ts, err = s.Triggers.Outbound(ctx, p, o.WorkspaceID)
	default:
		return s.writeError(c, errTriggerFilter)
	}
	if err != nil {
		return s.writeError(c, err)
	}
	number, size := pageParams(c)
	start := min((number-1)*size, len(ts))
	page := ts[start:min(start+size, len(ts))]
	included, err := s.runTriggerIncluded(c, p, o, page)
	if err != nil {
		return s.writeError(c, err)
	}
	data := make([]resource, 0, len(page))
	for _, t := range page {
		data = append(data, runTriggerResource(t))
	}
	return writeWithIncluded(c, http.StatusOK, data, included, paginate(number, size, len(ts)))
}

// runTriggerDocument is the body of POST workspaces/:id/run-triggers.
type runTriggerDocument struct {
	Data struct {
		Type          string `json:"type"`
		Relationships struct {
			Sourceable relationshipRef `json:"sourceable"`
		} `json:"relationships"`
	} `json:"data"`
}

func (s *server) createRunTrigger(c *fiber.Ctx, p access.Principal, o owner) error {
	var doc runTriggerDocument
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	source := doc.Data.Relationships.Sourceable.Data
	if doc.Data.Type != "run-triggers" || source == nil || source.ID == "" || source.Type != "workspaces" {
		return s.writeError(c, errInvalidDocument)
	}
	ctx := c.UserContext()
	var t trigger.Trigger
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		t, err = s.Triggers.Create(ctx, tx, p, o.WorkspaceID, source.ID)
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusCreated, runTriggerResource(t))
}

func (s *server) readRunTrigger(c *fiber.Ctx, p access.Principal, o owner) error {
	t, err := s.Triggers.Get(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	included, err := s.runTriggerIncluded(c, p, o, []trigger.Trigger{t})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeWithIncluded(c, http.StatusOK, runTriggerResource(t), included, nil)
}

func (s *server) deleteRunTrigger(c *fiber.Ctx, p access.Principal, _ owner) error {
	ctx := c.UserContext()
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		_, err := s.Triggers.Delete(ctx, tx, p, c.Params("id"))
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return c.SendStatus(http.StatusNoContent)
}
