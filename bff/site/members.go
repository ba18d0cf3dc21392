package site

import (
	"net/http"
	"net/url"
)

// memberAccess is a member's effective access as /v1 derives it from the
// one mapping: their teams, and the workspaces the viewer can read with
// what the member may do there and through what.
type memberAccess struct {
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	Name   string `json:"name"`
	Role   string `json:"role"`
	Teams  []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"teams"`
	Workspaces []struct {
		WorkspaceID   string   `json:"workspace_id"`
		WorkspaceName string   `json:"workspace_name"`
		ProjectID     string   `json:"project_id"`
		Permissions   []string `json:"permissions"`
		Via           []string `json:"via"`
	} `json:"workspaces"`
	OrganizationPermissions []string `json:"organization_permissions"`
}

// memberPage is one member of the organization and their access.
type memberPage struct {
	Tab    string
	Member memberAccess
}

// memberPage shows a member's teams and effective access; the API decides
// who may read it (team managers, member managers, the member).
func (s *Site) memberPage(w http.ResponseWriter, r *http.Request, token string) {
	f := s.frame(r, "Member")
	page := memberPage{Tab: "general"}
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/v1/members/"+url.PathEscape(r.PathValue("userId")), nil, &page.Member); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	f.Title, f.Page = page.Member.Name, page
	s.render(w, r, http.StatusOK, "org-member.html", f)
}
