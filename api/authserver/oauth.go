package authserver

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/oauth"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/problem"
)

// The authorization server's endpoints, under /api/auth.
const (
	authorizePath = "/oauth2/authorize"
	tokenPath     = "/oauth2/token"
	registerPath  = "/oauth2/register"
	revokePath    = "/oauth2/revoke"
	userinfoPath  = "/oauth2/userinfo"
	jwksPath      = "/jwks"
	// formLimit bounds token and revocation request bodies.
	formLimit = 16 << 10
)

// MountDiscovery serves the authorization server metadata (RFC 8414) and
// the OpenID discovery document at the API's root, where clients derive
// them from the issuer. Without AUTH_SECRET or the database there is no
// authorization server, and both answer 503.
func MountDiscovery(app fiber.Router, deps Deps) {
	s := &server{Deps: deps}
	app.Get("/.well-known/oauth-authorization-server", s.publicCORS, s.discovery(false))
	app.Get("/.well-known/openid-configuration", s.publicCORS, s.discovery(true))
	app.Options("/.well-known/oauth-authorization-server", s.publicCORS)
	app.Options("/.well-known/openid-configuration", s.publicCORS)
}

// mountOAuth registers the authorization server's endpoints.
func (s *server) mountOAuth(router fiber.Router) {
	for _, path := range []string{jwksPath, registerPath, tokenPath, revokePath, userinfoPath} {
		router.Options(path, s.publicCORS)
	}
	router.Get(jwksPath, s.publicCORS, s.requireOAuth, s.jwks)
	router.Post(registerPath, s.publicCORS, s.requireOAuth, s.register)
	router.Get(authorizePath, s.requireOAuth, s.authorize)
	router.Post(tokenPath, s.publicCORS, s.requireOAuth, s.token)
	router.Post(revokePath, s.publicCORS, s.requireOAuth, s.revoke)
	router.Get(userinfoPath, s.publicCORS, s.requireOAuth, s.userinfo)
	router.Post(userinfoPath, s.publicCORS, s.requireOAuth, s.userinfo)
	// The dashboard's side: consent and the authorized clients, with the
	// person's session.
	router.Get("/oauth2/consent", s.requireOAuth, s.describeConsent)
	router.Post("/oauth2/consent", s.requireOAuth, withBody(s, s.consent))
	router.Get("/oauth2/grants", s.requireOAuth, s.listGrants)
	router.Post("/oauth2/grants/revoke", s.requireOAuth, asMember(s, s.revokeGrant))
}

// publicCORS lets browser-based agents read the metadata and call the
// endpoints that take no cookies; preflights end here.
func (s *server) publicCORS(c *fiber.Ctx) error {
	c.Set("Access-Control-Allow-Origin", "*")
	c.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	c.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version")
	if c.Method() == http.MethodOptions {
		return c.SendStatus(http.StatusNoContent)
	}
	return c.Next()
}

func (s *server) requireOAuth(c *fiber.Ctx) error {
	if s.OAuth == nil || s.Identity == nil {
		return httpx.WriteError(c, httpx.Problem{Status: http.StatusServiceUnavailable, Code: httpx.CodeUnavailable})
	}
	return c.Next()
}

func (s *server) discovery(openID bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if s.OAuth == nil {
			return httpx.WriteError(c, httpx.Problem{Status: http.StatusServiceUnavailable, Code: httpx.CodeUnavailable})
		}
		issuer := s.OAuth.Issuer()
		methods := []string{oauth.AuthNone, oauth.AuthClientSecretBasic, oauth.AuthClientSecretPost}
		doc := fiber.Map{
			"issuer":                                         issuer,
			"authorization_endpoint":                         issuer + "/api/auth" + authorizePath,
			"token_endpoint":                                 issuer + "/api/auth" + tokenPath,
			"registration_endpoint":                          issuer + "/api/auth" + registerPath,
			"revocation_endpoint":                            issuer + "/api/auth" + revokePath,
			"jwks_uri":                                       issuer + "/api/auth" + jwksPath,
			"scopes_supported":                               oauth.Scopes,
			"response_types_supported":                       []string{oauth.ResponseTypeCode},
			"response_modes_supported":                       []string{"query"},
			"grant_types_supported":                          []string{oauth.GrantAuthorizationCode, oauth.GrantRefreshToken},
			"token_endpoint_auth_methods_supported":          methods,
			"revocation_endpoint_auth_methods_supported":     methods,
			"code_challenge_methods_supported":               []string{oauth.ChallengeS256},
			"client_id_metadata_document_supported":          s.OAuth.MetadataDocuments(),
			"authorization_response_iss_parameter_supported": true,
		}
		if s.OAuth.OpenID() {
			// The OpenID provider: ID tokens (RS256, keys of their own, in
			// the same JWKS) and userinfo for the openid scope.
			doc["scopes_supported"] = append(slices.Clone(oauth.Scopes), oauth.IdentityScopes...)
			doc["userinfo_endpoint"] = issuer + "/api/auth" + userinfoPath
			doc["claims_supported"] = oauth.ClaimsSupported
		}
		if openID {
			doc["subject_types_supported"] = []string{"public"}
			doc["id_token_signing_alg_values_supported"] = []string{"RS256"}
		}
		c.Set(fiber.HeaderCacheControl, "public, max-age=300")
		return c.JSON(doc)
	}
}

