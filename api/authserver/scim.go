package authserver

import (
	"bytes"
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/platform/reqid"
	"github.com/cairnhq/cairn/api/scim"
)

// scimBase is where the SCIM protocol is served, under /api/auth.
const scimBase = "/scim/v2"

// mountSCIM registers the owner's token routes and the SCIM protocol,
// which authenticates with the organization's SCIM token instead of a
// session. Without the service (no database or AUTH_SECRET) they answer
// 503.
func (s *server) mountSCIM(router fiber.Router) {
	router.Post("/scim/generate-token", s.requireSCIM, asMember(s, s.generateSCIMToken))
	router.Get("/scim/token", s.requireSCIM, s.scimTokenStatus)
	var handler http.Handler
	if s.SCIM != nil {
		var err error
		if handler, err = s.SCIM.Handler(); err != nil {
			s.Logger.Error("scim handler unavailable", "error", err)
		}
	}
	router.All(scimBase, s.requireSCIM, s.scimProtocol(handler))
	router.All(scimBase+"/*", s.requireSCIM, s.scimProtocol(handler))
}

func (s *server) requireSCIM(c *fiber.Ctx) error {
	if s.SCIM == nil {
		return httpx.WriteError(c, httpx.Problem{Status: http.StatusServiceUnavailable, Code: httpx.CodeUnavailable})
	}
	return c.Next()
}

func (s *server) generateSCIMToken(c *fiber.Ctx, p access.Principal, _ struct{}) (any, error) {
	token, err := s.SCIM.GenerateToken(c.UserContext(), p)
	if err != nil {
		return nil, err
	}
	// Shown once and never again: the owner hands it to the identity
	// provider.
	c.Set(fiber.HeaderCacheControl, "no-store")
	return map[string]string{"scimToken": token}, nil
}

func (s *server) scimTokenStatus(c *fiber.Ctx) error {
	p, err := s.Identity.AuthenticateSession(c.UserContext(), token(c))
	if err != nil {
		return s.fail(c, err)
	}
	status, err := s.SCIM.TokenStatus(c.UserContext(), p)
	return s.answer(c, status, err)
}

// scimProtocol authenticates the organization's SCIM token, bounds the
// body before reading it, and hands the request to the SCIM handler with
// the organization bound to its context. Its errors are in SCIM's error
// schema.
func (s *server) scimProtocol(handler http.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if handler == nil {
			return scimError(c, http.StatusServiceUnavailable, "SCIM is unavailable.")
		}
		bearer, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
		if !ok {
			c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="scim"`)
			return scimError(c, http.StatusUnauthorized, "A SCIM token is required as a bearer token.")
		}
		organizationID, err := s.SCIM.Authenticate(c.UserContext(), strings.TrimSpace(bearer))
		if errors.Is(err, scim.ErrInvalidToken) {
			c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="scim", error="invalid_token"`)
			return scimError(c, http.StatusUnauthorized, "The SCIM token is not valid.")
		}
		if err != nil {
			s.Logger.ErrorContext(c.UserContext(), "scim authentication failed", "request_id", httpx.RequestID(c), "error", err)
			return scimError(c, http.StatusInternalServerError, "")
		}
		var body []byte
		if c.Method() == http.MethodPost || c.Method() == http.MethodPut || c.Method() == http.MethodPatch {
			if !scimMediaType(string(c.Request().Header.ContentType())) {
				return scimError(c, http.StatusUnsupportedMediaType, "Send application/scim+json or application/json.")
			}
			body, err = httpx.ReadBody(c, scim.MaxBodyBytes)
			if errors.Is(err, httpx.ErrTooLarge) {
				return scimError(c, http.StatusRequestEntityTooLarge, "The request body is over 1 MiB.")
			}
			if err != nil {
				return scimError(c, http.StatusBadRequest, "The request body could not be read.")
			}
		}
		path := strings.TrimPrefix(c.Path(), "/api/auth/scim")
		target := path
		if q := string(c.Request().URI().QueryString()); q != "" {
			target += "?" + q
		}
		ctx := scim.WithOrganization(reqid.With(c.UserContext(), httpx.RequestID(c)), organizationID)
		req, err := http.NewRequestWithContext(ctx, c.Method(), target, bytes.NewReader(body))
		if err != nil {
			return scimError(c, http.StatusBadRequest, "The request URL is not valid.")
		}
		req.Header.Set(fiber.HeaderContentType, string(c.Request().Header.ContentType()))
		w := &bufferedResponse{header: http.Header{}}
		handler.ServeHTTP(w, req)
		for k, values := range w.header {
			for _, v := range values {
				c.Response().Header.Add(k, v)
			}
		}
		if w.status == 0 {
			w.status = http.StatusOK
		}
		return c.Status(w.status).Send(w.body.Bytes())
	}
}

// scimMediaType accepts SCIM's media type and plain JSON, with parameters.
func scimMediaType(contentType string) bool {
	media, _, err := mime.ParseMediaType(contentType)
	return err == nil && (media == "application/scim+json" || media == "application/json")
}

func scimError(c *fiber.Ctx, status int, detail string) error {
	c.Set(fiber.HeaderContentType, "application/scim+json")
	return c.Status(status).Send(scim.ErrorBody(status, detail))
}

// bufferedResponse collects what the SCIM handler writes, for Fiber to
// send.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferedResponse) Header() http.Header { return w.header }

func (w *bufferedResponse) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}

func (w *bufferedResponse) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}
