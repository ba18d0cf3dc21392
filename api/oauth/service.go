package oauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/authcache"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/signingkey"
	"github.com/cairnhq/cairn/api/team"
)

// Options configure the authorization server.
type Options struct {
	// Issuer is the API's public origin (CAIRN_PUBLIC_URL), the "iss" of
	// every token and the issuer of the discovery documents.
	Issuer string
	// Resource is the one protected resource tokens are issued for, the
	// agent endpoint {mcp_url}/mcp: every access token's only audience.
	Resource string
	// ConsentURL is the dashboard's consent screen.
	ConsentURL string
	// SigningSeed derives the Ed25519 signing key; TokenKey keys the
	// stored hashes of codes, tokens and client secrets; RequestKey signs
	// authorization requests on their way through the dashboard. All
	// derive from AUTH_SECRET.
	SigningSeed []byte
	TokenKey    []byte
	RequestKey  []byte
	// AccessTokenTTL is the access token lifetime (DefaultAccessTokenTTL).
	AccessTokenTTL time.Duration
	// Metadata fetches client ID metadata documents; nil turns them off.
	Metadata *MetadataFetcher
	// IDTokenKeys signs ID tokens (RS256, keys of their own); nil refuses
	// the openid scope.
	IDTokenKeys *signingkey.Ring
	// UserTokens issues the user API token the CLI's code exchange
	// answers; nil refuses the exchange.
	UserTokens *identity.Service
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Service is the authorization server.
type Service struct {
	db     *sqlx.DB
	opts   Options
	signer *Signer
	now    func() time.Time
	// principals keeps what access tokens resolved to (nil: every
	// request reads its token).
	principals *authcache.Cache
}

// CachePrincipals serves access tokens presented again from c (cairn-api's,
// whose listener forgets them on any change).
func (s *Service) CachePrincipals(c *authcache.Cache) { s.principals = c }

// NewService returns the authorization server.
func NewService(conn *sqlx.DB, opts Options) (*Service, error) {
	signer, err := NewSigner(opts.SigningSeed)
	if err != nil {
		return nil, err
	}
	if len(opts.TokenKey) < 32 || len(opts.RequestKey) < 32 || opts.Issuer == "" || opts.Resource == "" || opts.ConsentURL == "" {
		return nil, errors.New("oauth: keys, issuer, resource and consent URL are required")
	}
	if opts.AccessTokenTTL <= 0 {
		opts.AccessTokenTTL = DefaultAccessTokenTTL
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Service{db: conn, opts: opts, signer: signer, now: now}, nil
}

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Issuer is the authorization server's issuer identifier.
func (s *Service) Issuer() string { return s.opts.Issuer }

// Resource is the audience of every access token.
func (s *Service) Resource() string { return s.opts.Resource }

// KeySet is the JWKS that verifies access tokens.
func (s *Service) KeySet() jose.JSONWebKeySet { return s.signer.KeySet() }

// JWKS is the published key set: the access tokens' key and the ID
// tokens' keys. Each verifier picks by kid and algorithm, so neither kind
// of token verifies as the other.
func (s *Service) JWKS(ctx context.Context) (map[string][]any, error) {
	keys := []any{}
	for _, k := range s.signer.KeySet().Keys {
		keys = append(keys, k)
	}
	if s.opts.IDTokenKeys != nil {
		idKeys, err := s.opts.IDTokenKeys.JWKS(ctx)
		if err != nil {
			return nil, err
		}
		for _, k := range idKeys {
			keys = append(keys, k)
		}
	}
	return map[string][]any{"keys": keys}, nil
}

// OpenID reports whether ID tokens can be issued.
func (s *Service) OpenID() bool { return s.opts.IDTokenKeys != nil }

// MetadataDocuments reports whether URL client IDs are accepted.
func (s *Service) MetadataDocuments() bool { return s.opts.Metadata != nil }

var secretEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newSecret returns prefix and 256 random bits.
func newSecret(prefix string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating secret: %w", err)
	}
	return prefix + secretEncoding.EncodeToString(b), nil
}

// hash is the keyed hash under which a secret of one kind is stored.
func (s *Service) hash(kind, secret string) []byte {
	m := hmac.New(sha256.New, s.opts.TokenKey)
	m.Write([]byte("oauth-" + kind + "\x00" + secret))
	return m.Sum(nil)
}

// Registered is a newly registered client and, for a confidential one,
// its secret, which exists only in this value.
type Registered struct {
	Client Client
	Secret string
}

// Register registers a client from RFC 7591 metadata. Registration is
// open to anyone (callers rate-limit it per address); what a client can
// then do is bounded by the redirect URIs it registered and by what a
// person consents to.
func (s *Service) Register(ctx context.Context, m Metadata) (Registered, error) {
	c, err := validateMetadata(m, ClientRegistered)
	if err != nil {
		return Registered{}, err
	}
	c.ID, c.CreatedAt = id.New("ocl"), s.stamp()
	var out Registered
	var secretHash []byte
	if !c.Public() {
		if out.Secret, err = newSecret("ocs_"); err != nil {
			return Registered{}, err
		}
		secretHash = s.hash("client-secret", out.Secret)
	}
	if err := insertClient(ctx, s.db, c, secretHash); err != nil {
		return Registered{}, err
	}
	out.Client = c
	return out, nil
}

// client resolves a client_id: an ID this server issued, or the URL of a
// client ID metadata document, fetched (or its cached copy) on demand.
func (s *Service) client(ctx context.Context, clientID string) (Client, error) {
	if clientID == "" || len(clientID) > maxClientIDLength {
		return Client{}, describe(ErrInvalidClient, "unknown client")
	}
	if !IsMetadataDocumentID(clientID) {
		c, err := clientByID(ctx, s.db, clientID)
		if errors.Is(err, fault.ErrNotFound) || (err == nil && c.Kind != ClientRegistered && c.Kind != ClientBuiltin) {
			return Client{}, describe(ErrInvalidClient, "unknown client")
		}
		return c, err
	}
	if s.opts.Metadata == nil {
		return Client{}, describe(ErrInvalidClient, "client ID metadata documents are not accepted")
	}
	now := s.stamp()
	cached, err := clientByID(ctx, s.db, clientID)
	if err == nil && cached.RefreshAfter != nil && now.Before(*cached.RefreshAfter) {
		return cached, nil
	}
	if err != nil && !errors.Is(err, fault.ErrNotFound) {
		return Client{}, err
	}
	fetched, lifetime, err := s.opts.Metadata.Fetch(ctx, clientID)
	if err != nil {
		return Client{}, err
	}
	refresh := now.Add(lifetime)
	fetched.CreatedAt, fetched.RefreshAfter = now, &refresh
	if err := saveMetadataClient(ctx, s.db, fetched); err != nil {
		return Client{}, err
	}
	return fetched, nil
}

// AuthorizeInput is an authorization request as received.
type AuthorizeInput struct {
	ClientID            string
	RedirectURI         string
	ResponseType        string
	Scope               string
	State               string
	CodeChallenge       string
	CodeChallengeMethod string
	Resources           []string
	Nonce               string
}

// Authorize validates an authorization request and returns where the
// person goes next: the dashboard's consent screen, with the request
// signed into its query. An unknown client or redirect URI is a plain
// *Error (never redirected: the redirect URI is not trusted); anything
// else wrong is a *RedirectError for the client's redirect URI.
func (s *Service) Authorize(ctx context.Context, in AuthorizeInput) (string, error) {
	c, err := s.client(ctx, in.ClientID)
	if err != nil {
		return "", err
	}
	if !c.redirectAllowed(in.RedirectURI) {
		return "", describe(ErrInvalidRequest, "redirect_uri is not registered for this client")
	}
	if err := ValidateState(in.State); err != nil {
		return "", err
	}
	// fail reports a protocol error at the redirect URI; anything else
	// (none of the checks below returns one) is not redirected.
	fail := func(err error) (string, error) {
		var e *Error
		if !errors.As(err, &e) {
			return "", err
		}
		return "", &RedirectError{Err: e, RedirectURI: in.RedirectURI, State: in.State}
	}
	if in.ResponseType != ResponseTypeCode {
		return fail(describe(ErrUnsupportedResponse, "response_type must be code"))
	}
	if err := ValidateChallenge(in.CodeChallenge, in.CodeChallengeMethod); err != nil {
		return fail(err)
	}
	resource, err := s.resourceFor(c, in.Resources)
	if err != nil {
		return fail(err)
	}
	scopes := c.Scopes
	if in.Scope != "" {
		if scopes, err = ParseScope(in.Scope); err != nil {
			return fail(err)
		}
	}
	if !c.allows(scopes) {
		return fail(describe(ErrInvalidScope, "the client did not register this scope"))
	}
	if slices.Contains(scopes, ScopeOpenID) && s.opts.IDTokenKeys == nil {
		return fail(describe(ErrInvalidScope, "ID tokens are not available: no master key to sign them"))
	}
	if err := ValidateNonce(in.Nonce); err != nil {
		return fail(err)
	}
	req := AuthorizationRequest{
		ClientID: c.ID, RedirectURI: in.RedirectURI, Scopes: scopes, State: in.State,
		CodeChallenge: in.CodeChallenge, Resource: resource, Nonce: in.Nonce, ExpiresAt: s.stamp().Add(RequestTTL),
	}
	return s.opts.ConsentURL + "?" + signRequest(s.opts.RequestKey, req), nil
}

// resourceFor checks the RFC 8707 resources of a request: none (the one
// resource there is) or exactly that one. A token has exactly one
// audience, so two resources cannot be honoured. The CLI names none: its
// token is for the remote-backend API.
func (s *Service) resourceFor(c Client, resources []string) (string, error) {
	if c.ID == CLIClientID {
		if len(resources) > 0 {
			return "", describe(ErrInvalidTarget, "the CLI's token names no resource")
		}
		return s.cliResource(), nil
	}
	switch len(resources) {
	case 0:
		return s.opts.Resource, nil
	case 1:
		if err := checkResource(resources[0], s.opts.Resource); err != nil {
			return "", err
		}
		return s.opts.Resource, nil
	}
	return "", describe(ErrInvalidTarget, "exactly one resource may be requested")
}

// ConsentView is what the consent screen shows.
type ConsentView struct {
	Client      Client
	Scopes      []string
	Resource    string
	RedirectURI string
	ExpiresAt   time.Time
}

// DescribeConsent checks a signed request from the consent screen and
// returns what the person is asked to allow.
func (s *Service) DescribeConsent(ctx context.Context, query string) (ConsentView, error) {
	req, c, err := s.consentRequest(ctx, query)
	if err != nil {
		return ConsentView{}, err
	}
	return ConsentView{Client: c, Scopes: req.Scopes, Resource: req.Resource, RedirectURI: req.RedirectURI, ExpiresAt: req.ExpiresAt}, nil
}

func (s *Service) consentRequest(ctx context.Context, query string) (AuthorizationRequest, Client, error) {
	req, err := verifyRequest(s.opts.RequestKey, query, s.now())
	if err != nil {
		return AuthorizationRequest{}, Client{}, err
	}
	c, err := s.client(ctx, req.ClientID)
	if err != nil {
		return AuthorizationRequest{}, Client{}, err
	}
	if !c.redirectAllowed(req.RedirectURI) || !c.allows(req.Scopes) {
		return AuthorizationRequest{}, Client{}, describe(ErrInvalidRequest, "the client changed since the request")
	}
	return req, c, nil
}

// ConsentInput is the person's answer on the consent screen.
type ConsentInput struct {
	Query          string
	UserID         string
	OrganizationID string
	Allow          bool
	// Scopes narrows what was requested (the person may withhold
	// mcp:write); empty keeps the request's.
	Scopes []string
	// AuthTime is when the person last authenticated in the consenting
	// session: the ID token's auth_time.
	AuthTime time.Time
}

// Consent records the person's answer and returns the client's redirect
// URI carrying the authorization code (or access_denied). Allowing
// creates the grant, bound to the chosen organization, in which the
// person must be a member now; the code binds the redirect URI and the
// PKCE challenge of the request.
func (s *Service) Consent(ctx context.Context, in ConsentInput) (string, error) {
	req, c, err := s.consentRequest(ctx, in.Query)
	if err != nil {
		return "", err
	}
	if !in.Allow {
		return redirectWith(req.RedirectURI, url.Values{
			"error": {ErrAccessDenied.Code}, "error_description": {"the person declined"}, "state": {req.State}, "iss": {s.opts.Issuer},
		}), nil
	}
	scopes := req.Scopes
	if len(in.Scopes) > 0 {
		if scopes, err = ParseScope(joinScopes(in.Scopes)); err != nil {
			return "", err
		}
		if !subset(scopes, req.Scopes) {
			return "", describe(ErrInvalidScope, "only requested scopes can be granted")
		}
	}
	now := s.stamp()
	code, err := newSecret("")
	if err != nil {
		return "", err
	}
	var authTime *time.Time
	if !in.AuthTime.IsZero() {
		authTime = &in.AuthTime
	}
	g := Grant{
		ID: id.New("ogr"), ClientID: c.ID, OrganizationID: in.OrganizationID, UserID: in.UserID,
		Scopes: scopes, Resource: req.Resource, CreatedAt: now, ExpiresAt: now.Add(CodeTTL),
	}
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if _, err := membershipRole(ctx, tx, in.OrganizationID, in.UserID); err != nil {
			return err
		}
		if err := insertGrant(ctx, tx, g); err != nil {
			return err
		}
		if err := insertCode(ctx, tx, codeRow{GrantID: g.ID, RedirectURI: req.RedirectURI, CodeChallenge: req.CodeChallenge,
			ExpiresAt: g.ExpiresAt, Nonce: req.Nonce, AuthTime: authTime}, s.hash("code", code)); err != nil {
			return err
		}
		return audit.Record(ctx, tx, grantPrincipal(g, false), "oauth_grant.created", "oauth_grant", g.ID,
			map[string]any{"client_id": c.ID, "client_name": c.Name, "scopes": g.Scopes})
	})
	if err != nil {
		return "", err
	}
	return redirectWith(req.RedirectURI, url.Values{"code": {code}, "state": {req.State}, "iss": {s.opts.Issuer}}), nil
}