func (s *server) jwks(c *fiber.Ctx) error {
	keys, err := s.OAuth.JWKS(c.UserContext())
	if err != nil {
		return s.fail(c, err)
	}
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	return c.JSON(keys)
}

// userinfo is the OpenID Connect userinfo endpoint: the person behind an
// access token with the openid scope, by its scopes. Errors are bearer
// challenges (RFC 6750 §3).
func (s *server) userinfo(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	raw, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
	if !ok || raw == "" {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="cairn"`)
		return c.Status(http.StatusUnauthorized).JSON(fiber.Map{"error": "invalid_token"})
	}
	info, err := s.OAuth.UserInfo(c.UserContext(), raw)
	switch {
	case errors.Is(err, oauth.ErrInsufficientScope):
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer error="insufficient_scope", scope="openid"`)
		return c.Status(http.StatusForbidden).JSON(fiber.Map{"error": "insufficient_scope"})
	case errors.Is(err, oauth.ErrInvalidToken):
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer error="invalid_token"`)
		return c.Status(http.StatusUnauthorized).JSON(fiber.Map{"error": "invalid_token"})
	case err != nil:
		return s.fail(c, err)
	}
	return c.JSON(info)
}

// oauthError answers an OAuth endpoint's error in the protocol's own shape
// (RFC 6749 §5.2); other failures go through the problem table.
func (s *server) oauthError(c *fiber.Ctx, err error) error {
	var pe *oauth.Error
	if !errors.As(err, &pe) {
		var limited identity.RateLimitedError
		if !errors.As(err, &limited) {
			return s.fail(c, err)
		}
		// The wait is rounded as the problem table rounds every throttle.
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(problem.Of(c.UserContext(), s.Logger, limited).RetryAfter))
		pe = &oauth.Error{Code: "slow_down", Description: "too many registrations from this address", Status: http.StatusTooManyRequests}
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	if pe.Code == oauth.ErrInvalidClient.Code && len(c.Get(fiber.HeaderAuthorization)) > 0 {
		c.Set(fiber.HeaderWWWAuthenticate, `Basic realm="cairn"`)
	}
	body := fiber.Map{"error": pe.Code}
	if pe.Description != "" {
		body["error_description"] = pe.Description
	}
	return c.Status(pe.Status).JSON(body)
}

// register is RFC 7591 registration, open to anyone and limited per
// client address. Unknown metadata is ignored, as the RFC requires.
func (s *server) register(c *fiber.Ctx) error {
	if err := s.Identity.AdmitClientRegistration(c.UserContext(), s.client(c)); err != nil {
		return s.oauthError(c, err)
	}
	var m oauth.Metadata
	if err := httpx.DecodeJSONLenient(c, bodyLimit, &m); err != nil {
		if errors.Is(err, httpx.ErrNotJSON) || errors.Is(err, httpx.ErrTooLarge) {
			return s.fail(c, err)
		}
		return s.oauthError(c, &oauth.Error{Code: oauth.ErrInvalidClientMetadata.Code, Description: "the body must be a JSON object of client metadata", Status: http.StatusBadRequest})
	}
	reg, err := s.OAuth.Register(c.UserContext(), m)
	if err != nil {
		return s.oauthError(c, err)
	}
	cl := reg.Client
	body := fiber.Map{
		"client_id":                  cl.ID,
		"client_id_issued_at":        cl.CreatedAt.Unix(),
		"client_name":                cl.Name,
		"redirect_uris":              cl.RedirectURIs,
		"grant_types":                cl.GrantTypes,
		"response_types":             []string{oauth.ResponseTypeCode},
		"token_endpoint_auth_method": cl.TokenEndpointAuthMethod,
		"scope":                      strings.Join(cl.Scopes, " "),
	}
	if cl.URI != nil {
		body["client_uri"] = *cl.URI
	}
	if reg.Secret != "" {
		body["client_secret"] = reg.Secret
		body["client_secret_expires_at"] = 0
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(http.StatusCreated).JSON(body)
}

// authorize validates the request and sends the browser to the
// dashboard's consent screen (which signs the person in first when
// needed), carrying the request signed. Errors about the client or its
// redirect URI are shown here, never redirected.
func (s *server) authorize(c *fiber.Ctx) error {
	q := c.Request().URI().QueryArgs()
	get := func(name string) string { return string(q.Peek(name)) }
	var resources []string
	for _, r := range q.PeekMulti("resource") {
		resources = append(resources, string(r))
	}
	for _, single := range []string{"client_id", "redirect_uri", "response_type", "scope", "state", "code_challenge", "code_challenge_method", "nonce"} {
		if len(q.PeekMulti(single)) > 1 {
			return s.oauthError(c, &oauth.Error{Code: oauth.ErrInvalidRequest.Code, Description: single + " appears twice", Status: http.StatusBadRequest})
		}
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	next, err := s.OAuth.Authorize(c.UserContext(), oauth.AuthorizeInput{
		ClientID: get("client_id"), RedirectURI: get("redirect_uri"), ResponseType: get("response_type"),
		Scope: get("scope"), State: get("state"), CodeChallenge: get("code_challenge"),
		CodeChallengeMethod: get("code_challenge_method"), Resources: resources, Nonce: get("nonce"),
	})
	var redirect *oauth.RedirectError
	if errors.As(err, &redirect) {
		return c.Redirect(redirectError(redirect, s.OAuth.Issuer()), http.StatusFound)
	}
	if err != nil {
		return s.oauthError(c, err)
	}
	return c.Redirect(next, http.StatusFound)
}

func redirectError(e *oauth.RedirectError, issuer string) string {
	u, err := url.Parse(e.RedirectURI)
	if err != nil {
		return e.RedirectURI
	}
	q := u.Query()
	q.Set("error", e.Err.Code)
	if e.Err.Description != "" {
		q.Set("error_description", e.Err.Description)
	}
	if e.State != "" {
		q.Set("state", e.State)
	}
	q.Set("iss", issuer)
	u.RawQuery = q.Encode()
	return u.String()
}

// form reads an application/x-www-form-urlencoded body, bounded.
func form(c *fiber.Ctx) (url.Values, error) {
	media, _, _ := strings.Cut(string(c.Request().Header.ContentType()), ";")
	if !strings.EqualFold(strings.TrimSpace(media), "application/x-www-form-urlencoded") {
		return nil, &oauth.Error{Code: oauth.ErrInvalidRequest.Code, Description: "the body must be application/x-www-form-urlencoded", Status: http.StatusBadRequest}
	}
	body, err := httpx.ReadBody(c, formLimit)
	if err != nil {
		return nil, err
	}
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, &oauth.Error{Code: oauth.ErrInvalidRequest.Code, Description: "malformed form body", Status: http.StatusBadRequest}
	}
	for name, values := range v {
		if len(values) > 1 && name != "resource" {
			return nil, &oauth.Error{Code: oauth.ErrInvalidRequest.Code, Description: name + " appears twice", Status: http.StatusBadRequest}
		}
	}
	return v, nil
}

// clientCredentials takes the client's ID and secret from HTTP Basic
// authentication (RFC 6749 §2.3.1: both form-encoded) or the body.
func clientCredentials(c *fiber.Ctx, v url.Values) (id, secret string, basic bool, err error) {
	header := c.Get(fiber.HeaderAuthorization)
	if header == "" {
		return v.Get("client_id"), v.Get("client_secret"), false, nil
	}
	bad := &oauth.Error{Code: oauth.ErrInvalidClient.Code, Description: "malformed client authentication", Status: http.StatusUnauthorized}
	scheme, encoded, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") || v.Get("client_secret") != "" {
		return "", "", false, bad
	}
	raw, decodeErr := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	user, pass, ok := strings.Cut(string(raw), ":")
	if decodeErr != nil || !ok {
		return "", "", false, bad
	}
	id, err1 := url.QueryUnescape(user)
	secret, err2 := url.QueryUnescape(pass)
	if err1 != nil || err2 != nil || (v.Get("client_id") != "" && v.Get("client_id") != id) {
		return "", "", false, bad
	}
	return id, secret, true, nil
}

func (s *server) token(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("Pragma", "no-cache")
	v, err := form(c)
	if err != nil {
		return s.oauthError(c, err)
	}
	id, secret, basic, err := clientCredentials(c, v)
	if err != nil {
		return s.oauthError(c, err)
	}
	out, err := s.OAuth.Token(c.UserContext(), oauth.TokenInput{
		GrantType: v.Get("grant_type"), Code: v.Get("code"), RedirectURI: v.Get("redirect_uri"),
		CodeVerifier: v.Get("code_verifier"), RefreshToken: v.Get("refresh_token"), Scope: v.Get("scope"),
		Resources: v["resource"], ClientID: id, ClientSecret: secret, BasicAuth: basic,
	})
	if err != nil {
		return s.oauthError(c, err)
	}
	return c.JSON(out)
}

func (s *server) revoke(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	v, err := form(c)
	if err != nil {
		return s.oauthError(c, err)
	}
	id, secret, basic, err := clientCredentials(c, v)
	if err != nil {
		return s.oauthError(c, err)
	}
	if err := s.OAuth.Revoke(c.UserContext(), oauth.RevokeInput{Token: v.Get("token"), ClientID: id, ClientSecret: secret, BasicAuth: basic}); err != nil {
		return s.oauthError(c, err)
	}
	return c.SendStatus(http.StatusOK)
}

// consentClient is the client as the consent screen names it.
type consentClient struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Kind        string  `json:"kind"`
	URI         *string `json:"uri"`
	RedirectURI string  `json:"redirect_uri"`
}

// describeConsent tells the dashboard what the signed request (its whole
// query) asks of the signed-in person, and which of their organizations
// they can grant it in.
func (s *server) describeConsent(c *fiber.Ctx) error {
	view, err := s.Identity.GetSession(c.UserContext(), token(c))
	if err != nil {
		return s.fail(c, err)
	}
	desc, err := s.OAuth.DescribeConsent(c.UserContext(), string(c.Request().URI().QueryString()))
	if err != nil {
		return s.fail(c, err)
	}
	orgs, err := s.Identity.ListOrganizations(c.UserContext(), token(c))
	if err != nil {
		return s.fail(c, err)
	}
	if orgs == nil {
		orgs = []identity.OrganizationMembership{}
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return s.ok(c, fiber.Map{
		"client": consentClient{ID: desc.Client.ID, Name: desc.Client.Name, Kind: desc.Client.Kind, URI: desc.Client.URI,
			RedirectURI: desc.RedirectURI},
		"scopes":                 desc.Scopes,
		"resource":               desc.Resource,
		"expires_at":             desc.ExpiresAt,
		"organizations":          orgs,
		"active_organization_id": view.Session.ActiveOrganizationID,
	})
}

type consentBody struct {
	Query          string   `json:"query"`
	OrganizationID string   `json:"organization_id"`
	Allow          bool     `json:"allow"`
	Scopes         []string `json:"scopes,omitempty"`
}

// consent records the person's answer; the dashboard sends the browser
// on to the returned redirect URI.
func (s *server) consent(c *fiber.Ctx, in consentBody) (any, error) {
	view, err := s.Identity.GetSession(c.UserContext(), token(c))
	if err != nil {
		return nil, err
	}
	redirect, err := s.OAuth.Consent(c.UserContext(), oauth.ConsentInput{
		Query: in.Query, UserID: view.User.ID, OrganizationID: in.OrganizationID, Allow: in.Allow, Scopes: in.Scopes,
		AuthTime: view.Session.ReauthenticatedAt,
	})
	if err != nil {
		return nil, err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return fiber.Map{"redirect_uri": redirect}, nil
}

func (s *server) listGrants(c *fiber.Ctx) error {
	p, err := s.Identity.AuthenticateSession(c.UserContext(), token(c))
	if err != nil {
		return s.fail(c, err)
	}
	grants, err := s.OAuth.ListGrants(c.UserContext(), p)
	return s.answer(c, grants, err)
}

func (s *server) revokeGrant(c *fiber.Ctx, p access.Principal, in struct {
	GrantID string `json:"grant_id"`
}) (any, error) {
	if err := s.OAuth.RevokeGrant(c.UserContext(), p, in.GrantID); err != nil {
		return nil, err
	}
	return fiber.Map{"grant_id": in.GrantID, "revoked": true}, nil
}
