package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/fault"
)

// Roster statuses, as HCP Terraform names a membership's.
const (
	RosterActive  = "active"
	RosterInvited = "invited"
)

// RosterEntry is one membership of an organization in HCP Terraform's
// sense: a member, or someone invited who has not accepted yet.
type RosterEntry struct {
	// Subject names the membership for as long as it lasts: the invitation
	// it started with, which the membership keeps once accepted, or the
	// user ID for a member who joined otherwise (an organization's
	// creator).
	Subject      string    `db:"subject"`
	Status       string    `db:"status"`
	Email        string    `db:"email"`
	UserID       *string   `db:"user_id"`
	InvitationID *string   `db:"invitation_id"`
	CreatedAt    time.Time `db:"created_at"`
}

// RosterFilter narrows a roster. Emails are exact (normalized) addresses;
// Query is a substring of the e-mail or the user ID.
type RosterFilter struct {
	Emails        []string
	Status        string
	Query         string
	Offset, Limit int
}

// rosterQuery is the organization's members and, with $2, its open
// invitations, filtered by e-mails ($3), status ($4), query ($5) and
// subject ($6, which also matches a member's user ID).
const rosterQuery = `WITH roster AS (
		SELECT coalesce(m.invitation_id, m.user_id) AS subject, 'active' AS status, u.email,
		       m.user_id, m.invitation_id, m.created_at
		FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE m.organization_id = $1
		UNION ALL
		SELECT i.id, 'invited', i.email, NULL, i.id, i.created_at
		FROM invitations i
		WHERE $2 AND i.organization_id = $1 AND i.status = 'pending' AND i.expires_at > now()
	) SELECT %s FROM roster
	WHERE (coalesce(cardinality($3::text[]), 0) = 0 OR email = ANY($3))
	  AND ($4 = '' OR status = $4)
	  AND ($5 = '' OR strpos(email, lower($5)) > 0 OR strpos(coalesce(user_id, ''), $5) > 0)
	  AND ($6 = '' OR subject = $6 OR user_id = $6)`

const rosterColumns = `subject, status, email, user_id, invitation_id, created_at`

// Roster lists one page of the principal's organization's memberships,
// oldest first, and how many match. Invitations are shown only to those
// who manage members, as ListInvitations does.
func (s *Service) Roster(ctx context.Context, p access.Principal, f RosterFilter) ([]RosterEntry, int, error) {
	if err := p.Require(access.PermOrganizationRead); err != nil {
		return nil, 0, err
	}
	if f.Status != "" && f.Status != RosterActive && f.Status != RosterInvited {
		return nil, 0, fmt.Errorf("%w: status is %s or %s", ErrInvalidInput, RosterActive, RosterInvited)
	}
	emails := make([]string, 0, len(f.Emails))
	for _, e := range f.Emails {
		e, err := NormalizeEmail(e)
		if err != nil {
			return nil, 0, err
		}
		emails = append(emails, e)
	}
	args := []any{p.OrganizationID, p.Require(access.PermMemberManage) == nil, pq.Array(emails), f.Status, f.Query, ""}
	var total int
	if err := s.db.GetContext(ctx, &total, fmt.Sprintf(rosterQuery, "count(*)"), args...); err != nil {
		return nil, 0, fmt.Errorf("counting memberships: %w", err)
	}
	out := []RosterEntry{}
	err := s.db.SelectContext(ctx, &out, fmt.Sprintf(rosterQuery, rosterColumns)+` ORDER BY created_at, subject LIMIT $7 OFFSET $8`,
		append(args, f.Limit, f.Offset)...)
	if err != nil {
		return nil, 0, fmt.Errorf("listing memberships: %w", err)
	}
	return out, total, nil
}

// RosterEntryOf reads one membership of the principal's organization by
// its subject (or a member's user ID). An invitation the principal may not
// see is not found, like a missing one.
func (s *Service) RosterEntryOf(ctx context.Context, p access.Principal, subject string) (RosterEntry, error) {
	if err := p.Require(access.PermOrganizationRead); err != nil {
		return RosterEntry{}, err
	}
	var e RosterEntry
	err := s.db.GetContext(ctx, &e, fmt.Sprintf(rosterQuery, rosterColumns)+` LIMIT 1`,
		p.OrganizationID, p.Require(access.PermMemberManage) == nil, pq.Array([]string(nil)), "", "", subject)
	if errors.Is(err, sql.ErrNoRows) || subject == "" {
		return RosterEntry{}, fault.ErrNotFound
	}
	if err != nil {
		return RosterEntry{}, fmt.Errorf("reading membership: %w", err)
	}
	return e, nil
}

// EndMembership cancels the invitation a membership is, or removes the
// member, through the same paths (checks and audit events) as the
// identity routes: an owner is removed only by an owner, and never the
// last one.
func (s *Service) EndMembership(ctx context.Context, p access.Principal, subject string) error {
	e, err := s.RosterEntryOf(ctx, p, subject)
	if err != nil {
		return err
	}
	if e.Status == RosterInvited {
		_, err := s.CancelInvitation(ctx, p, *e.InvitationID)
		return err
	}
	return s.RemoveMember(ctx, p, *e.UserID)
}
