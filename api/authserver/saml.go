package authserver

import (
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/sso"
)

// The SAML service provider's routes: its metadata for the IdP's admin
// and the assertion consumer service the IdP posts responses to.
func (s *server) mountSAML(router fiber.Router) {
	router.Get("/sso/saml2/sp/metadata", s.samlMetadata)
	router.Post("/sso/saml2/sp/acs/:providerId", s.samlACS)
}

func (s *server) samlProvider() (*sso.SAMLProvider, error) {
	if s.SSO == nil {
		return nil, sso.ErrSAMLUnavailable
	}
	return s.SSO.SAMLProvider()
}

func (s *server) samlMetadata(c *fiber.Ctx) error {
	sp, err := s.samlProvider()
	if err != nil {
		return s.fail(c, err)
	}
	md, err := sp.Metadata(c.UserContext(), c.Query("providerId"))
	if err != nil {
		return s.fail(c, err)
	}
	c.Set(fiber.HeaderContentType, "application/samlmetadata+xml")
	return c.Send(md)
}

// samlACS answers with a 303: to the dashboard with the sign-in code, or,
// for an unsolicited response, to the IdP with a fresh AuthnRequest. A
// response that does not verify is a 400 naming SAML_RESPONSE_INVALID;
// the library's reason goes to the log only.
func (s *server) samlACS(c *fiber.Ctx) error {
	sp, err := s.samlProvider()
	if err != nil {
		return s.fail(c, err)
	}
	providerID := c.Params("providerId")
	res, err := sp.Consume(c.UserContext(), providerID, c.FormValue("SAMLResponse"), c.FormValue("RelayState"))
	if err != nil {
		if errors.Is(err, sso.ErrSAMLResponseInvalid) {
			s.Logger.WarnContext(c.UserContext(), "SAML response refused", "request_id", httpx.RequestID(c),
				"provider_id", providerID, "reason", err.Error())
		}
		return s.fail(c, err)
	}
	if res.Unsolicited {
		s.Logger.InfoContext(c.UserContext(), "unsolicited SAML response answered with a fresh sign-in",
			"request_id", httpx.RequestID(c), "provider_id", providerID)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Redirect(res.Location, http.StatusSeeOther)
}
