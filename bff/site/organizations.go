package site

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/cairn/bff/apiclient"
)

type organization struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Slug   string `json:"slug"`
	Role   string `json:"role"`
	Active bool   `json:"active"`
}

type orgMember struct {
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	Name   string `json:"name"`
	Role   string `json:"role"`
	// JoinedVia is how they arrived (password, sso, scim); Deactivated
	// says their account is deactivated (by SCIM).
	JoinedVia   string `json:"joinedVia"`
	Deactivated bool   `json:"deactivated"`
}

// Arrival words how a member arrived, or "" when the API did not say.
func (m orgMember) Arrival() string {
	switch m.JoinedVia {
	case "password":
		return "Password"
	case "sso":
		return "SSO"
	case "scim":
		return "SCIM"
	}
	return ""
}

// invitation is an invitation as the identity server lists it.
type invitation struct {
	ID               string    `json:"id"`
	OrganizationName string    `json:"organization_name"`
	Email            string    `json:"email"`
	Role             string    `json:"role"`
	InviterName      string    `json:"inviter_name"`
	Status           string    `json:"status"`
	ExpiresAt        time.Time `json:"expires_at"`
}

// createdInvitation is shown once, right after it was made: its link holds
// the token, which the API never answers again.
type createdInvitation struct {
	Email string
	Role  string
	Link  string
}

type organizationsPage struct {
	Organizations []organization
	ActiveID      string
	Members       []orgMember
	Error         string
	Notice        string
	// ForYou are the open invitations to the signed-in account's e-mail;
	// ForYouUnavailable says they could not be read.
	ForYou            []invitation
	ForYouUnavailable bool
	// InviteRoles is what the active role may invite as (none: no invite
	// form); Pending are the active organization's open invitations.
	InviteRoles        []string
	Pending            []invitation
	PendingUnavailable bool
	Created            *createdInvitation
	// MembersUnavailable says the member list could not be read; Self is
	// the signed-in user, whose own row offers no role change or removal.
	MembersUnavailable bool
	Self               string
	Tab                string
	// ConfirmRemove names the member whose removal awaits confirmation.
	ConfirmRemove string
}

// doneNotices are the notices an action redirects back with; the query
// only picks one, so the page never repeats request input.
var doneNotices = map[string]string{
	"accepted": "Invitation accepted: the organization is now active.",
	"declined": "Invitation declined.",
	"revoked":  "Invitation revoked.",
	"role":     "Role changed. It applies from the member's next request.",
	"removed":  "Member removed. Their sessions and tokens in this organization stop working.",
}

func (s *Site) organizations(w http.ResponseWriter, r *http.Request, token string) {
	s.renderOrganizations(w, r, token, organizationsPage{Notice: doneNotices[r.URL.Query().Get("done")]})
}

// withoutOrganization reports whether a refusal is only the session having
// no active organization (a new account), which the organizations page
// resolves: create one or accept an invitation.
func (s *Site) withoutOrganization(r *http.Request, token string, err error) bool {
	if apiclient.StatusOf(err) != http.StatusForbidden {
		return false
	}
	var current struct {
		Session struct {
			ActiveOrganizationID *string `json:"active_organization_id"`
		} `json:"session"`
	}
	return s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/get-session", nil, &current) == nil &&
		current.Session.ActiveOrganizationID == nil
}

// renderOrganizations renders the organizations page around what the
// caller already decided to say (an error, a notice, a new invitation).
func (s *Site) renderOrganizations(w http.ResponseWriter, r *http.Request, token string, page organizationsPage) {
	f := s.frame(r, "Organizations")
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/organization/list", nil, &page.Organizations); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	var current apiSession
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/get-session", nil, &current); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Self, page.Tab = current.User.ID, "general"
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/organization/list-user-invitations", nil, &page.ForYou); err != nil {
		page.ForYouUnavailable = true
	}
	if current.Session.ActiveOrganizationID != nil {
		page.ActiveID = *current.Session.ActiveOrganizationID
		if err := s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/organization/list-members", nil, &page.Members); err != nil {
			page.MembersUnavailable = true
		}
		for _, o := range page.Organizations {
			if o.ID == page.ActiveID {
				page.InviteRoles = inviteRoles(o.Role)
			}
		}
		if len(page.InviteRoles) > 0 {
			if err := s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/organization/list-invitations", nil, &page.Pending); err != nil {
				page.PendingUnavailable = true
			}
		}
	}
	f.Page = page
	s.render(w, r, http.StatusOK, "organizations.html", f)
}

// inviteRoles lists the roles a member may invite as, following the
// README's table: owners and admins manage members, only owners grant
// owner. The first is the form's default: member, which reaches only what
// teams grant (HCP's default). The API enforces the same; this only shapes
// the form.
func inviteRoles(role string) []string {
	switch role {
	case "owner":
		return []string{"member", "reader", "writer", "admin", "owner"}
	case "admin":
		return []string{"member", "reader", "writer", "admin"}
	}
	return nil
}

