package site

import (
	"context"
	"net/http"
	"strings"
)

// switcher is the organization switcher in the top navigation.
type switcher struct {
	Organizations []organization
	ActiveID      string
	// role is the session's role in the active organization and userID
	// its user, read with it, so a page need not ask again.
	role   *string
	userID string
}

// Active is the active organization's name, or "" when none is active.
func (sw *switcher) Active() string {
	for _, o := range sw.Organizations {
		if o.ID == sw.ActiveID {
			return o.Name
		}
	}
	return ""
}

// switcher reads the caller's organizations and the active one. It is
// chrome, not content: when it cannot load, the navigation shows a plain
// link to the organizations page instead of a list it cannot vouch for.
func (s *Site) switcher(ctx context.Context, token string) *switcher {
	var sw switcher
	if err := s.api.Call(ctx, token, http.MethodGet, "/api/auth/organization/list", nil, &sw.Organizations); err != nil {
		return nil
	}
	var current apiSession
	if err := s.api.Call(ctx, token, http.MethodGet, "/api/auth/get-session", nil, &current); err != nil {
		return nil
	}
	sw.role, sw.userID = current.Role, current.User.ID
	if current.Session.ActiveOrganizationID != nil {
		sw.ActiveID = *current.Session.ActiveOrganizationID
	}
	return &sw
}

// sectionOf names the main navigation entry a path belongs to, so the
// navigation can say where the reader is.
func sectionOf(path string) string {
	for _, section := range []string{"runs", "workspaces", "organization", "organizations", "registry", "agents"} {
		if path == "/"+section || strings.HasPrefix(path, "/"+section+"/") {
			if section == "organizations" {
				return "organization"
			}
			return section
		}
	}
	return ""
}
