package authserver

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/problem"
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
}

type server struct {
	Deps
}

// Mount registers the identity routes on router (mounted at /api/auth).
func Mount(router fiber.Router, deps Deps) {
	s := &server{Deps: deps}
	router.Use(s.failClosed)
	router.Post("/sign-up/email", s.signUp)
	router.Post("/sign-in/email", s.signIn)
	router.Post("/sign-out", s.signOut)
	router.Get("/get-session", s.getSession)
	router.Post("/reauthenticate", s.reauthenticate)
	router.Post("/organization/create", s.createOrganization)
	router.Post("/organization/set-active", s.setActiveOrganization)
	router.Get("/organization/list", s.listOrganizations)
	router.Get("/organization/list-members", s.listMembers)
	router.Post("/organization/add-member", s.addMember)
	router.Post("/organization/update-member-role", s.updateMemberRole)
	router.Post("/organization/remove-member", s.removeMember)
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

func (s *server) signedIn(c *fiber.Ctx, res identity.SignedIn) error {
	s.setSessionCookie(c, res.Token, res.Session.ExpiresAt)
	return s.ok(c, signedInBody{User: res.User, Session: res.Session, Token: res.Token})
}

func (s *server) signUp(c *fiber.Ctx) error {
	var in struct {
		Email    string `json:"email"`
		Password string `json:"password"`
		Name     string `json:"name"`
	}
	if err := httpx.DecodeJSON(c, bodyLimit, &in); err != nil {
		return s.fail(c, err)
	}
	res, err := s.Identity.SignUp(c.UserContext(), in.Email, in.Password, in.Name)
	if err != nil {
		return s.fail(c, err)
	}
	return s.signedIn(c, res)
}

func (s *server) signIn(c *fiber.Ctx) error {
	var in struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	if err := httpx.DecodeJSON(c, bodyLimit, &in); err != nil {
		return s.fail(c, err)
	}
	res, err := s.Identity.SignIn(c.UserContext(), in.Email, in.Password, c.IP())
	if err != nil {
		return s.fail(c, err)
	}
	return s.signedIn(c, res)
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
	if err != nil {
		return s.fail(c, err)
	}
	return s.ok(c, map[string]any{"user": view.User, "session": view.Session, "role": view.Role})
}

func (s *server) reauthenticate(c *fiber.Ctx) error {
	var in struct {
		Password string `json:"password"`
	}
	if err := httpx.DecodeJSON(c, bodyLimit, &in); err != nil {
		return s.fail(c, err)
	}
	sess, err := s.Identity.Reauthenticate(c.UserContext(), token(c), in.Password, c.IP())
	if err != nil {
		return s.fail(c, err)
	}
	return s.ok(c, map[string]any{"session": sess})
}

func (s *server) createOrganization(c *fiber.Ctx) error {
	var in struct {
		Name string `json:"name"`
		Slug string `json:"slug"`
	}
	if err := httpx.DecodeJSON(c, bodyLimit, &in); err != nil {
		return s.fail(c, err)
	}
	org, err := s.Identity.CreateOrganization(c.UserContext(), token(c), in.Name, in.Slug)
	if err != nil {
		return s.fail(c, err)
	}
	return s.ok(c, org)
}

func (s *server) setActiveOrganization(c *fiber.Ctx) error {
	var in struct {
		OrganizationID string `json:"organization_id"`
	}
	if err := httpx.DecodeJSON(c, bodyLimit, &in); err != nil {
		return s.fail(c, err)
	}
	org, err := s.Identity.SetActiveOrganization(c.UserContext(), token(c), in.OrganizationID)
	if err != nil {
		return s.fail(c, err)
	}
	return s.ok(c, org)
}

func (s *server) listOrganizations(c *fiber.Ctx) error {
	orgs, err := s.Identity.ListOrganizations(c.UserContext(), token(c))
	if err != nil {
		return s.fail(c, err)
	}
	if orgs == nil {
		orgs = []identity.OrganizationMembership{}
	}
	return s.ok(c, orgs)
}

// principal resolves the session to a member of its active organization,
// for the member-management routes.
func (s *server) principal(c *fiber.Ctx) (access.Principal, error) {
	return s.Identity.AuthenticateSession(c.UserContext(), token(c))
}

func (s *server) listMembers(c *fiber.Ctx) error {
	p, err := s.principal(c)
	if err != nil {
		return s.fail(c, err)
	}
	members, err := s.Identity.ListMembers(c.UserContext(), p)
	if err != nil {
		return s.fail(c, err)
	}
	if members == nil {
		members = []identity.Member{}
	}
	return s.ok(c, members)
}

func (s *server) addMember(c *fiber.Ctx) error {
	var in struct {
		Email string `json:"email"`
		Role  string `json:"role"`
	}
	if err := httpx.DecodeJSON(c, bodyLimit, &in); err != nil {
		return s.fail(c, err)
	}
	p, err := s.principal(c)
	if err != nil {
		return s.fail(c, err)
	}
	role, err := access.ParseRole(in.Role)
	if err != nil {
		return s.fail(c, err)
	}
	m, err := s.Identity.AddMember(c.UserContext(), p, in.Email, role)
	if err != nil {
		return s.fail(c, err)
	}
	return s.ok(c, m)
}

func (s *server) updateMemberRole(c *fiber.Ctx) error {
	var in struct {
		UserID string `json:"user_id"`
		Role   string `json:"role"`
	}
	if err := httpx.DecodeJSON(c, bodyLimit, &in); err != nil {
		return s.fail(c, err)
	}
	p, err := s.principal(c)
	if err != nil {
		return s.fail(c, err)
	}
	role, err := access.ParseRole(in.Role)
	if err != nil {
		return s.fail(c, err)
	}
	m, err := s.Identity.ChangeRole(c.UserContext(), p, in.UserID, role)
	if err != nil {
		return s.fail(c, err)
	}
	return s.ok(c, m)
}

func (s *server) removeMember(c *fiber.Ctx) error {
	var in struct {
		UserID string `json:"user_id"`
	}
	if err := httpx.DecodeJSON(c, bodyLimit, &in); err != nil {
		return s.fail(c, err)
	}
	p, err := s.principal(c)
	if err != nil {
		return s.fail(c, err)
	}
	if err := s.Identity.RemoveMember(c.UserContext(), p, in.UserID); err != nil {
		return s.fail(c, err)
	}
	return s.ok(c, map[string]any{"user_id": in.UserID, "removed": true})
}