func (s *Site) createOrganization(w http.ResponseWriter, r *http.Request, token string) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	slug := strings.TrimSpace(r.PostFormValue("slug"))
	err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/organization/create", map[string]string{"name": name, "slug": slug}, nil)
	if err != nil {
		message := "The organization could not be created."
		if apiclient.StatusOf(err) == http.StatusConflict {
			message = "That short name is taken; choose another."
		}
		s.renderOrganizations(w, r, token, organizationsPage{Error: message})
		return
	}
	http.Redirect(w, r, "/welcome", http.StatusSeeOther)
}

func (s *Site) setActiveOrganization(w http.ResponseWriter, r *http.Request, token string) {
	err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/organization/set-active",
		map[string]string{"organization_id": r.PostFormValue("organization_id")}, nil)
	if err != nil {
		s.renderOrganizations(w, r, token, organizationsPage{Error: "That organization could not be activated."})
		return
	}
	http.Redirect(w, r, "/runs", http.StatusSeeOther)
}

// inviteMember invites an address into the active organization and shows
// the invitation link once, for the inviter to hand to the invitee.
func (s *Site) inviteMember(w http.ResponseWriter, r *http.Request, token string) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	role := r.PostFormValue("role")
	var out struct {
		Invitation invitation `json:"invitation"`
		Token      string     `json:"token"`
	}
	err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/organization/invite-member",
		map[string]string{"email": email, "role": role}, &out)
	if err != nil {
		message := "The invitation could not be created."
		switch apiclient.CodeOf(err) {
		case "MEMBER_EXISTS":
			message = "That address already belongs to a member."
		case "INVITATION_PENDING":
			message = "That address already has an open invitation; revoke it to invite again."
		case "TOO_MANY_INVITATIONS":
			message = "The organization has too many open invitations; revoke some first."
		case "VALIDATION_FAILED":
			message = "Check the email address and the role."
		case "FORBIDDEN":
			message = "Your role cannot invite members with that role."
		}
		s.renderOrganizations(w, r, token, organizationsPage{Error: message})
		return
	}
	s.renderOrganizations(w, r, token, organizationsPage{Created: &createdInvitation{
		Email: out.Invitation.Email, Role: out.Invitation.Role,
		Link: s.opts.Origin + "/invitations/" + url.PathEscape(out.Invitation.ID) + "?token=" + url.QueryEscape(out.Token),
	}})
}

func (s *Site) revokeInvitation(w http.ResponseWriter, r *http.Request, token string) {
	err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/organization/cancel-invitation",
		map[string]string{"invitation_id": r.PathValue("id")}, nil)
	if err != nil {
		s.renderOrganizations(w, r, token, organizationsPage{Error: "That invitation could not be revoked; it may already be closed."})
		return
	}
	http.Redirect(w, r, "/organizations?done=revoked", http.StatusSeeOther)
}

type invitationPage struct {
	ID         string
	Token      string
	SignedIn   bool
	Email      string
	Invitation *invitation
}

// invitation is the page an invitation link opens. Accepting needs the
// account with the invited address and the link's token; the page only
// shows what the signed-in account may act on.
func (s *Site) invitation(w http.ResponseWriter, r *http.Request) {
	f := s.frame(r, "Invitation")
	page := invitationPage{ID: r.PathValue("id"), Token: r.URL.Query().Get("token")}
	// The link carries a secret. Pages are never cached, and the dashboard's
	// Referrer-Policy (same-origin) keeps the URL from other sites;
	// no-referrer would make the browser send "Origin: null" with the forms.
	token, ok := s.sessions.APIToken(r.Context())
	if ok {
		page.SignedIn = true
		var mine []invitation
		if err := s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/organization/list-user-invitations", nil, &mine); err != nil {
			s.unavailable(w, r, f, err)
			return
		}
		for i := range mine {
			if mine[i].ID == page.ID {
				page.Invitation = &mine[i]
			}
		}
		var current struct {
			User struct {
				Email string `json:"email"`
			} `json:"user"`
		}
		_ = s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/get-session", nil, &current)
		page.Email = current.User.Email
	}
	f.Page = page
	s.render(w, r, http.StatusOK, "invitation.html", f)
}

// invitationToken reads the token from the form: the token itself or the
// whole invitation link pasted into the field.
func invitationToken(raw string) string {
	raw = strings.TrimSpace(raw)
	if u, err := url.Parse(raw); err == nil && u.Query().Get("token") != "" {
		return u.Query().Get("token")
	}
	return raw
}

func (s *Site) acceptInvitation(w http.ResponseWriter, r *http.Request, token string) {
	err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/organization/accept-invitation",
		map[string]string{"invitation_id": r.PathValue("id"), "token": invitationToken(r.PostFormValue("token"))}, nil)
	if err != nil {
		message := "The invitation could not be accepted."
		switch apiclient.CodeOf(err) {
		case "NOT_FOUND":
			message = "That invitation code does not match an invitation to your account's address."
		case "INVITATION_NOT_PENDING":
			message = "That invitation is no longer open; ask for a new one."
		case "INVITATION_EXPIRED":
			message = "That invitation has expired; ask for a new one."
		case "MEMBER_EXISTS":
			message = "You are already a member of that organization."
		}
		s.renderOrganizations(w, r, token, organizationsPage{Error: message})
		return
	}
	// Accepting made the organization active.
	http.Redirect(w, r, "/organizations?done=accepted", http.StatusSeeOther)
}