// grantPrincipal is who acts when a grant changes: the person, or (for
// events the client causes) the client acting for them.
func grantPrincipal(g Grant, byClient bool) access.Principal {
	p := access.Principal{Kind: access.KindUser, ID: g.UserID, OrganizationID: g.OrganizationID}
	if byClient {
		p.Agent = &access.Agent{ClientID: g.ClientID, GrantID: g.ID}
	}
	return p
}

// redirectWith adds parameters to a redirect URI, keeping its own query
// (RFC 6749 §3.1.2). Empty values are left out.
func redirectWith(redirectURI string, params url.Values) string {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return redirectURI
	}
	q := u.Query()
	for k, vs := range params {
		for _, v := range vs {
			if v != "" {
				q.Set(k, v)
			}
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// TokenInput is a token request (RFC 6749 §3.2) with the client's
// credentials as presented.
type TokenInput struct {
	GrantType    string
	Code         string
	RedirectURI  string
	CodeVerifier string
	RefreshToken string
	Scope        string
	Resources    []string
	ClientID     string
	ClientSecret string
	// BasicAuth says the credentials came in an Authorization header.
	BasicAuth bool
}

// TokenResponse is a successful token response (RFC 6749 §5.1).
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	// ExpiresIn is absent for the CLI's user token, which does not expire.
	ExpiresIn    int    `json:"expires_in,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope"`
	// IDToken is the OpenID Connect ID token, for the openid scope.
	IDToken string `json:"id_token,omitempty"`
}

// Token answers a token request: an authorization code exchange or a
// refresh.
func (s *Service) Token(ctx context.Context, in TokenInput) (TokenResponse, error) {
	c, err := s.authenticateClient(ctx, in.ClientID, in.ClientSecret, in.BasicAuth)
	if err != nil {
		return TokenResponse{}, err
	}
	if !slices.Contains(c.GrantTypes, in.GrantType) {
		if in.GrantType != GrantAuthorizationCode && in.GrantType != GrantRefreshToken {
			return TokenResponse{}, describe(ErrUnsupportedGrantType, "grant_type must be authorization_code or refresh_token")
		}
		return TokenResponse{}, describe(ErrUnauthorizedClient, "the client did not register this grant type")
	}
	if in.GrantType == GrantAuthorizationCode {
		return s.exchangeCode(ctx, c, in)
	}
	return s.refresh(ctx, c, in)
}

// authenticateClient checks the client's credentials the way it
// registered to present them: nothing for a public client, its secret in
// the header or the body for a confidential one.
func (s *Service) authenticateClient(ctx context.Context, clientID, secret string, basic bool) (Client, error) {
	c, err := s.client(ctx, clientID)
	if err != nil {
		return Client{}, describe(ErrInvalidClient, "client authentication failed")
	}
	ok := false
	switch c.TokenEndpointAuthMethod {
	case AuthNone:
		ok = secret == "" && !basic
	case AuthClientSecretBasic:
		ok = basic && hmac.Equal(s.hash("client-secret", secret), c.secretHash)
	case AuthClientSecretPost:
		ok = !basic && secret != "" && hmac.Equal(s.hash("client-secret", secret), c.secretHash)
	}
	if !ok {
		return Client{}, describe(ErrInvalidClient, "client authentication failed")
	}
	return c, nil
}

var (
	errCodeInvalid    = describe(ErrInvalidGrant, "the authorization code is invalid, expired or used")
	errRefreshInvalid = describe(ErrInvalidGrant, "the refresh token is invalid, expired or used")
)

func (s *Service) exchangeCode(ctx context.Context, c Client, in TokenInput) (TokenResponse, error) {
	if in.Code == "" || len(in.Code) > 256 {
		return TokenResponse{}, describe(ErrInvalidRequest, "code is required")
	}
	if in.CodeVerifier == "" {
		return TokenResponse{}, describe(ErrInvalidRequest, "code_verifier is required")
	}
	codeHash := s.hash("code", in.Code)
	var out TokenResponse
	replayed := false
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		code, err := lockCode(ctx, tx, codeHash)
		if errors.Is(err, fault.ErrNotFound) {
			return errCodeInvalid
		}
		if err != nil {
			return err
		}
		g, err := lockGrant(ctx, tx, code.GrantID)
		if err != nil {
			return err
		}
		if g.ClientID != c.ID {
			return errCodeInvalid
		}
		now := s.stamp()
		if code.UsedAt != nil {
			// A code used twice was intercepted or replayed: everything it
			// issued is revoked (RFC 6749 §4.1.2), and that must commit.
			replayed = true
			return s.revokeGrant(ctx, tx, g, "code_replayed", now)
		}
		if !now.Before(code.ExpiresAt) || g.RevokedAt != nil || in.RedirectURI != code.RedirectURI {
			return errCodeInvalid
		}
		if !VerifyS256(in.CodeVerifier, code.CodeChallenge) {
			return describe(ErrInvalidGrant, "code_verifier does not match the code_challenge")
		}
		if _, err := s.resourceFor(c, in.Resources); err != nil {
			return err
		}
		if err := markCodeUsed(ctx, tx, codeHash, now); err != nil {
			return err
		}
		if err := requireMember(ctx, tx, g); err != nil {
			return err
		}
		if c.ID == CLIClientID {
			out, err = s.issueUserToken(ctx, tx, g, now)
			return err
		}
		if out, err = s.issue(ctx, tx, c, g, g.Scopes, now); err != nil {
			return err
		}
		if slices.Contains(g.Scopes, ScopeOpenID) {
			out.IDToken, err = s.idToken(ctx, tx, c, g, code, now)
		}
		return err
	})
	if err == nil && replayed {
		return TokenResponse{}, errCodeInvalid
	}
	return out, err
}

