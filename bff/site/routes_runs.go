package site

import "net/http"

// routeRuns adds the run actions and the first-run pages; each exact run or
// workspace route runs its launch-access probe first, as the other route
// groups do.
func (s *Site) routeRuns(mux *http.ServeMux) {
	mux.HandleFunc("POST /runs/{id}/cancel", s.form(s.signedIn(s.admitted(scopeRun, s.cancel))))
	mux.HandleFunc("POST /runs/{id}/force-execute", s.form(s.signedIn(s.admitted(scopeRun, s.forceExecute))))
	mux.HandleFunc("POST /runs/{id}/release", s.form(s.signedIn(s.admitted(scopeRun, s.release))))
	mux.HandleFunc("POST /runs/{id}/recover", s.form(s.signedIn(s.admitted(scopeRun, s.recoverRun))))
	mux.HandleFunc("GET /welcome", s.signedIn(s.welcome))
	mux.HandleFunc("GET /workspaces/{id}/start", s.signedIn(s.admitted(scopeWorkspace, s.workspaceStart)))
	mux.HandleFunc("POST /workspaces/{id}/cli-token", s.form(s.signedIn(s.admitted(scopeWorkspace, s.mintCLIToken))))
	// Multipart: the archive streams through; the handler checks origin and
	// CSRF itself. The workspace's probe runs before a byte of the archive
	// is read, so a closed surface refuses without an upload.
	mux.HandleFunc("POST /workspaces/{id}/runs", s.signedIn(s.admitted(scopeWorkspace, s.newRun)))
}

// routeStreams adds the downloads, which stream their bodies: they only
// read the session, so the response is never buffered to set a cookie.
func (s *Site) routeStreams(outer *http.ServeMux) {
	outer.Handle("GET /runs/{id}/downloads/redacted-plan", s.sessions.ReadOnly(s.signedIn(s.admitted(scopeRun, s.redactedPlan))))
	outer.Handle("POST /runs/{id}/downloads/{kind}", s.sessions.ReadOnly(s.form(s.signedIn(s.admitted(scopeRun, s.restricted)))))
}
