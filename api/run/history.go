package run

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/id"
)

// Comment is a note on a run, on its own or given with an approval,
// rejection or cancellation.
type Comment struct {
	ID             string    `db:"id"`
	OrganizationID string    `db:"organization_id"`
	RunID          string    `db:"run_id"`
	Body           string    `db:"body"`
	ActorKind      string    `db:"actor_kind"`
	ActorID        string    `db:"actor_id"`
	CreatedAt      time.Time `db:"created_at"`
}

// Event is one entry of a run's history: a status the run entered (with
// the actor that caused it, when one did) or a comment.
type Event struct {
	ID             string    `db:"id"`
	OrganizationID string    `db:"organization_id"`
	RunID          string    `db:"run_id"`
	Action         string    `db:"action"`
	ActorKind      *string   `db:"actor_kind"`
	ActorID        *string   `db:"actor_id"`
	CommentID      *string   `db:"comment_id"`
	CreatedAt      time.Time `db:"created_at"`
}

// EventCommented is the action of a comment's event; every other action
// is the status the run entered.
const EventCommented = "commented"

// MaxCommentChars bounds a comment body.
const MaxCommentChars = 10000

// maxRunEvents bounds the history one read returns; a run enters a few
// dozen statuses at most, and comments beyond this are not listed.
const maxRunEvents = 500

// CommentRun adds a comment to a run the principal may create runs in.
func (s *Service) CommentRun(ctx context.Context, tx *sqlx.Tx, p access.Principal, runID, body string) (Comment, error) {
	r, err := visibleRun(ctx, tx, p, runID, access.PermRunCreate, true)
	if err != nil {
		return Comment{}, err
	}
	return s.comment(ctx, tx, p, r, body)
}

// CommentDecision adds the comment a decision on r carried (apply,
// discard, cancel); the decision itself was authorized, on r, in tx.
func (s *Service) CommentDecision(ctx context.Context, tx *sqlx.Tx, p access.Principal, r Run, body string) (Comment, error) {
	return s.comment(ctx, tx, p, r, body)
}

func (s *Service) comment(ctx context.Context, tx *sqlx.Tx, p access.Principal, r Run, body string) (Comment, error) {
	body = strings.TrimSpace(body)
	if body == "" || !utf8.ValidString(body) || utf8.RuneCountInString(body) > MaxCommentChars || strings.ContainsRune(body, 0) {
		return Comment{}, fmt.Errorf("%w: a comment is 1 to %d characters of text", ErrInvalid, MaxCommentChars)
	}
	c := Comment{ID: id.New("rcm"), OrganizationID: r.OrganizationID, RunID: r.ID, Body: body, ActorKind: p.Kind,
		ActorID: p.ID, CreatedAt: s.stamp()}
	if err := insertComment(ctx, tx, c); err != nil {
		return Comment{}, err
	}
	return c, audit.Record(ctx, tx, p, "run.commented", "run", r.ID, map[string]any{"comment_id": c.ID})
}

// Comments lists a run's comments, oldest first.
func (s *Service) Comments(ctx context.Context, p access.Principal, runID string) ([]Comment, error) {
	r, err := s.GetRun(ctx, p, runID)
	if err != nil {
		return nil, err
	}
	return commentsOf(ctx, s.db, r.ID)
}

// GetComment reads one comment of a run the principal may read.
func (s *Service) GetComment(ctx context.Context, p access.Principal, commentID string) (Comment, error) {
	// The run's read decides visibility, for the operator too.
	c, err := commentByID(ctx, s.db, commentID)
	if err != nil {
		return Comment{}, err
	}
	if _, err := s.GetRun(ctx, p, c.RunID); err != nil {
		return Comment{}, err
	}
	return c, nil
}

// Events lists a run's history in order.
func (s *Service) Events(ctx context.Context, p access.Principal, runID string) ([]Event, error) {
	r, err := s.GetRun(ctx, p, runID)
	if err != nil {
		return nil, err
	}
	return s.EventsOf(ctx, r)
}

// EventsOf lists the history of a run the caller has already read for
// the principal, as Attempts does.
func (s *Service) EventsOf(ctx context.Context, r Run) ([]Event, error) {
	return eventsOf(ctx, s.db, r.ID)
}

// GetEvent reads one event of a run the principal may read.
func (s *Service) GetEvent(ctx context.Context, p access.Principal, eventID string) (Event, error) {
	e, err := eventByID(ctx, s.db, eventID)
	if err != nil {
		return Event{}, err
	}
	if _, err := s.GetRun(ctx, p, e.RunID); err != nil {
		return Event{}, err
	}
	return e, nil
}

// CommentsByID reads comments of one organization by ID.
func (s *Service) CommentsByID(ctx context.Context, organizationID string, ids []string) (map[string]Comment, error) {
	return commentsByID(ctx, s.db, organizationID, ids)
}

// ActorNameOf resolves an actor's display name for the remote-backend
// protocol, which shows every actor as a user: people and service
// accounts by their names, the operator and a run's own CLI by what they
// are.
func (s *Service) ActorNameOf(ctx context.Context, kind, actorID string) string {
	switch kind {
	case access.KindOperator:
		return "operator"
	case access.KindRun:
		return actorID
	}
	// The protocol shows an actor it cannot name with an empty name; a
	// failed read is shown the same way rather than failing the list.
	if name, _ := s.ActorName(ctx, s.db, "", kind, actorID); name != nil {
		return *name
	}
	return ""
}