func (s *Service) refresh(ctx context.Context, c Client, in TokenInput) (TokenResponse, error) {
	if in.RefreshToken == "" || len(in.RefreshToken) > 256 {
		return TokenResponse{}, describe(ErrInvalidRequest, "refresh_token is required")
	}
	tokenHash := s.hash("refresh-token", in.RefreshToken)
	var out TokenResponse
	replayed := false
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		rt, err := lockRefreshToken(ctx, tx, tokenHash)
		if errors.Is(err, fault.ErrNotFound) {
			return errRefreshInvalid
		}
		if err != nil {
			return err
		}
		g, err := lockGrant(ctx, tx, rt.GrantID)
		if err != nil {
			return err
		}
		if g.ClientID != c.ID {
			return errRefreshInvalid
		}
		now := s.stamp()
		if rt.UsedAt != nil && g.RevokedAt == nil {
			// A rotated-out refresh token came back: two parties hold the
			// chain, and neither can be told from the other. End it.
			replayed = true
			return s.revokeGrant(ctx, tx, g, "refresh_token_replayed", now)
		}
		if rt.UsedAt != nil || rt.RevokedAt != nil || g.RevokedAt != nil || !now.Before(rt.ExpiresAt) {
			return errRefreshInvalid
		}
		scopes := []string(rt.Scopes)
		if in.Scope != "" {
			narrowed, err := ParseScope(in.Scope)
			if err != nil {
				return err
			}
			if !subset(narrowed, scopes) {
				return describe(ErrInvalidScope, "a refresh cannot widen the grant")
			}
			scopes = narrowed
		}
		if _, err := s.resourceFor(c, in.Resources); err != nil {
			return err
		}
		if err := requireMember(ctx, tx, g); err != nil {
			return err
		}
		if err := markRefreshUsed(ctx, tx, rt.ID, now); err != nil {
			return err
		}
		out, err = s.issue(ctx, tx, c, g, scopes, now)
		return err
	})
	if err == nil && replayed {
		return TokenResponse{}, errRefreshInvalid
	}
	return out, err
}

