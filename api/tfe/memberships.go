package tfe

import (
	"context"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/team"
)

// Organization memberships on /api/v2 are HCP Terraform's: a member of the
// organization (status active) or an open invitation (status invited).
// Creating one invites an e-mail address through the identity server's
// own invitation path (same checks, same audit events); the invitee joins
// by accepting with the invitation token, which the POST answer carries
// once in its meta, as the identity route shows it once to the inviter.
// An invited membership's user is a placeholder named after the
// invitation (no account is looked up by an unverified address); once
// accepted, the user is the account that accepted.

// membershipID names a membership on /api/v2 (HCP's ou- IDs):
// ou-{organization ID}.{subject}. The subject is the invitation the
// membership started with, so the ID is the same while invited and after
// acceptance (the membership keeps its invitation ID), or the user ID for
// a member who joined without one (an organization's creator). A member's
// ou-{organization ID}.{user ID} is accepted as an alias.
func membershipID(organizationID, subject string) string {
	return "ou-" + organizationID + "." + subject
}

// parseMembershipID returns the organization and subject a membership ID
// names.
func parseMembershipID(v string) (organizationID, subject string, ok bool) {
	rest, ok := strings.CutPrefix(v, "ou-")
	if !ok {
		return "", "", false
	}
	organizationID, subject, ok = strings.Cut(rest, ".")
	return organizationID, subject, ok && organizationID != "" && subject != ""
}

// memberSubject is a team member's membership subject.
func memberSubject(m team.Member) string {
	if m.InvitationID != nil {
		return *m.InvitationID
	}
	return m.UserID
}

func (s *server) registerMemberships(r fiber.Router) {
	r.Get("/organizations/:org/organization-memberships", s.guard(s.byOrganization, s.listMemberships))
	r.Post("/organizations/:org/organization-memberships", s.guard(s.byOrganization, s.createMembership))
	r.Get("/organization-memberships/:id", s.guard(s.byMembership, s.readMembership))
	r.Delete("/organization-memberships/:id", s.guardStop(s.byMembership, s.deleteMembership))
}

// byMembership resolves a membership ID to its organization; the
// membership itself is looked up by the handler, inside it.
func (s *server) byMembership(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	organizationID, _, ok := parseMembershipID(c.Params("id"))
	if !ok {
		return owner{}, nil
	}
	return s.project(ctx, p, `SELECT o.id, o.slug, '' FROM organizations o WHERE o.id = $1 AND ($2 = '' OR o.id = $2)`,
		organizationID)
}

// membershipUserID is the user a membership shows: the member, or the
// invitation's placeholder.
func membershipUserID(e identity.RosterEntry) string {
	if e.UserID != nil {
		return *e.UserID
	}
	return *e.InvitationID
}

func membershipResource(o owner, e identity.RosterEntry, teamIDs []string) resource {
	teams := make([]ref, 0, len(teamIDs))
	for _, id := range teamIDs {
		teams = append(teams, ref{ID: id, Type: "teams"})
	}
	id := membershipID(o.OrganizationID, e.Subject)
	return resource{
		ID: id, Type: "organization-memberships",
		Attributes: map[string]any{"status": e.Status, "email": e.Email},
		Relationships: map[string]relationship{
			"organization": toOne(o.OrganizationSlug, "organizations"),
			"user":         toOne(membershipUserID(e), "users"),
			"teams":        {Data: teams},
		},
		Links: map[string]string{"self": "/api/v2/organization-memberships/" + id},
	}
}

// membershipsDocument renders memberships with their visible teams and
// the includes asked for.
func (s *server) membershipsDocument(ctx context.Context, q sqlx.QueryerContext, p access.Principal, o owner, entries []identity.RosterEntry, want map[string]bool) ([]resource, []resource, error) {
	var userIDs, invitationIDs []string
	for _, e := range entries {
		if e.Status == identity.RosterActive {
			userIDs = append(userIDs, *e.UserID)
		} else {
			invitationIDs = append(invitationIDs, *e.InvitationID)
		}
	}
	teams, err := team.VisibleTeamsOf(ctx, q, p, userIDs, invitationIDs)
	if err != nil {
		return nil, nil, err
	}
	data := make([]resource, 0, len(entries))
	var included []resource
	teamIncluded := map[string]bool{}
	for _, e := range entries {
		teamIDs := teams[membershipUserID(e)]
		data = append(data, membershipResource(o, e, teamIDs))
		if want["user"] {
			included = append(included, userResource(team.Member{UserID: membershipUserID(e), Email: e.Email}))
		}
		if want["teams"] {
			for _, id := range teamIDs {
				if teamIncluded[id] {
					continue
				}
				teamIncluded[id] = true
				t, err := s.Teams.Get(ctx, p, id)
				if err != nil {
					return nil, nil, err
				}
				members, invitees, err := teamPeople(ctx, q, t.ID)
				if err != nil {
					return nil, nil, err
				}
				included = append(included, teamResource(p, t, members, invitees))
			}
		}
	}
	return data, included, nil
}

