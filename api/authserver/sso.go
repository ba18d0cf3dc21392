package authserver

import (
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/problem"
	"github.com/cairnhq/cairn/api/sso"
)

// mountSSO registers federated sign-in (the instance IdP and
// organization SSO) and the owners' SSO settings.
func (s *server) mountSSO(router fiber.Router) {
	router.Get("/sign-in/providers", s.signInProviders)
	router.Post("/sign-in/social", withBody(s, s.signInSocial))
	router.Get("/callback/:provider", s.oidcCallback(true, "provider"))
	router.Post("/sign-in/code", withBody(s, s.signInCode))
	router.Post("/sign-in/sso", withBody(s, s.signInSSO))
	router.Get("/sso/callback/:providerId", s.oidcCallback(false, "providerId"))
	router.Post("/sso/register", asMember(s, s.registerSSO))
	router.Get("/sso/providers", s.listSSOProviders)
	router.Post("/sso/delete", asMember(s, s.deleteSSO))
	router.Post("/sso/require", asMember(s, s.requireSSO))
	router.Post("/sso/test", asMember(s, s.testSSO))
	router.Get("/sso/test-result", s.ssoTestResult)
}

type startBody struct {
	Provider         string `json:"provider"`
	ProviderID       string `json:"providerId"`
	Email            string `json:"email"`
	OrganizationSlug string `json:"organizationSlug"`
	CallbackURL      string `json:"callbackURL"`
	ClientBinding    string `json:"clientBinding"`
}

func (b startBody) start() sso.StartInput {
	return sso.StartInput{CallbackURL: b.CallbackURL, ClientBinding: b.ClientBinding}
}

type redirectBody struct {
	URL      string `json:"url"`
	Redirect bool   `json:"redirect"`
}

func redirectTo(url string, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return redirectBody{URL: url, Redirect: true}, nil
}

func (s *server) signInProviders(c *fiber.Ctx) error {
	return s.ok(c, map[string]any{"social": s.SSO.SocialProviders()})
}

func (s *server) signInSocial(c *fiber.Ctx, in startBody) (any, error) {
	return redirectTo(s.SSO.StartSocial(c.UserContext(), in.Provider, in.start()))
}

func (s *server) signInSSO(c *fiber.Ctx, in startBody) (any, error) {
	return redirectTo(s.SSO.StartSSO(c.UserContext(), sso.SSOStartInput{
		StartInput: in.start(), Email: in.Email, OrganizationSlug: in.OrganizationSlug, ProviderID: in.ProviderID}))
}

func (s *server) signInCode(c *fiber.Ctx, in struct {
	Code          string `json:"code"`
	ClientBinding string `json:"clientBinding"`
}) (any, error) {
	res, err := s.SSO.RedeemCode(c.UserContext(), in.Code, in.ClientBinding)
	c.Set(fiber.HeaderCacheControl, "no-store")
	return s.signedIn(c, res, err)
}

// oidcCallback is where an identity provider sends the browser back.
func (s *server) oidcCallback(social bool, param string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		fin, err := s.SSO.FinishOIDC(c.UserContext(), social, c.Params(param), c.Query("state"), c.Query("code"), c.Query("error"))
		return s.finishFlow(c, fin, err)
	}
}

// finishFlow sends the browser back to the dashboard with the flow's
// outcome (a one-time code, a test result or an error code). Without a
// known flow whose callbackURL is trusted there is nowhere safe to send it,
// and the error is answered here. The API sets no cookie: the dashboard
// redeems the code.
func (s *server) finishFlow(c *fiber.Ctx, fin sso.Finish, err error) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("Referrer-Policy", "no-referrer")
	if fin.CallbackURL == "" || sso.TrustedCallback(s.DashboardURL, fin.CallbackURL) != nil {
		if err == nil {
			err = sso.ErrCallbackURL
		}
		return s.fail(c, err)
	}
	code := ""
	if err != nil {
		code = problem.Of(c.UserContext(), s.Logger, err).Code
	}
	return c.Redirect(fin.Redirect(code), http.StatusSeeOther)
}

