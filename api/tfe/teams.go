package tfe

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/team"
)

// Teams on /api/v2 are HCP Terraform's: a team's members are users (a
// user's username is its Cairn user ID, which never changes) and, for the
// organization-memberships spelling, membership IDs (membershipID), which
// also name open invitations put in the team.

func (s *server) registerTeams(r fiber.Router) {
	r.Get("/organizations/:org/teams", s.guard(s.byOrganization, s.listTeams))
	r.Post("/organizations/:org/teams", s.guard(s.byOrganization, s.createTeam))
	r.Get("/teams/:id", s.guard(s.byTeam, s.readTeam))
	r.Patch("/teams/:id", s.guard(s.byTeam, s.updateTeam))
	r.Delete("/teams/:id", s.guardStop(s.byTeam, s.deleteTeam))
	r.Post("/teams/:id/relationships/users", s.guard(s.byTeam, s.changeTeamMembers(true, "users")))
	r.Delete("/teams/:id/relationships/users", s.guardStop(s.byTeam, s.changeTeamMembers(false, "users")))
	r.Post("/teams/:id/relationships/organization-memberships",
		s.guard(s.byTeam, s.changeTeamMembers(true, "organization-memberships")))
	r.Delete("/teams/:id/relationships/organization-memberships",
		s.guardStop(s.byTeam, s.changeTeamMembers(false, "organization-memberships")))
	r.Get("/account/details", s.accountDetails)
}