// declineInvitation declines with the link's token, as accepting does: an
// account registered under someone else's address must not be able to
// close their invitations.
func (s *Site) declineInvitation(w http.ResponseWriter, r *http.Request, token string) {
	err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/organization/reject-invitation",
		map[string]string{"invitation_id": r.PathValue("id"), "token": invitationToken(r.PostFormValue("token"))}, nil)
	if err != nil {
		message := "The invitation could not be declined; it may no longer be open."
		if apiclient.CodeOf(err) == "NOT_FOUND" {
			message = "That invitation code does not match an invitation to your account's address."
		}
		s.renderOrganizations(w, r, token, organizationsPage{Error: message})
		return
	}
	http.Redirect(w, r, "/organizations?done=declined", http.StatusSeeOther)
}

// changeMemberRole changes a member's role; the identity server decides
// who may grant what (only owners grant or take the owner role).
func (s *Site) changeMemberRole(w http.ResponseWriter, r *http.Request, token string) {
	err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/organization/update-member-role",
		map[string]string{"user_id": r.PathValue("userId"), "role": r.PostFormValue("role")}, nil)
	if err != nil {
		s.renderOrganizations(w, r, token, organizationsPage{Error: memberRefusal(err, "The role could not be changed.")})
		return
	}
	http.Redirect(w, r, "/organizations?done=role", http.StatusSeeOther)
}

// removeMember needs a second, explicit confirmation.
func (s *Site) removeMember(w http.ResponseWriter, r *http.Request, token string) {
	if r.PostFormValue("confirm") != "yes" {
		s.renderOrganizations(w, r, token, organizationsPage{ConfirmRemove: r.PathValue("userId")})
		return
	}
	err := s.api.Call(r.Context(), token, http.MethodPost, "/api/auth/organization/remove-member",
		map[string]string{"user_id": r.PathValue("userId")}, nil)
	if err != nil {
		s.renderOrganizations(w, r, token, organizationsPage{Error: memberRefusal(err, "The member could not be removed.")})
		return
	}
	http.Redirect(w, r, "/organizations?done=removed", http.StatusSeeOther)
}

func memberRefusal(err error, fallback string) string {
	switch apiclient.StatusOf(err) {
	case http.StatusForbidden:
		return "Your role cannot make that change (only owners grant, change or remove the owner role)."
	case http.StatusConflict:
		return "That would leave the organization without an owner."
	case http.StatusNotFound:
		return "That member is no longer in the organization."
	}
	return fallback
}

// projectsPage lists the organization's projects.
type projectsPage struct {
	Tab      string
	Projects []project
	MoreURL  string
	Error    string
	CanWrite bool
	// Counts are workspaces per project among the first page of
	// workspaces.
	Counts map[string]int
}

func (s *Site) projects(w http.ResponseWriter, r *http.Request, token string) {
	s.renderProjects(w, r, token, http.StatusOK, "")
}

func (s *Site) renderProjects(w http.ResponseWriter, r *http.Request, token string, status int, message string) {
	f := s.frame(r, "Projects")
	page := projectsPage{Tab: "projects", Error: message, Counts: map[string]int{}}
	c, err := s.callerFor(r.Context(), token, f)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.CanWrite = c.Can("project:write")
	path := "/v1/projects?limit=100"
	if cur := r.URL.Query().Get("cursor"); cur != "" {
		path += "&cursor=" + url.QueryEscape(cur)
	}
	list, err := apiclient.List[project](r.Context(), s.api, token, path)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Projects = list.Data
	if list.NextCursor != "" {
		page.MoreURL = "/organization/projects?cursor=" + url.QueryEscape(list.NextCursor)
	}
	workspaces, err := s.reachableWorkspaces(r.Context(), token)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	for _, ws := range workspaces {
		page.Counts[ws.ProjectID]++
	}
	f.Page = page
	s.render(w, r, status, "org-projects.html", f)
}

func (s *Site) createProject(w http.ResponseWriter, r *http.Request, token string) {
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/projects", newKey(),
		map[string]string{"name": strings.TrimSpace(r.PostFormValue("name"))}, nil)
	if err != nil {
		message := refusal(err)
		if apiclient.StatusOf(err) == http.StatusConflict {
			message = "A project with that name already exists."
		}
		s.renderProjects(w, r, token, refusedStatus(err), message)
		return
	}
	http.Redirect(w, r, "/organization/projects", http.StatusSeeOther)
}

// sortChoices orders filter choices by name.
func sortChoices(c []actorChoice) {
	slices.SortFunc(c, func(a, b actorChoice) int { return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) })
}