// requireMember refuses to issue tokens for a grant whose person is no
// longer a member of its organization (or is banned).
func requireMember(ctx context.Context, tx *sqlx.Tx, g Grant) error {
	_, err := membershipRole(ctx, tx, g.OrganizationID, g.UserID)
	if errors.Is(err, fault.ErrNotFound) {
		return describe(ErrInvalidGrant, "the person is no longer a member of the organization")
	}
	return err
}

// issue signs an access token for the grant (and a refresh token when the
// client uses them) and stores their keyed hashes.
func (s *Service) issue(ctx context.Context, tx *sqlx.Tx, c Client, g Grant, scopes []string, now time.Time) (TokenResponse, error) {
	expires := now.Add(s.opts.AccessTokenTTL)
	claims := Claims{
		Issuer: s.opts.Issuer, Subject: g.UserID, Audience: jwt.Audience{g.Resource},
		Expiry: jwt.NewNumericDate(expires), IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now),
		ID: id.New("oat"), ClientID: c.ID, Scope: joinScopes(scopes), OrganizationID: g.OrganizationID,
	}
	token, err := s.signer.Sign(claims)
	if err != nil {
		return TokenResponse{}, err
	}
	if err := insertAccessToken(ctx, tx, claims.ID, s.hash("access-token", token), g.ID, scopes, now, expires); err != nil {
		return TokenResponse{}, err
	}
	out := TokenResponse{AccessToken: token, TokenType: "Bearer", ExpiresIn: int(s.opts.AccessTokenTTL.Seconds()), Scope: claims.Scope}
	lastExpiry := expires
	if c.Refreshable() {
		if out.RefreshToken, err = newSecret("ort_"); err != nil {
			return TokenResponse{}, err
		}
		lastExpiry = now.Add(RefreshTokenTTL)
		if err := insertRefreshToken(ctx, tx, id.New("ort"), s.hash("refresh-token", out.RefreshToken), g.ID, scopes, now, lastExpiry); err != nil {
			return TokenResponse{}, err
		}
	}
	return out, touchGrant(ctx, tx, g.ID, now, lastExpiry)
}