func (s *server) byTeam(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, '' FROM teams t JOIN organizations o ON o.id = t.organization_id
		WHERE t.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

// byOwnOrganization resolves requests about the caller itself to its own
// organization; the operator has none.
func (s *server) byOwnOrganization(ctx context.Context, _ *fiber.Ctx, p access.Principal) (owner, error) {
	if p.Kind == access.KindOperator {
		return owner{}, nil
	}
	return s.project(ctx, p, `SELECT o.id, o.slug, '' FROM organizations o WHERE o.id = $1 AND ($2 = '' OR o.id = $2)`,
		p.OrganizationID)
}

var errInvalidInclude = fmt.Errorf("invalid include parameter: %w", fault.ErrValidation)

// strictIncludes reads the include parameter; any value but the allowed ones is
// refused, as HCP Terraform does.
func strictIncludes(c *fiber.Ctx, allowed ...string) (map[string]bool, error) {
	out := map[string]bool{}
	raw := c.Query("include")
	if raw == "" {
		return out, nil
	}
	for _, v := range strings.Split(raw, ",") {
		v = strings.TrimSpace(v)
		if !slices.Contains(allowed, v) {
			return nil, errInvalidInclude
		}
		out[v] = true
	}
	return out, nil
}

func organizationAccessAttributes(o access.OrganizationAccess) map[string]bool {
	return map[string]bool{
		"manage-policies": o.ManagePolicies, "manage-policy-overrides": o.ManagePolicyOverrides,
		"manage-workspaces": o.ManageWorkspaces, "manage-projects": o.ManageProjects,
		"manage-vcs-settings": o.ManageVCSSettings, "manage-providers": o.ManageProviders,
		"manage-modules": o.ManageModules, "manage-run-tasks": o.ManageRunTasks,
		"read-workspaces": o.ReadWorkspaces, "read-projects": o.ReadProjects,
		"manage-membership": o.ManageMembership, "manage-teams": o.ManageTeams,
		"manage-organization-access": o.ManageOrganizationAccess, "access-secret-teams": o.AccessSecretTeams,
		"manage-agent-pools": o.ManageAgentPools,
	}
}

// organizationAccessInput is the organization-access attribute as sent:
// absent flags keep their values.
type organizationAccessInput struct {
	ManagePolicies           *bool `json:"manage-policies"`
	ManagePolicyOverrides    *bool `json:"manage-policy-overrides"`
	ManageWorkspaces         *bool `json:"manage-workspaces"`
	ManageProjects           *bool `json:"manage-projects"`
	ManageVCSSettings        *bool `json:"manage-vcs-settings"`
	ManageProviders          *bool `json:"manage-providers"`
	ManageModules            *bool `json:"manage-modules"`
	ManageRunTasks           *bool `json:"manage-run-tasks"`
	ReadWorkspaces           *bool `json:"read-workspaces"`
	ReadProjects             *bool `json:"read-projects"`
	ManageMembership         *bool `json:"manage-membership"`
	ManageTeams              *bool `json:"manage-teams"`
	ManageOrganizationAccess *bool `json:"manage-organization-access"`
	AccessSecretTeams        *bool `json:"access-secret-teams"`
	ManageAgentPools         *bool `json:"manage-agent-pools"`
}

func (in *organizationAccessInput) patch() team.OrganizationAccessPatch {
	if in == nil {
		return team.OrganizationAccessPatch{}
	}
	return team.OrganizationAccessPatch{
		ManagePolicies: in.ManagePolicies, ManagePolicyOverrides: in.ManagePolicyOverrides,
		ManageWorkspaces: in.ManageWorkspaces, ManageProjects: in.ManageProjects, ManageVCSSettings: in.ManageVCSSettings,
		ManageProviders: in.ManageProviders, ManageModules: in.ManageModules, ManageRunTasks: in.ManageRunTasks,
		ReadWorkspaces: in.ReadWorkspaces, ReadProjects: in.ReadProjects, ManageMembership: in.ManageMembership,
		ManageTeams: in.ManageTeams, ManageOrganizationAccess: in.ManageOrganizationAccess,
		AccessSecretTeams: in.AccessSecretTeams, ManageAgentPools: in.ManageAgentPools,
	}
}

// teamDocument is a team create or update request.
type teamDocument struct {
	Data struct {
		Type       string `json:"type"`
		Attributes struct {
			Name                       *string                  `json:"name"`
			SSOTeamID                  *string                  `json:"sso-team-id"`
			Visibility                 *string                  `json:"visibility"`
			AllowMemberTokenManagement *bool                    `json:"allow-member-token-management"`
			OrganizationAccess         *organizationAccessInput `json:"organization-access"`
		} `json:"attributes"`
	} `json:"data"`
}

// teamResource renders a team with its members as relationships (the
// users and, for the same people and the team's open invitations, their
// organization memberships).
func teamResource(p access.Principal, t team.Team, members []team.Member, invitees []team.Invitee) resource {
	users := make([]ref, 0, len(members))
	memberships := make([]ref, 0, len(members)+len(invitees))
	for _, m := range members {
		users = append(users, ref{ID: m.UserID, Type: "users"})
		memberships = append(memberships, ref{ID: membershipID(t.OrganizationID, memberSubject(m)), Type: "organization-memberships"})
	}
	for _, i := range invitees {
		memberships = append(memberships, ref{ID: membershipID(t.OrganizationID, i.InvitationID), Type: "organization-memberships"})
	}
	manage := p.Require(access.PermTeamManage) == nil
	var sso any
	if t.SSOTeamID != nil {
		sso = *t.SSOTeamID
	}
	return resource{
		ID: t.ID, Type: "teams",
		Attributes: map[string]any{
			"name": t.Name, "visibility": t.Visibility, "sso-team-id": sso, "is-unified": false,
			"users-count": len(members), "allow-member-token-management": t.AllowMemberTokenManagement,
			"organization-access": organizationAccessAttributes(t.OrganizationAccess),
			"permissions":         map[string]bool{"can-destroy": manage && !t.Owners, "can-update-membership": manage},
		},
		Relationships: map[string]relationship{
			"users": {Data: users}, "organization-memberships": {Data: memberships},
		},
		Links: map[string]string{"self": "/api/v2/teams/" + t.ID},
	}
}

// userResource renders a member as an HCP user: its username is its
// user ID.
func userResource(m team.Member) resource {
	return resource{
		ID: m.UserID, Type: "users",
		Attributes: map[string]any{
			"username": m.UserID, "email": m.Email, "avatar-url": "", "is-service-account": false,
			"two-factor": map[string]bool{"enabled": false, "verified": false}, "unconfirmed-email": "", "v2-only": false,
		},
		Links: map[string]string{"self": "/api/v2/users/" + m.UserID},
	}
}

// memberIncludes renders the included resources a team's include asks for.
func memberIncludes(o owner, members []team.Member, invitees []team.Invitee, want map[string]bool) []resource {
	var out []resource
	for _, m := range members {
		if want["users"] {
			out = append(out, userResource(m))
		}
		if want["organization-memberships"] {
			out = append(out, membershipResource(o, identity.RosterEntry{Subject: memberSubject(m), Status: identity.RosterActive,
				Email: m.Email, UserID: &m.UserID, InvitationID: m.InvitationID}, nil))
		}
	}
	for _, i := range invitees {
		if want["organization-memberships"] {
			out = append(out, membershipResource(o, identity.RosterEntry{Subject: i.InvitationID, Status: identity.RosterInvited,
				Email: i.Email, InvitationID: &i.InvitationID}, nil))
		}
	}
	return out
}

func writeWithIncluded(c *fiber.Ctx, status int, data any, included []resource, meta map[string]any) error {
	doc := map[string]any{"data": data}
	if len(included) > 0 {
		doc["included"] = included
	}
	if meta != nil {
		doc["meta"] = meta
	}
	return writeDocument(c, status, doc)
}

// teamPeople reads a team's members and open invitations (the caller has
// checked that the principal may see the team).
func teamPeople(ctx context.Context, q sqlx.QueryerContext, teamID string) ([]team.Member, []team.Invitee, error) {
	members, err := team.MembersIn(ctx, q, teamID)
	if err != nil {
		return nil, nil, err
	}
	invitees, err := team.InviteesIn(ctx, q, teamID)
	return members, invitees, err
}

func (s *server) listTeams(c *fiber.Ctx, p access.Principal, o owner) error {
	want, err := strictIncludes(c, "users", "organization-memberships")
	if err != nil {
		return s.writeError(c, err)
	}
	f := team.ListFilter{Query: c.Query("q")}
	if names := c.Query("filter[names]"); names != "" {
		f.Names = strings.Split(names, ",")
	}
	ctx := c.UserContext()
	teams, err := s.Teams.List(ctx, p, f)
	if err != nil {
		return s.writeError(c, err)
	}
	number, size := pageParams(c)
	start := min((number-1)*size, len(teams))
	page := teams[start:min(start+size, len(teams))]
	data := make([]resource, 0, len(page))
	var included []resource
	for _, t := range page {
		members, invitees, err := teamPeople(ctx, s.DB, t.ID)
		if err != nil {
			return s.writeError(c, err)
		}
		data = append(data, teamResource(p, t, members, invitees))
		included = append(included, memberIncludes(o, members, invitees, want)...)
	}
	return writeWithIncluded(c, http.StatusOK, data, included, paginate(number, size, len(teams)))
}

func (s *server) createTeam(c *fiber.Ctx, p access.Principal, _ owner) error {
	var doc teamDocument
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	a := doc.Data.Attributes
	if doc.Data.Type != "teams" || a.Name == nil {
		return s.writeError(c, errInvalidDocument)
	}
	in := team.CreateInput{Name: *a.Name, SSOTeamID: a.SSOTeamID, AllowMemberTokenManagement: a.AllowMemberTokenManagement,
		OrganizationAccess: a.OrganizationAccess.patch()}
	if a.Visibility != nil {
		in.Visibility = *a.Visibility
	}
	ctx := c.UserContext()
	var t team.Team
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		t, err = s.Teams.Create(ctx, tx, p, in)
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusCreated, teamResource(p, t, nil, nil))
}

