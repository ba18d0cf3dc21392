package site

import (
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/bff/apiclient"
)

// team is a team as /v1 reads it.
type team struct {
	ID                 string          `json:"id"`
	Name               string          `json:"name"`
	Visibility         string          `json:"visibility"`
	SSOTeamID          *string         `json:"sso_team_id"`
	Owners             bool            `json:"owners"`
	OrganizationAccess map[string]bool `json:"organization_access"`
	MemberCount        int             `json:"member_count"`
	CreatedAt          time.Time       `json:"created_at"`
}

// teamMember is one member of a team.
type teamMember struct {
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	Name   string `json:"name"`
	Role   string `json:"role"`
}

// teamVisibilities are the visibilities a team may have (HCP's).
var teamVisibilities = []string{"secret", "organization"}

// organizationAccessFlags are the organization-access flags in the order
// the one mapping (access.OrganizationAccess) declares them, so the form
// offers every flag the API knows and no other.
var organizationAccessFlags = func() []string {
	var flags []string
	t := reflect.TypeFor[access.OrganizationAccess]()
	for i := range t.NumField() {
		flags = append(flags, t.Field(i).Tag.Get("json"))
	}
	return flags
}()

// organizationAccessForm reads the flag checkboxes: a flag not ticked is
// false, so saving the form sets every flag.
func organizationAccessForm(r *http.Request) map[string]bool {
	out := make(map[string]bool, len(organizationAccessFlags))
	for _, flag := range organizationAccessFlags {
		out[flag] = r.PostFormValue("access_"+flag) == "on"
	}
	return out
}

// teamRefusal explains a refused team change without the API's text.
func teamRefusal(err error) string {
	switch apiclient.CodeOf(err) {
	case "TEAM_NAME_TAKEN":
		return "Another team already has that name."
	case "TEAM_SSO_TEAM_ID_TAKEN":
		return "Another team already has that SSO team ID."
	case "TEAM_ACCESS_EXISTS":
		return "That team already has access here: change its level instead."
	case "OWNERS_TEAM_FIXED":
		return "The owners team cannot be deleted or renamed, and its organization access is fixed."
	case "OWNERS_TEAM_EMPTY":
		return "The owners team keeps at least one member."
	case "VALIDATION_FAILED":
		return "Check what you entered: the API refused it as invalid."
	}
	if apiclient.StatusOf(err) == http.StatusNotFound {
		return "That team, member or grant no longer exists, or you cannot see it."
	}
	return refusal(err)
}

// teamsPage lists the organization's teams.
type teamsPage struct {
	Tab         string
	Teams       []team
	MoreURL     string
	Error       string
	Notice      string
	CanManage   bool
	CanAccess   bool
	Visibility  []string
	AccessFlags []string
}

// NewTeam is the create form's team: secret, as HCP creates one.
func (p teamsPage) NewTeam() teamPage {
	return teamPage{Team: team{Visibility: "secret"}, Visibility: p.Visibility, AccessFlags: p.AccessFlags, CanAccess: p.CanAccess}
}

func (s *Site) teams(w http.ResponseWriter, r *http.Request, token string) {
	page := teamsPage{}
	if r.URL.Query().Get("done") == "deleted" {
		page.Notice = "Team deleted. Its members lose what it granted on their next request."
	}
	s.renderTeams(w, r, token, http.StatusOK, page)
}

func (s *Site) renderTeams(w http.ResponseWriter, r *http.Request, token string, status int, page teamsPage) {
	f := s.frame(r, "Teams")
	page.Tab, page.Visibility, page.AccessFlags = "teams", teamVisibilities, organizationAccessFlags
	c, err := s.effectiveCaller(r.Context(), token, f, "")
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.CanManage, page.CanAccess = c.Can(string(access.PermTeamManage)), c.Can(string(access.PermTeamOrganizationAccess))
	path := "/v1/teams?limit=100"
	if cur := r.URL.Query().Get("cursor"); cur != "" {
		path += "&cursor=" + url.QueryEscape(cur)
	}
	list, err := apiclient.List[team](r.Context(), s.api, token, path)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Teams = list.Data
	if list.NextCursor != "" {
		page.MoreURL = "/organization/teams?cursor=" + url.QueryEscape(list.NextCursor)
	}
	f.Page = page
	s.render(w, r, status, "org-teams.html", f)
}

// teamBody is a create or update body from the team form: name,
// visibility and SSO team ID, and the organization access when the form
// offered it (only to who may set it, and never for the owners team, which
// holds every permission whatever its flags say). An empty SSO team ID is
// left out of a new team and clears an existing one's (the API clears it
// on an empty string).
func teamBody(r *http.Request, update bool) map[string]any {
	body := map[string]any{"name": strings.TrimSpace(r.PostFormValue("name")), "visibility": r.PostFormValue("visibility")}
	if sso := strings.TrimSpace(r.PostFormValue("sso_team_id")); sso != "" {
		body["sso_team_id"] = sso
	} else if update {
		body["sso_team_id"] = ""
	}
	if r.PostFormValue("organization_access") == "shown" {
		body["organization_access"] = organizationAccessForm(r)
	}
	return body
}