// revokeGrant ends a grant and everything it issued, with its audit event.
func (s *Service) revokeGrant(ctx context.Context, tx *sqlx.Tx, g Grant, reason string, now time.Time) error {
	if g.RevokedAt != nil {
		return nil
	}
	if err := revokeGrantRow(ctx, tx, g.ID, reason, now); err != nil {
		return err
	}
	byClient := reason != "revoked"
	return audit.Record(ctx, tx, grantPrincipal(g, byClient), "oauth_grant.revoked", "oauth_grant", g.ID,
		map[string]any{"client_id": g.ClientID, "reason": reason})
}

// RevokeInput is a revocation request (RFC 7009).
type RevokeInput struct {
	Token        string
	ClientID     string
	ClientSecret string
	BasicAuth    bool
}

// Revoke revokes a refresh token (and with it the whole grant, so its
// access tokens stop at once) or a single access token. A token that is
// unknown, already revoked or issued to another client is left alone and
// answered the same way (RFC 7009 §2.2).
func (s *Service) Revoke(ctx context.Context, in RevokeInput) error {
	c, err := s.authenticateClient(ctx, in.ClientID, in.ClientSecret, in.BasicAuth)
	if err != nil {
		return err
	}
	if in.Token == "" || len(in.Token) > maxTokenBytes {
		return nil
	}
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		now := s.stamp()
		if rt, err := lockRefreshToken(ctx, tx, s.hash("refresh-token", in.Token)); err == nil {
			g, err := lockGrant(ctx, tx, rt.GrantID)
			if err != nil || g.ClientID != c.ID {
				return err
			}
			return s.revokeGrant(ctx, tx, g, "token_revoked", now)
		} else if !errors.Is(err, fault.ErrNotFound) {
			return err
		}
		at, err := lockAccessToken(ctx, tx, s.hash("access-token", in.Token))
		if errors.Is(err, fault.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		g, err := lockGrant(ctx, tx, at.GrantID)
		if err != nil || g.ClientID != c.ID || at.RevokedAt != nil {
			return err
		}
		if err := revokeAccessTokenRow(ctx, tx, at.ID, now); err != nil {
			return err
		}
		return audit.Record(ctx, tx, grantPrincipal(g, true), "oauth_access_token.revoked", "oauth_grant", g.ID,
			map[string]any{"client_id": g.ClientID, "jti": at.ID})
	})
}