func (s *server) readTeam(c *fiber.Ctx, p access.Principal, o owner) error {
	want, err := strictIncludes(c, "users", "organization-memberships")
	if err != nil {
		return s.writeError(c, err)
	}
	ctx := c.UserContext()
	t, err := s.Teams.Get(ctx, p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	members, invitees, err := teamPeople(ctx, s.DB, t.ID)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeWithIncluded(c, http.StatusOK, teamResource(p, t, members, invitees), memberIncludes(o, members, invitees, want), nil)
}

func (s *server) updateTeam(c *fiber.Ctx, p access.Principal, _ owner) error {
	var doc teamDocument
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	a := doc.Data.Attributes
	if doc.Data.Type != "teams" {
		return s.writeError(c, errInvalidDocument)
	}
	in := team.UpdateInput{Name: a.Name, Visibility: a.Visibility, AllowMemberTokenManagement: a.AllowMemberTokenManagement,
		OrganizationAccess: a.OrganizationAccess.patch()}
	if a.SSOTeamID != nil && *a.SSOTeamID == "" {
		in.ClearSSOTeamID = true
	} else {
		in.SSOTeamID = a.SSOTeamID
	}
	ctx := c.UserContext()
	var t team.Team
	var members []team.Member
	var invitees []team.Invitee
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		if t, err = s.Teams.Update(ctx, tx, p, c.Params("id"), in); err != nil {
			return err
		}
		members, invitees, err = teamPeople(ctx, tx, t.ID)
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, teamResource(p, t, members, invitees))
}