func (s *Site) createTeam(w http.ResponseWriter, r *http.Request, token string) {
	var created team
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/teams", newKey(), teamBody(r, false), &created)
	if err != nil {
		s.renderTeams(w, r, token, refusedStatus(err), teamsPage{Error: teamRefusal(err)})
		return
	}
	http.Redirect(w, r, teamPath(created.ID)+"?done=created", http.StatusSeeOther)
}

func teamPath(id string) string { return "/organization/teams/" + url.PathEscape(id) }

// teamPage is one team: its settings, organization access and members.
type teamPage struct {
	Tab         string
	Team        team
	Members     []teamMember
	Candidates  []orgMember
	Notice      string
	Error       string
	CanManage   bool
	CanAccess   bool
	Visibility  []string
	AccessFlags []string
	// ConfirmDelete asks for the second, explicit confirmation.
	ConfirmDelete bool
}

// teamNotices are the notices a team action redirects back with.
var teamNotices = map[string]string{
	"created":        "Team created. Add its members and grant it access to workspaces or projects.",
	"saved":          "Team saved. Its members' access follows on their next request.",
	"member-added":   "Member added. They gain the team's access on their next request.",
	"member-removed": "Member removed. They lose the team's access on their next request.",
}

func (s *Site) teamPage(w http.ResponseWriter, r *http.Request, token string) {
	s.renderTeam(w, r, token, http.StatusOK, teamPage{Notice: teamNotices[r.URL.Query().Get("done")]})
}

func (s *Site) renderTeam(w http.ResponseWriter, r *http.Request, token string, status int, page teamPage) {
	f := s.frame(r, "Team")
	ctx := r.Context()
	page.Tab, page.Visibility, page.AccessFlags = "teams", teamVisibilities, organizationAccessFlags
	id := url.PathEscape(r.PathValue("teamId"))
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/teams/"+id, nil, &page.Team); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	f.Title = page.Team.Name
	c, err := s.effectiveCaller(ctx, token, f, "")
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.CanManage, page.CanAccess = c.Can(string(access.PermTeamManage)), c.Can(string(access.PermTeamOrganizationAccess))
	var members struct {
		Items []teamMember `json:"items"`
	}
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/teams/"+id+"/members", nil, &members); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Members = members.Items
	if page.CanManage {
		everyone, err := s.organizationMembers(r, token)
		if err != nil {
			s.unavailable(w, r, f, err)
			return
		}
		for _, m := range everyone {
			if !slices.ContainsFunc(page.Members, func(t teamMember) bool { return t.UserID == m.UserID }) {
				page.Candidates = append(page.Candidates, m)
			}
		}
	}
	f.Page = page
	s.render(w, r, status, "org-team.html", f)
}

// organizationMembers lists the active organization's members (/v1).
func (s *Site) organizationMembers(r *http.Request, token string) ([]orgMember, error) {
	var members struct {
		Items []orgMember `json:"items"`
	}
	err := s.api.Call(r.Context(), token, http.MethodGet, "/v1/members", nil, &members)
	return members.Items, err
}

// teamAction runs a team mutation and redirects back to the team with
// done, or renders the team page again with the refusal.
func (s *Site) teamAction(w http.ResponseWriter, r *http.Request, token, method, path string, body any, done string) {
	if err := s.api.Mutate(r.Context(), token, method, path, newKey(), body, nil); err != nil {
		s.renderTeam(w, r, token, refusedStatus(err), teamPage{Error: teamRefusal(err)})
		return
	}
	http.Redirect(w, r, teamPath(r.PathValue("teamId"))+"?done="+done, http.StatusSeeOther)
}

func (s *Site) updateTeam(w http.ResponseWriter, r *http.Request, token string) {
	s.teamAction(w, r, token, http.MethodPatch, "/v1/teams/"+url.PathEscape(r.PathValue("teamId")), teamBody(r, true), "saved")
}

func (s *Site) addTeamMember(w http.ResponseWriter, r *http.Request, token string) {
	s.teamAction(w, r, token, http.MethodPost, "/v1/teams/"+url.PathEscape(r.PathValue("teamId"))+"/members",
		map[string][]string{"user_ids": {r.PostFormValue("user_id")}}, "member-added")
}

func (s *Site) removeTeamMember(w http.ResponseWriter, r *http.Request, token string) {
	s.teamAction(w, r, token, http.MethodDelete, "/v1/teams/"+url.PathEscape(r.PathValue("teamId"))+"/members/"+url.PathEscape(r.PathValue("userId")),
		nil, "member-removed")
}

// deleteTeam needs a second, explicit confirmation.
func (s *Site) deleteTeam(w http.ResponseWriter, r *http.Request, token string) {
	if r.PostFormValue("confirm") != "yes" {
		s.renderTeam(w, r, token, http.StatusOK, teamPage{ConfirmDelete: true})
		return
	}
	err := s.api.Mutate(r.Context(), token, http.MethodDelete, "/v1/teams/"+url.PathEscape(r.PathValue("teamId")), newKey(), nil, nil)
	if err != nil {
		s.renderTeam(w, r, token, refusedStatus(err), teamPage{Error: teamRefusal(err)})
		return
	}
	http.Redirect(w, r, "/organization/teams?done=deleted", http.StatusSeeOther)
}
