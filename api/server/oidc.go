package server

import (
	"net/http"

	"github.com/gofiber/fiber/v2"
)

// The workload-identity issuer's public documents. Clouds fetch them
// without credentials to verify the tokens runs present; they name only
// public keys. Without the database or a master key they answer 503, so a
// verifier keeps its cached keys rather than learning an empty set.

func (s *Server) openIDConfiguration(c *fiber.Ctx) error {
	creds := s.deps.Services.Credentials
	if creds == nil {
		return c.SendStatus(http.StatusServiceUnavailable)
	}
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	return c.JSON(creds.Issuer().Discovery())
}

func (s *Server) jwks(c *fiber.Ctx) error {
	creds := s.deps.Services.Credentials
	if creds == nil {
		return c.SendStatus(http.StatusServiceUnavailable)
	}
	// A first request publishes the first key, so a verifier never meets
	// an empty set while federation is in use.
	if err := creds.Issuer().Rotate(c.UserContext()); err != nil {
		s.deps.Logger.WarnContext(c.UserContext(), "rotating signing keys", "error", err)
		return c.SendStatus(http.StatusServiceUnavailable)
	}
	keys, err := creds.Issuer().JWKS(c.UserContext())
	if err != nil {
		s.deps.Logger.WarnContext(c.UserContext(), "reading signing keys", "error", err)
		return c.SendStatus(http.StatusServiceUnavailable)
	}
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	return c.JSON(fiber.Map{"keys": keys})
}
