package site

import (
	"net/http"
)

// codeHostPage is the organization's code-host app: its installation, the
// repositories it is granted, and the Install action. The installation
// callback returns here.
type codeHostPage struct {
	Tab          string
	Installation installationStatus
	Repositories []sourceRepository
	// ReposUnavailable says the repository list could not be read.
	ReposUnavailable bool
	CanInstall       bool
	Notice           string
	Error            string
}

// codeHostNotices are what the installation callback redirects back with.
var codeHostNotices = map[string]string{
	"connected": "The code-host app is connected to this organization. Choose a repository in a workspace's source settings.",
}

func (s *Site) codeHost(w http.ResponseWriter, r *http.Request, token string) {
	s.renderCodeHost(w, r, token, http.StatusOK, codeHostPage{Notice: codeHostNotices[r.URL.Query().Get("installation")]})
}

func (s *Site) renderCodeHost(w http.ResponseWriter, r *http.Request, token string, status int, page codeHostPage) {
	f := s.frame(r, "Code host")
	ctx := r.Context()
	page.Tab = "code-host"
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/github/installation", nil, &page.Installation); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	c, err := s.callerFor(ctx, token, f)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.CanInstall = c.Can("vcs:install")
	if page.Installation.Status == "connected" {
		page.ReposUnavailable = s.api.Call(ctx, token, http.MethodGet, "/v1/github/repositories", nil, &page.Repositories) != nil
	}
	f.Page = page
	s.render(w, r, status, "org-code-host.html", f)
}

// installFromCodeHost starts the installation flow from the organization's
// code-host page.
func (s *Site) installFromCodeHost(w http.ResponseWriter, r *http.Request, token string) {
	u, refused := s.installURL(r, token)
	if refused != "" {
		s.renderCodeHost(w, r, token, http.StatusOK, codeHostPage{Error: refused})
		return
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
}
