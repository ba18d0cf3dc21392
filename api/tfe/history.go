package tfe

import (
	"context"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/run"
)

// A run's history and comments as HCP Terraform clients read them: every
// actor shows as a user, named as the run service names it.

func (s *server) byComment(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, r.workspace_id FROM run_comments m JOIN runs r ON r.id = m.run_id
		JOIN organizations o ON o.id = r.organization_id WHERE m.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

func (s *server) byRunEvent(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, r.workspace_id FROM run_events e JOIN runs r ON r.id = e.run_id
		JOIN organizations o ON o.id = r.organization_id WHERE e.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

// userResource shows an actor as the protocol's user.
func (s *server) userResource(ctx context.Context, kind, id string) resource {
	return resource{ID: id, Type: "users", Attributes: map[string]any{"username": s.Runs.ActorNameOf(ctx, kind, id),
		"is-service-account": kind == access.KindServiceAccount}}
}

func commentResource(m run.Comment) resource {
	return resource{ID: m.ID, Type: "comments", Attributes: map[string]any{"body": m.Body, "created-at": timestamp(m.CreatedAt)},
		Relationships: map[string]relationship{"run-event": {Data: nil}}}
}

// eventDescriptions say what each status a run entered means.
var eventDescriptions = map[string]string{
	run.EventCommented: "Run commented", "pending": "Run created", "plan_queued": "Plan queued", "planning": "Plan started",
	"planned": "Plan finished", "apply_queued": "Apply queued", "applying": "Apply started", "applied": "Apply finished",
	"planned_and_finished": "Run finished after planning", "errored": "Run errored", "canceled": "Run canceled",
	"discarded": "Run discarded", "policy_override": "Policy override required",
}

func eventResource(e run.Event) resource {
	action := e.Action
	if action != run.EventCommented {
		action = tfeStatus(run.Status(action))
	}
	desc, ok := eventDescriptions[action]
	if !ok {
		desc = "Run " + action
	}
	actor := relationship{Data: nil}
	if e.ActorKind != nil && e.ActorID != nil {
		actor = toOne(*e.ActorID, "users")
	}
	comment := relationship{Data: nil}
	if e.CommentID != nil {
		comment = toOne(*e.CommentID, "comments")
	}
	return resource{ID: e.ID, Type: "run-events",
		Attributes:    map[string]any{"action": action, "created-at": timestamp(e.CreatedAt), "description": desc},
		Relationships: map[string]relationship{"actor": actor, "comment": comment}}
}

// eventDocument renders events (data a list, or one event when single),
// with their actors and comments when asked (include=actor,comment).
func (s *server) eventDocument(c *fiber.Ctx, events []run.Event, single bool) (map[string]any, error) {
	ctx := c.UserContext()
	data := make([]resource, len(events))
	included := []resource{}
	seen := map[string]bool{}
	var commentIDs []string
	for i, e := range events {
		data[i] = eventResource(e)
		if includes(c, "actor") && e.ActorKind != nil && e.ActorID != nil && !seen[*e.ActorID] {
			seen[*e.ActorID] = true
			included = append(included, s.userResource(ctx, *e.ActorKind, *e.ActorID))
		}
		if includes(c, "comment") && e.CommentID != nil {
			commentIDs = append(commentIDs, *e.CommentID)
		}
	}
	if len(commentIDs) > 0 {
		comments, err := s.Runs.CommentsByID(ctx, events[0].OrganizationID, commentIDs)
		if err != nil {
			return nil, err
		}
		for _, id := range commentIDs {
			if m, ok := comments[id]; ok {
				included = append(included, commentResource(m))
			}
		}
	}
	doc := map[string]any{"data": data}
	if single && len(data) == 1 {
		doc["data"] = data[0]
	}
	if len(included) > 0 {
		doc["included"] = included
	}
	return doc, nil
}

func (s *server) runEvents(c *fiber.Ctx, p access.Principal, o owner) error {
	events, err := s.Runs.Events(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	doc, err := s.eventDocument(c, events, false)
	if err != nil {
		return s.writeError(c, err)
	}
	doc["meta"] = paginate(1, max(len(events), 1), len(events))
	return writeDocument(c, http.StatusOK, doc)
}

func (s *server) readRunEvent(c *fiber.Ctx, p access.Principal, o owner) error {
	e, err := s.Runs.GetEvent(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	doc, err := s.eventDocument(c, []run.Event{e}, true)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeDocument(c, http.StatusOK, doc)
}

func (s *server) runComments(c *fiber.Ctx, p access.Principal, o owner) error {
	comments, err := s.Runs.Comments(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	data := make([]resource, len(comments))
	for i, m := range comments {
		data[i] = commentResource(m)
	}
	return writeDocument(c, http.StatusOK, map[string]any{"data": data, "meta": paginate(1, max(len(data), 1), len(data))})
}

func (s *server) commentRun(c *fiber.Ctx, p access.Principal, o owner) error {
	var doc struct {
		Data struct {
			Attributes struct {
				Body string `json:"body"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	ctx := c.UserContext()
	var m run.Comment
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		m, err = s.Runs.CommentRun(ctx, tx, p, c.Params("id"), doc.Data.Attributes.Body)
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusCreated, commentResource(m))
}

func (s *server) readComment(c *fiber.Ctx, p access.Principal, o owner) error {
	m, err := s.Runs.GetComment(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, commentResource(m))
}
