package site

import (
	"net/http"
	"time"
)

// orgSettingsPage is the organization's settings.
type orgSettingsPage struct {
	Tab          string
	Organization struct {
		ID                   string    `json:"id"`
		Name                 string    `json:"name"`
		Slug                 string    `json:"slug"`
		DefaultExecutionMode string    `json:"default_execution_mode"`
		CreatedAt            time.Time `json:"created_at"`
	}
	CanManage bool
	Modes     []string
	Notice    string
	Error     string
}

func (s *Site) organizationSettings(w http.ResponseWriter, r *http.Request, token string) {
	page := orgSettingsPage{}
	if r.URL.Query().Get("done") == "saved" {
		page.Notice = "Saved. Workspaces created from now on without a mode take it; existing ones keep theirs."
	}
	s.renderOrganizationSettings(w, r, token, http.StatusOK, page)
}

func (s *Site) renderOrganizationSettings(w http.ResponseWriter, r *http.Request, token string, status int, page orgSettingsPage) {
	f := s.frame(r, "Organization settings")
	page.Tab, page.Modes = "settings", []string{"remote", "local"}
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/v1/organization", nil, &page.Organization); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	c, err := s.callerFor(r.Context(), token, f)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.CanManage = c.Can("member:manage")
	f.Page = page
	s.render(w, r, status, "org-settings.html", f)
}

func (s *Site) updateOrganizationSettings(w http.ResponseWriter, r *http.Request, token string) {
	err := s.api.Mutate(r.Context(), token, http.MethodPatch, "/v1/organization", newKey(),
		map[string]string{"default_execution_mode": r.PostFormValue("default_execution_mode")}, nil)
	if err != nil {
		s.renderOrganizationSettings(w, r, token, refusedStatus(err), orgSettingsPage{Error: refusal(err)})
		return
	}
	http.Redirect(w, r, "/organization/settings?done=saved", http.StatusSeeOther)
}
