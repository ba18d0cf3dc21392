package authserver

import (
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/oauth"
	"github.com/cairnhq/cairn/api/platform/clientaddr"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/problem"
	"github.com/cairnhq/cairn/api/scim"
	"github.com/cairnhq/cairn/api/sso"
)

// SessionCookie is the cookie that carries the session token.
const SessionCookie = "__Secure-identity.session_token"

// bodyLimit bounds every identity request document.
const bodyLimit = 65536

// Deps is what the identity server needs. Identity is nil when the
// database or AUTH_SECRET is missing; every route then answers 503.
type Deps struct {
	Identity      *identity.Service
	Logger        *slog.Logger
	SecureCookies bool
	// DashboardURL is the origin federated sign-ins send the browser back to.
	DashboardURL string
	// TrustedProxies may name the client in X-Forwarded-For or Forwarded
	// (CAIRN_TRUSTED_PROXIES); sign-in and sign-up are throttled per client.
	TrustedProxies []netip.Prefix
	// VouchKey checks the client address the dashboard vouches for
	// (clientaddr.VouchHeader); nil believes none.
	VouchKey []byte
	// OAuth is the authorization server for agents; nil (no database or
	// AUTH_SECRET) closes its endpoints with 503.
	OAuth *oauth.Service
	// SCIM is organizations' provisioning; nil closes its routes with 503.
	SCIM *scim.Service
	// SSO is federated sign-in and organization SSO (nil with Identity).
	SSO *sso.Service
}

type server struct {
	Deps
}

// Mount registers the identity routes on router (mounted at /api/auth).
func Mount(router fiber.Router, deps Deps) {
	s := &server{Deps: deps}
	router.Use(s.failClosed)
	router.Post("/sign-up/email", withBody(s, s.signUp))
	router.Post("/sign-in/email", withBody(s, s.signIn))
	router.Post("/sign-out", s.signOut)
	router.Get("/get-session", s.getSession)
	router.Post("/reauthenticate", withBody(s, s.reauthenticate))
	router.Post("/organization/create", withBody(s, s.createOrganization))
	router.Post("/organization/set-active", withBody(s, s.setActiveOrganization))
	router.Get("/organization/list", s.listOrganizations)
	router.Get("/organization/list-members", s.listMembers)
	router.Post("/organization/update-member-role", asMember(s, s.updateMemberRole))
	router.Post("/organization/remove-member", asMember(s, s.removeMember))
	// Membership by e-mail goes through an invitation the invitee accepts;
	// there is no add-member, which joined whoever had registered the
	// address first.
	router.Post("/organization/invite-member", asMember(s, s.inviteMember))
	router.Get("/organization/list-invitations", s.listInvitations)
	router.Post("/organization/cancel-invitation", asMember(s, s.cancelInvitation))
	router.Get("/organization/list-user-invitations", s.listUserInvitations)
	router.Post("/organization/accept-invitation", withBody(s, s.acceptInvitation))
	router.Post("/organization/reject-invitation", withBody(s, s.rejectInvitation))
	s.mountOAuth(router)
	s.mountSCIM(router)
	s.mountSAML(router)
	s.mountSSO(router)
}

// client is the address the request comes from: the browser the
// dashboard vouches for, else the TCP peer or what a trusted proxy says it
// forwarded for.
func (s *server) client(c *fiber.Ctx) netip.Addr {
	if vouched, ok := clientaddr.Vouched(s.VouchKey, c.Get(clientaddr.VouchHeader), time.Now()); ok {
		return vouched
	}
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	return clientaddr.Resolve(peer, headerValues(c, "X-Forwarded-For"), headerValues(c, "Forwarded"), s.TrustedProxies)
}

func headerValues(c *fiber.Ctx, name string) []string {
	var out []string
	for _, v := range c.Request().Header.PeekAll(name) {
		out = append(out, string(v))
	}
	return out
}

