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
	keys, err := creds.Issuer().JWKS(c.UserContext())
	if err == nil && len(keys) == 0 {
		// Before the first token: publish the first key, so a verifier
		// that looks early does not cache an empty set.
		if err = creds.Issuer().Rotate(c.UserContext()); err == nil {
			keys, err = creds.Issuer().JWKS(c.UserContext())
		}
	}
	if err != nil {
		s.deps.Logger.WarnContext(c.UserContext(), "reading signing keys", "error", err)
		return c.SendStatus(http.StatusServiceUnavailable)
	}
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	return c.JSON(fiber.Map{"keys": keys})
}