type providerView struct {
	ID             string      `json:"id"`
	OrganizationID string      `json:"organizationId"`
	Type           string      `json:"type"`
	Issuer         string      `json:"issuer"`
	Domains        []string    `json:"domains"`
	Mapping        sso.Mapping `json:"mapping"`
	DefaultRole    access.Role `json:"defaultRole"`
	CreatedAt      time.Time   `json:"createdAt"`
	CallbackURL    string      `json:"callbackUrl,omitempty"`
	SPMetadataURL  string      `json:"spMetadataUrl,omitempty"`
	SPEntityID     string      `json:"spEntityId,omitempty"`
	ACSURL         string      `json:"acsUrl,omitempty"`
}

// viewOf renders a provider; its client secret is never part of it.
func (s *server) viewOf(p sso.Provider) providerView {
	v := providerView{ID: p.ID, OrganizationID: p.OrganizationID, Type: p.Type, Issuer: p.Issuer, Domains: p.Domains,
		Mapping: p.Mapping, DefaultRole: p.DefaultRole, CreatedAt: p.CreatedAt}
	if p.Type == sso.TypeSAML {
		v.SPMetadataURL = s.SSO.SPMetadataURL(p.ID)
		v.SPEntityID = v.SPMetadataURL
		v.ACSURL = s.SSO.ACSURL(p.ID)
	} else {
		v.CallbackURL = s.SSO.CallbackURL(p.ID)
	}
	return v
}

func (s *server) registerSSO(c *fiber.Ctx, p access.Principal, in struct {
	Type       string   `json:"type"`
	Issuer     string   `json:"issuer"`
	Domains    []string `json:"domains"`
	OIDCConfig struct {
		ClientID     string   `json:"clientId"`
		ClientSecret string   `json:"clientSecret"`
		Scopes       []string `json:"scopes"`
	} `json:"oidcConfig"`
	SAMLConfig struct {
		MetadataXML string `json:"metadataXml"`
	} `json:"samlConfig"`
	Mapping     sso.Mapping `json:"mapping"`
	DefaultRole string      `json:"defaultRole"`
}) (any, error) {
	prov, err := s.SSO.Register(c.UserContext(), p, sso.RegisterInput{
		Type: in.Type, Issuer: in.Issuer, Domains: in.Domains,
		ClientID: in.OIDCConfig.ClientID, ClientSecret: in.OIDCConfig.ClientSecret, Scopes: in.OIDCConfig.Scopes,
		MetadataXML: in.SAMLConfig.MetadataXML, Mapping: in.Mapping, DefaultRole: in.DefaultRole,
	})
	if err != nil {
		return nil, err
	}
	return s.viewOf(prov), nil
}

// principal resolves the session of a GET route to a member.
func (s *server) principal(c *fiber.Ctx) (access.Principal, error) {
	return s.Identity.AuthenticateSession(c.UserContext(), token(c))
}

func (s *server) listSSOProviders(c *fiber.Ctx) error {
	p, err := s.principal(c)
	if err != nil {
		return s.fail(c, err)
	}
	providers, required, err := s.SSO.Providers(c.UserContext(), p)
	views := make([]providerView, 0, len(providers))
	for _, prov := range providers {
		views = append(views, s.viewOf(prov))
	}
	return s.answer(c, map[string]any{"providers": views, "required": required}, err)
}

func (s *server) deleteSSO(c *fiber.Ctx, p access.Principal, in startBody) (any, error) {
	if err := s.SSO.Delete(c.UserContext(), p, in.ProviderID); err != nil {
		return nil, err
	}
	return map[string]any{"providerId": in.ProviderID, "deleted": true}, nil
}

func (s *server) requireSSO(c *fiber.Ctx, p access.Principal, in struct {
	Required *bool `json:"required"`
}) (any, error) {
	if in.Required == nil {
		return nil, fault.ErrValidation
	}
	required, err := s.SSO.Require(c.UserContext(), p, *in.Required)
	return map[string]bool{"required": required}, err
}

func (s *server) testSSO(c *fiber.Ctx, p access.Principal, in startBody) (any, error) {
	return redirectTo(s.SSO.StartTest(c.UserContext(), p, in.ProviderID, in.start()))
}

func (s *server) ssoTestResult(c *fiber.Ctx) error {
	p, err := s.principal(c)
	if err != nil {
		return s.fail(c, err)
	}
	res, err := s.SSO.TestResult(c.UserContext(), p, c.Query("id"))
	return s.answer(c, res, err)
}