func (s *server) failClosed(c *fiber.Ctx) error {
	if s.Identity == nil {
		return httpx.WriteError(c, httpx.Problem{Status: http.StatusServiceUnavailable, Code: httpx.CodeUnavailable})
	}
	return c.Next()
}

func (s *server) fail(c *fiber.Ctx, err error) error {
	return httpx.WriteError(c, problem.Of(c.UserContext(), s.Logger, err))
}

func (s *server) ok(c *fiber.Ctx, data any) error {
	return c.JSON(httpx.Envelope[any]{Data: data, Meta: httpx.Meta{RequestID: httpx.RequestID(c)}})
}

func token(c *fiber.Ctx) string { return c.Cookies(SessionCookie) }

func (s *server) setSessionCookie(c *fiber.Ctx, value string, expires time.Time) {
	c.Cookie(&fiber.Cookie{
		Name:     SessionCookie,
		Value:    value,
		Path:     "/",
		Expires:  expires,
		Secure:   s.SecureCookies,
		HTTPOnly: true,
		SameSite: fiber.CookieSameSiteLaxMode,
	})
}

type signedInBody struct {
	User    identity.User    `json:"user"`
	Session identity.Session `json:"session"`
	// Token is the session token, for API clients that do not keep cookies.
	Token string `json:"token"`
}

// answer writes fn's result, or its error through the problem table.
func (s *server) answer(c *fiber.Ctx, data any, err error) error {
	if err != nil {
		return s.fail(c, err)
	}
	return s.ok(c, data)
}

// withBody is a handler that decodes a bounded JSON body into In before
// calling fn.
func withBody[In any](s *server, fn func(c *fiber.Ctx, in In) (any, error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var in In
		if err := httpx.DecodeJSON(c, bodyLimit, &in); err != nil {
			return s.fail(c, err)
		}
		data, err := fn(c, in)
		return s.answer(c, data, err)
	}
}

// asMember is withBody for member management: the session must resolve to
// a member of its active organization before fn runs.
func asMember[In any](s *server, fn func(c *fiber.Ctx, p access.Principal, in In) (any, error)) fiber.Handler {
	return withBody(s, func(c *fiber.Ctx, in In) (any, error) {
		p, err := s.Identity.AuthenticateSession(c.UserContext(), token(c))
		if err != nil {
			return nil, err
		}
		return fn(c, p, in)
	})
}

type credentials struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Name     string `json:"name,omitempty"`
}

func (s *server) signUp(c *fiber.Ctx, in credentials) (any, error) {
	res, err := s.Identity.SignUp(c.UserContext(), in.Email, in.Password, in.Name, s.client(c))
	return s.signedIn(c, res, err)
}

func (s *server) signIn(c *fiber.Ctx, in credentials) (any, error) {
	res, err := s.Identity.SignIn(c.UserContext(), in.Email, in.Password, s.client(c))
	return s.signedIn(c, res, err)
}

func (s *server) signedIn(c *fiber.Ctx, res identity.SignedIn, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	s.setSessionCookie(c, res.Token, res.Session.ExpiresAt)
	return signedInBody{User: res.User, Session: res.Session, Token: res.Token}, nil
}

func (s *server) signOut(c *fiber.Ctx) error {
	if err := s.Identity.SignOut(c.UserContext(), token(c)); err != nil {
		return s.fail(c, err)
	}
	s.setSessionCookie(c, "", time.Unix(0, 0))
	return s.ok(c, map[string]bool{"success": true})
}

func (s *server) getSession(c *fiber.Ctx) error {
	view, err := s.Identity.GetSession(c.UserContext(), token(c))
	return s.answer(c, map[string]any{"user": view.User, "session": view.Session, "role": view.Role}, err)
}

func (s *server) reauthenticate(c *fiber.Ctx, in struct {
	Password string `json:"password"`
}) (any, error) {
	sess, err := s.Identity.Reauthenticate(c.UserContext(), token(c), in.Password, s.client(c))
	return map[string]any{"session": sess}, err
}