func (s *server) listMemberships(c *fiber.Ctx, p access.Principal, o owner) error {
	want, err := strictIncludes(c, "user", "teams")
	if err != nil {
		return s.writeError(c, err)
	}
	number, size := pageParams(c)
	f := identity.RosterFilter{Status: c.Query("filter[status]"), Query: c.Query("q"), Offset: (number - 1) * size, Limit: size}
	if emails := c.Query("filter[email]"); emails != "" {
		f.Emails = strings.Split(emails, ",")
	}
	ctx := c.UserContext()
	entries, total, err := s.Identity.Roster(ctx, p, f)
	if err != nil {
		return s.writeError(c, err)
	}
	data, included, err := s.membershipsDocument(ctx, s.DB, p, o, entries, want)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeWithIncluded(c, http.StatusOK, data, included, paginate(number, size, total))
}

func (s *server) readMembership(c *fiber.Ctx, p access.Principal, o owner) error {
	want, err := strictIncludes(c, "user", "teams")
	if err != nil {
		return s.writeError(c, err)
	}
	_, subject, _ := parseMembershipID(c.Params("id"))
	ctx := c.UserContext()
	e, err := s.Identity.RosterEntryOf(ctx, p, subject)
	if err != nil {
		return s.writeError(c, err)
	}
	data, included, err := s.membershipsDocument(ctx, s.DB, p, o, []identity.RosterEntry{e}, want)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeWithIncluded(c, http.StatusOK, data[0], included, nil)
}

// createMembership invites an e-mail address with the member role (HCP's
// default: it reaches what its teams grant) and puts the invitation in
// the teams named, in one transaction. The answer includes the user, as
// HCP Terraform's does.
func (s *server) createMembership(c *fiber.Ctx, p access.Principal, o owner) error {
	var doc struct {
		Data struct {
			Type       string `json:"type"`
			Attributes struct {
				Email *string `json:"email"`
			} `json:"attributes"`
			Relationships struct {
				Teams struct {
					Data []ref `json:"data"`
				} `json:"teams"`
			} `json:"relationships"`
		} `json:"data"`
	}
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	if doc.Data.Type != "organization-memberships" || doc.Data.Attributes.Email == nil {
		return s.writeError(c, errInvalidDocument)
	}
	teamIDs := make([]string, 0, len(doc.Data.Relationships.Teams.Data))
	for _, r := range doc.Data.Relationships.Teams.Data {
		if r.Type != "teams" {
			return s.writeError(c, errInvalidDocument)
		}
		teamIDs = append(teamIDs, r.ID)
	}
	ctx := c.UserContext()
	var entry identity.RosterEntry
	var token string
	var data, included []resource
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		inv, tok, err := s.Identity.InviteMemberTx(ctx, tx, p, *doc.Data.Attributes.Email, access.RoleMember)
		if err != nil {
			return err
		}
		token = tok
		for _, teamID := range teamIDs {
			if err := s.Teams.AddInvitees(ctx, tx, p, teamID, []string{inv.ID}); err != nil {
				return err
			}
		}
		entry = identity.RosterEntry{Subject: inv.ID, Status: identity.RosterInvited, Email: inv.Email,
			InvitationID: &inv.ID, CreatedAt: inv.CreatedAt}
		data, included, err = s.membershipsDocument(ctx, tx, p, o, []identity.RosterEntry{entry}, map[string]bool{"user": true})
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeWithIncluded(c, http.StatusCreated, data[0], included, map[string]any{"invitation-token": token})
}

func (s *server) deleteMembership(c *fiber.Ctx, p access.Principal, _ owner) error {
	_, subject, _ := parseMembershipID(c.Params("id"))
	if err := s.Identity.EndMembership(c.UserContext(), p, subject); err != nil {
		return s.writeError(c, err)
	}
	return c.SendStatus(http.StatusNoContent)
}
