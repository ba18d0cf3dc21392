package audit

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/cursor"
)

// Service reads an organization's audit trail.
type Service struct {
	db *sqlx.DB
}

// NewService returns the audit reader.
func NewService(conn *sqlx.DB) *Service { return &Service{db: conn} }

// Filter narrows an audit list; an empty field matches every event.
type Filter struct {
	// Action is an exact event type such as "user_token.created".
	Action string
	// ActorID is the exact ID of who caused the event.
	ActorID string
}

// List reads one page of the principal's organization's events, newest
// first, that match filter.
func (s *Service) List(ctx context.Context, p access.Principal, filter Filter, page cursor.Page) ([]Event, error) {
	if err := p.Require(access.PermAuditRead); err != nil {
		return nil, err
	}
	return listEvents(ctx, s.db, p.OrganizationID, filter, page)
}