// AuthenticateAccessToken resolves an agent's bearer token for /v1: a
// valid signature and claims, then its stored row (so a revoked token, or
// one of a revoked grant, fails at once), then the person's live
// membership in the token's organization, exactly as for a session. The
// principal acts as the person within the agent ceiling of its scopes.
// A bad token is ErrInvalidToken; one without mcp:tools is
// ErrInsufficientScope; a membership that ended is fault.ErrForbidden.
func (s *Service) AuthenticateAccessToken(ctx context.Context, raw string) (access.Principal, error) {
	// A token presented again is its exact bytes again: what it resolved
	// to is kept until the token expires or anything it was read from
	// changes.
	key := "agent\x00" + string(s.hash("access-token", raw))
	if p, ok := s.principals.Lookup(key); ok {
		return p, nil
	}
	ticket := s.principals.Ticket()
	row, err := s.liveToken(ctx, raw)
	if err != nil {
		return access.Principal{}, err
	}
	scopes := []string(row.Scopes)
	if !slices.Contains(scopes, access.ScopeMCPTools) {
		return access.Principal{}, ErrInsufficientScope
	}
	if row.Role == nil {
		return access.Principal{}, fmt.Errorf("membership ended: %w", fault.ErrForbidden)
	}
	role := access.Role(*row.Role)
	write := slices.Contains(scopes, access.ScopeMCPWrite)
	grants, err := team.DecodeGrants(row.TeamGrants)
	if err != nil {
		return access.Principal{}, err
	}
	p := access.Principal{
		Kind: access.KindUser, ID: row.UserID, Name: row.UserName, OrganizationID: row.OrganizationID,
		Role: role, Permissions: access.AgentPermissions(role, write), TokenID: row.TokenID,
		Grants: grants.Within(access.AgentCeiling(write)),
		Agent:  &access.Agent{ClientID: row.ClientID, GrantID: row.GrantID, TokenID: row.TokenID, Write: write},
	}
	// The token's exp claim is its row's expiry truncated to the second:
	// a kept principal goes with the earlier of the two.
	s.principals.Keep(ticket, key, p, row.ExpiresAt.Truncate(time.Second))
	return p, nil
}

