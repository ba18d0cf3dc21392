package site

import (
	"context"
	"net/http"
	"net/url"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/bff/apiclient"
)

// surfaceKey marks a request admitted only to its exact workspace or run
// surface (a dark canary); frame reads it so no page of that request shows
// organization navigation, whichever handler renders it.
type surfaceKey struct{}

// scope names which launch-access probe a route group calls (SPEC §1
// rule 11): the organization-wide one, or the exact workspace or run named
// by the route's {id}.
type scope int

const (
	scopeOrganization scope = iota
	scopeWorkspace
	scopeRun
)

func (sc scope) probePath(r *http.Request) string {
	switch sc {
	case scopeWorkspace:
		return "/workspaces/" + url.PathEscape(r.PathValue("id"))
	case scopeRun:
		return "/runs/" + url.PathEscape(r.PathValue("id"))
	}
	return ""
}

// admission runs the route group's probe. An exact probe that admits says
// whether the whole organization is open or only this surface; anything
// but "open" is treated as the canary, so an answer the dashboard does not
// understand never widens what it shows.
func (s *Site) admission(ctx context.Context, token string, sc scope, r *http.Request) (canary bool, err error) {
	var out struct {
		Admission string `json:"admission"`
	}
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/launch-access"+sc.probePath(r), nil, &out); err != nil {
		return false, err
	}
	return sc != scopeOrganization && out.Admission != "open", nil
}

// admitted runs h only after the route group's launch-access probe admits
// the request: page reads, form posts and the Changes view alike. A
// refusal renders "unavailable" with the upstream status, request ID and
// Retry-After, and no organization navigation.
func (s *Site) admitted(sc scope, h func(http.ResponseWriter, *http.Request, string)) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, token string) {
		canary, err := s.admission(r.Context(), token, sc, r)
		if err != nil {
			f := s.frame(r, "Unavailable")
			f.Nav = false
			s.unavailable(w, r, f, err)
			return
		}
		if canary {
			r = r.WithContext(context.WithValue(r.Context(), surfaceKey{}, true))
		}
		h(w, r, token)
	}
}

// writeRefusal answers a non-page request with a refusal's status and the
// headers the dashboard boundary preserves.
func writeRefusal(w http.ResponseWriter, err error) {
	status := apiclient.StatusOf(err)
	if e, ok := err.(*apiclient.Error); ok {
		if e.RetryAfter != "" {
			w.Header().Set("Retry-After", e.RetryAfter)
		}
		if e.RequestID != "" {
			w.Header().Set("X-Request-Id", e.RequestID)
		}
	}
	if status < 400 {
		status = http.StatusBadGateway
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, http.StatusText(status), status)
}

// canaryOnly reports whether the request was admitted only to its exact
// surface.
func canaryOnly(ctx context.Context) bool {
	v, _ := ctx.Value(surfaceKey{}).(bool)
	return v
}

// caller is who is looking at a page: the role in the active organization
// and what it may do. Pages offer only the controls it allows; the API
// decides again on every request.
type caller struct {
	Role   string
	userID string
	perms  access.PermissionSet
}

// Can reports whether the caller holds the named permission.
func (c caller) Can(permission string) bool { return c.perms.Has(access.Permission(permission)) }

// apiSession is the part of the API session a caller is read from.
type apiSession struct {
	Role *string `json:"role"`
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	Session struct {
		ActiveOrganizationID *string `json:"active_organization_id"`
	} `json:"session"`
}

// caller reads the session's role in its active organization. Failing to
// read it fails the page: guessing would either hide what the caller may
// do or offer what they may not.
func (s *Site) caller(ctx context.Context, token string) (caller, error) {
	var current apiSession
	if err := s.api.Call(ctx, token, http.MethodGet, "/api/auth/get-session", nil, &current); err != nil {
		return caller{}, err
	}
	return callerOf(current.Role, current.User.ID), nil
}

// callerFor is caller, reusing the role the page's navigation already read
// in this request.
func (s *Site) callerFor(ctx context.Context, token string, f frame) (caller, error) {
	if f.Switcher != nil {
		return callerOf(f.Switcher.role, f.Switcher.userID), nil
	}
	return s.caller(ctx, token)
}

// effectiveCaller is callerFor with what the caller's teams add, as the
// API derives it from the one mapping (their own member read): their
// teams' organization access, and in workspaceID (when given) their teams'
// grants there and on its project. A role that already holds every
// permission needs no second read.
func (s *Site) effectiveCaller(ctx context.Context, token string, f frame, workspaceID string) (caller, error) {
	c, err := s.callerFor(ctx, token, f)
	if err != nil || c.userID == "" || c.perms.Contains(access.NewPermissionSet(access.AllPermissions()...)) {
		return c, err
	}
	var self memberAccess
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/members/"+url.PathEscape(c.userID), nil, &self); err != nil {
		return caller{}, err
	}
	granted := self.OrganizationPermissions
	for _, w := range self.Workspaces {
		if workspaceID != "" && w.WorkspaceID == workspaceID {
			granted = append(granted, w.Permissions...)
		}
	}
	for _, p := range granted {
		c.perms = c.perms.Union(access.NewPermissionSet(access.Permission(p)))
	}
	return c, nil
}

// callerOf maps a role to what it may do; no role or an unknown one may do
// nothing.
func callerOf(name *string, userID string) caller {
	if name == nil {
		return caller{userID: userID, perms: access.NewPermissionSet()}
	}
	role, err := access.ParseRole(*name)
	if err != nil {
		return caller{userID: userID, perms: access.NewPermissionSet()}
	}
	return caller{Role: string(role), userID: userID, perms: access.PermissionsOf(role)}
}