func (s *server) createOrganization(c *fiber.Ctx, in struct {
	Name string `json:"name"`
	Slug string `json:"slug"`
}) (any, error) {
	return s.Identity.CreateOrganization(c.UserContext(), token(c), in.Name, in.Slug)
}

func (s *server) setActiveOrganization(c *fiber.Ctx, in struct {
	OrganizationID string `json:"organization_id"`
}) (any, error) {
	return s.Identity.SetActiveOrganization(c.UserContext(), token(c), in.OrganizationID)
}

func (s *server) listOrganizations(c *fiber.Ctx) error {
	orgs, err := s.Identity.ListOrganizations(c.UserContext(), token(c))
	if orgs == nil {
		orgs = []identity.OrganizationMembership{}
	}
	return s.answer(c, orgs, err)
}

func (s *server) listMembers(c *fiber.Ctx) error {
	p, err := s.Identity.AuthenticateSession(c.UserContext(), token(c))
	if err != nil {
		return s.fail(c, err)
	}
	members, err := s.Identity.ListMembers(c.UserContext(), p)
	if members == nil {
		members = []identity.Member{}
	}
	return s.answer(c, members, err)
}

type memberRole struct {
	Email  string `json:"email,omitempty"`
	UserID string `json:"user_id,omitempty"`
	Role   string `json:"role,omitempty"`
}

func (s *server) updateMemberRole(c *fiber.Ctx, p access.Principal, in memberRole) (any, error) {
	role, err := access.ParseRole(in.Role)
	if err != nil {
		return nil, err
	}
	return s.Identity.ChangeRole(c.UserContext(), p, in.UserID, role)
}

func (s *server) removeMember(c *fiber.Ctx, p access.Principal, in memberRole) (any, error) {
	if err := s.Identity.RemoveMember(c.UserContext(), p, in.UserID); err != nil {
		return nil, err
	}
	return map[string]any{"user_id": in.UserID, "removed": true}, nil
}

type invitationRef struct {
	InvitationID string `json:"invitation_id"`
	Token        string `json:"token,omitempty"`
}

func (s *server) inviteMember(c *fiber.Ctx, p access.Principal, in memberRole) (any, error) {
	if in.Role == "" {
		// Invitees reach only what their teams grant unless a role is chosen.
		in.Role = string(access.RoleMember)
	}
	role, err := access.ParseRole(in.Role)
	if err != nil {
		return nil, err
	}
	inv, tok, err := s.Identity.InviteMember(c.UserContext(), p, in.Email, role)
	if err != nil {
		return nil, err
	}
	// The token is answered once and never again: hand it to the invitee.
	c.Set(fiber.HeaderCacheControl, "no-store")
	return map[string]any{"invitation": inv, "token": tok}, nil
}

func (s *server) listInvitations(c *fiber.Ctx) error {
	p, err := s.Identity.AuthenticateSession(c.UserContext(), token(c))
	if err != nil {
		return s.fail(c, err)
	}
	invs, err := s.Identity.ListInvitations(c.UserContext(), p)
	return s.answer(c, invs, err)
}

func (s *server) cancelInvitation(c *fiber.Ctx, p access.Principal, in invitationRef) (any, error) {
	inv, err := s.Identity.CancelInvitation(c.UserContext(), p, in.InvitationID)
	return map[string]any{"invitation": inv}, err
}

func (s *server) listUserInvitations(c *fiber.Ctx) error {
	invs, err := s.Identity.ListUserInvitations(c.UserContext(), token(c))
	return s.answer(c, invs, err)
}

func (s *server) acceptInvitation(c *fiber.Ctx, in invitationRef) (any, error) {
	org, err := s.Identity.AcceptInvitation(c.UserContext(), token(c), in.InvitationID, in.Token)
	return map[string]any{"organization": org}, err
}

func (s *server) rejectInvitation(c *fiber.Ctx, in invitationRef) (any, error) {
	inv, err := s.Identity.RejectInvitation(c.UserContext(), token(c), in.InvitationID, in.Token)
	return map[string]any{"invitation": inv}, err
}