// liveToken checks an access token's claims, then resolves it to its
// stored row by the keyed hash of its exact bytes, which authenticates it
// (so a forged or altered token, a revoked one, or one of a revoked grant
// or a banned person, fails at once), and checks that both say the same.
func (s *Service) liveToken(ctx context.Context, raw string) (liveAccessToken, error) {
	// The row found by the token's keyed hash authenticates it (see
	// ReadIssuedAccessToken); the claims must still match that row.
	claims, err := ReadIssuedAccessToken(raw, s.signer.KeySet(), s.opts.Issuer, s.opts.Resource, s.now())
	if err != nil {
		return liveAccessToken{}, ErrInvalidToken
	}
	row, err := accessTokenByHash(ctx, s.db, s.hash("access-token", raw))
	if err != nil {
		return liveAccessToken{}, err
	}
	if row.TokenID != claims.ID || row.UserID != claims.Subject || row.OrganizationID != claims.OrganizationID || row.ClientID != claims.ClientID {
		return liveAccessToken{}, ErrInvalidToken
	}
	return row, nil
}

// ListGrants lists the live grants of the principal's organization: all
// of them for a member manager, otherwise the principal's own.
func (s *Service) ListGrants(ctx context.Context, p access.Principal) ([]GrantView, error) {
	if err := p.Require(access.PermOrganizationRead); err != nil {
		return nil, err
	}
	if err := p.RequireHuman(); err != nil {
		return nil, err
	}
	userID := p.ID
	if p.Permissions.Has(access.PermMemberManage) {
		userID = ""
	}
	return listLiveGrants(ctx, s.db, p.OrganizationID, userID)
}

// RevokeGrant revokes a grant of the principal's organization: their own,
// or anyone's for a member manager. Others' grants, and other
// organizations', are not found.
func (s *Service) RevokeGrant(ctx context.Context, p access.Principal, grantID string) error {
	if err := p.RequireHuman(); err != nil {
		return err
	}
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		g, err := lockGrant(ctx, tx, grantID)
		if err != nil {
			return err
		}
		if g.OrganizationID != p.OrganizationID || (g.UserID != p.ID && !p.Permissions.Has(access.PermMemberManage)) {
			return fault.ErrNotFound
		}
		if g.RevokedAt != nil {
			return nil
		}
		now := s.stamp()
		if err := revokeGrantRow(ctx, tx, g.ID, "revoked", now); err != nil {
			return err
		}
		return audit.Record(ctx, tx, p, "oauth_grant.revoked", "oauth_grant", g.ID,
			map[string]any{"client_id": g.ClientID, "reason": "revoked", "user_id": g.UserID})
	})
}

// S256Challenge is the PKCE S256 challenge of a verifier (what a client
// sends with its authorization request).
func S256Challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