func (s *server) deleteTeam(c *fiber.Ctx, p access.Principal, _ owner) error {
	ctx := c.UserContext()
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		_, err := s.Teams.Delete(ctx, tx, p, c.Params("id"))
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return c.SendStatus(http.StatusNoContent)
}

// changeTeamMembers adds or removes members named by username (users) or
// by membership ID (organization-memberships, which also name open
// invitations: an invitee joins the team on accepting).
func (s *server) changeTeamMembers(add bool, typ string) handler {
	return func(c *fiber.Ctx, p access.Principal, o owner) error {
		var doc struct {
			Data []ref `json:"data"`
		}
		if err := decodeDocument(c, &doc); err != nil {
			return s.writeError(c, err)
		}
		if len(doc.Data) == 0 {
			return s.writeError(c, errInvalidDocument)
		}
		ids := make([]string, 0, len(doc.Data))
		for _, r := range doc.Data {
			if r.Type != typ {
				return s.writeError(c, errInvalidDocument)
			}
			id := r.ID
			if typ == "organization-memberships" {
				// A membership of another organization names nobody here.
				org, subject, ok := parseMembershipID(r.ID)
				if !ok || org != o.OrganizationID {
					return s.writeError(c, fault.ErrNotFound)
				}
				id = subject
			}
			ids = append(ids, id)
		}
		ctx := c.UserContext()
		err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
			userIDs, invitationIDs := ids, []string(nil)
			if typ == "organization-memberships" {
				var err error
				if userIDs, invitationIDs, err = team.ResolveMemberships(ctx, tx, o.OrganizationID, ids); err != nil {
					return err
				}
			}
			if add {
				if err := s.Teams.AddMembers(ctx, tx, p, c.Params("id"), userIDs); err != nil {
					return err
				}
				return s.Teams.AddInvitees(ctx, tx, p, c.Params("id"), invitationIDs)
			}
			if err := s.Teams.RemoveMembers(ctx, tx, p, c.Params("id"), userIDs); err != nil {
				return err
			}
			return s.Teams.RemoveInvitees(ctx, tx, p, c.Params("id"), invitationIDs)
		})
		if err != nil {
			return s.writeError(c, err)
		}
		return c.SendStatus(http.StatusNoContent)
	}
}

// accountDetails is the calling user (go-tfe reads its username here).
// Only people have an account; an account-wide token's is its person's, an
// organization-bound token's is the member it acts as.
func (s *server) accountDetails(c *fiber.Ctx) error {
	p, err := s.authenticate(c)
	if err != nil {
		return s.writeError(c, err)
	}
	if p.Account {
		if err := httpx.CheckQuery(c); err != nil {
			return s.writeError(c, err)
		}
		// Admitted like the organization list: through at least one of
		// the person's organizations that launch control lets in.
		if _, err := s.admittedAccountOrganizations(c.UserContext(), p); err != nil {
			return s.writeError(c, err)
		}
		u, err := s.Identity.Account(c.UserContext(), p)
		if err != nil {
			return s.writeError(c, err)
		}
		return writeData(c, http.StatusOK, userResource(team.Member{UserID: u.ID, Name: u.Name, Email: u.Email}))
	}
	return s.guard(s.byOwnOrganization, func(c *fiber.Ctx, p access.Principal, o owner) error {
		if p.Kind != access.KindUser {
			return s.writeError(c, fault.ErrNotFound)
		}
		m, err := team.MemberOf(c.UserContext(), s.DB, o.OrganizationID, p.ID)
		if err != nil {
			return s.writeError(c, err)
		}
		return writeData(c, http.StatusOK, userResource(m))
	})(c)
}
