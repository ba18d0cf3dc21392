package oauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cairnhq/cairn/api/access"
)

// Lifetimes. Access tokens are short because a leaked one works until it
// expires at cairn-mcp (which checks signatures, not rows); /v1 refuses a
// revoked one at once.
const (
	DefaultAccessTokenTTL = time.Hour
	RefreshTokenTTL       = 30 * 24 * time.Hour
	// CodeTTL bounds the time between consent and the code exchange.
	CodeTTL = 5 * time.Minute
	// RequestTTL bounds how long a person may take to sign in and consent.
	RequestTTL = 15 * time.Minute
)

// Grant types, response type and client authentication methods.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantRefreshToken      = "refresh_token"
	ResponseTypeCode       = "code"
	ChallengeS256          = "S256"

	AuthNone              = "none"
	AuthClientSecretPost  = "client_secret_post"
	AuthClientSecretBasic = "client_secret_basic"
)

// Client kinds.
const (
	ClientRegistered       = "registered"
	ClientMetadataDocument = "metadata_document"
	// ClientBuiltin is a client Cairn itself defines (the CLI's).
	ClientBuiltin = "builtin"
)

// OpenID Connect scopes: who the person is, for a client that uses Cairn
// as its identity provider. They grant nothing in Cairn itself.
const (
	ScopeOpenID  = "openid"
	ScopeProfile = "profile"
	ScopeEmail   = "email"
)

// Scopes lists the agent scopes, what a client registers when it names
// none.
var Scopes = []string{access.ScopeMCPTools, access.ScopeMCPWrite}

// IdentityScopes are the OpenID Connect scopes, which any registered or
// metadata-document client may request without registering them.
var IdentityScopes = []string{ScopeOpenID, ScopeProfile, ScopeEmail}

// knownScopes lists every scope the server knows, in canonical order.
var knownScopes = []string{access.ScopeMCPTools, access.ScopeMCPWrite, ScopeOpenID, ScopeProfile, ScopeEmail, ScopeCLI}

// Client is an OAuth client: registered through RFC 7591, or named by the
// URL of its client ID metadata document.
type Client struct {
	ID                      string     `db:"id"`
	Kind                    string     `db:"kind"`
	Name                    string     `db:"name"`
	URI                     *string    `db:"client_uri"`
	RedirectURIs            []string   `db:"-"`
	GrantTypes              []string   `db:"-"`
	Scopes                  []string   `db:"-"`
	TokenEndpointAuthMethod string     `db:"token_endpoint_auth_method"`
	CreatedAt               time.Time  `db:"created_at"`
	RefreshAfter            *time.Time `db:"refresh_after"`
	secretHash              []byte
}

// Public reports whether the client authenticates with nothing but its ID
// (and therefore proves possession through PKCE alone).
func (c Client) Public() bool { return c.TokenEndpointAuthMethod == AuthNone }

// Refreshable reports whether the client asked for refresh tokens.
func (c Client) Refreshable() bool { return slices.Contains(c.GrantTypes, GrantRefreshToken) }

// allows reports whether the client may be granted scopes: those it
// registered, and the OpenID Connect scopes unless it is built in.
func (c Client) allows(scopes []string) bool {
	for _, s := range scopes {
		if !slices.Contains(c.Scopes, s) && (c.Kind == ClientBuiltin || !slices.Contains(IdentityScopes, s)) {
			return false
		}
	}
	return true
}

// redirectAllowed reports whether a redirect URI may receive the client's
// codes.
func (c Client) redirectAllowed(redirectURI string) bool {
	if c.ID == CLIClientID {
		return CLIRedirectMatches(redirectURI)
	}
	return c.Kind != ClientBuiltin && RedirectMatches(c.RedirectURIs, redirectURI)
}

// Grant is a person's consent for a client to act in one organization.
type Grant struct {
	ID             string     `db:"id"`
	ClientID       string     `db:"client_id"`
	OrganizationID string     `db:"organization_id"`
	UserID         string     `db:"user_id"`
	Scopes         []string   `db:"-"`
	Resource       string     `db:"resource"`
	CreatedAt      time.Time  `db:"created_at"`
	LastUsedAt     *time.Time `db:"last_used_at"`
	ExpiresAt      time.Time  `db:"expires_at"`
	RevokedAt      *time.Time `db:"revoked_at"`
}

// Metadata is the client metadata of a registration request (RFC 7591
// §2) or a client ID metadata document. Fields the server does not use
// are ignored, as RFC 7591 requires.
type Metadata struct {
	ClientID                string   `json:"client_id,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	ClientName              string   `json:"client_name,omitempty"`
	ClientURI               string   `json:"client_uri,omitempty"`
	Scope                   string   `json:"scope,omitempty"`
}

const (
	maxRedirectURIs   = 10
	maxURILength      = 512
	maxNameChars      = 200
	maxStateBytes     = 1024
	maxNonceBytes     = 512
	maxClientIDLength = 512
)

// ValidateRedirectURI accepts what a redirect may go to: an https URL, or
// plain http to a loopback host (a native client listening on this
// machine, RFC 8252 §7.3). Custom schemes, other http hosts, fragments and
// credentials are refused, so a code is never sent in clear over a network
// or to an application that merely claims a scheme.
func ValidateRedirectURI(raw string) error {
	if raw == "" || len(raw) > maxURILength || !utf8.ValidString(raw) {
		return describe(ErrInvalidRedirectURI, "a redirect URI must be an absolute URL of at most 512 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return describe(ErrInvalidRedirectURI, "a redirect URI must be an absolute URL")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") || u.User != nil {
		return describe(ErrInvalidRedirectURI, "a redirect URI may not carry a fragment or credentials")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if loopbackHost(u.Hostname()) {
			return nil
		}
	}
	return describe(ErrInvalidRedirectURI, "a redirect URI must use https, or http to a loopback address")
}

// loopbackHost reports whether host names this machine: localhost or a
// loopback IP literal.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// RedirectMatches reports whether requested is one of the registered
// redirect URIs. Matching is exact, except that a loopback URI matches on
// any port: native clients listen on whatever port is free (RFC 8252 §7.3).
func RedirectMatches(registered []string, requested string) bool {
	if ValidateRedirectURI(requested) != nil {
		return false
	}
	if slices.Contains(registered, requested) {
		return true
	}
	req, err := url.Parse(requested)
	if err != nil || req.Scheme != "http" {
		return false
	}
	for _, r := range registered {
		reg, err := url.Parse(r)
		if err != nil || reg.Scheme != "http" || !loopbackHost(reg.Hostname()) {
			continue
		}
		if strings.EqualFold(reg.Hostname(), req.Hostname()) && reg.EscapedPath() == req.EscapedPath() && reg.RawQuery == req.RawQuery {
			return true
		}
	}
	return false
}

// ParseScope parses a space-separated scope request into the canonical,
// sorted set. Unknown scopes are refused, never dropped. mcp:write
// implies mcp:tools, without which no tool can be called.
func ParseScope(raw string) ([]string, error) {
	fields := strings.Fields(raw)
	if len(fields) > 16 || len(raw) > 512 {
		return nil, describe(ErrInvalidScope, "too many scopes")
	}
	var out []string
	for _, f := range fields {
		if !slices.Contains(knownScopes, f) {
			return nil, describe(ErrInvalidScope, "unknown scope")
		}
		out = append(out, f)
	}
	if slices.Contains(out, access.ScopeMCPWrite) {
		out = append(out, access.ScopeMCPTools)
	}
	return canonicalScopes(out), nil
}

// canonicalScopes sorts and deduplicates scopes in their canonical order.
func canonicalScopes(in []string) []string {
	out := []string{}
	for _, s := range knownScopes {
		if slices.Contains(in, s) {
			out = append(out, s)
		}
	}
	return out
}

// subset reports whether every scope of inner is in outer.
func subset(inner, outer []string) bool {
	for _, s := range inner {
		if !slices.Contains(outer, s) {
			return false
		}
	}
	return true
}

// ValidateChallenge checks a PKCE S256 code challenge: the unpadded
// base64url encoding of a SHA-256 digest, 43 characters.
func ValidateChallenge(challenge, method string) error {
	if method != ChallengeS256 {
		// "plain" sends the verifier itself through the browser, which
		// defeats PKCE; OAuth 2.1 lets servers refuse it, and we do.
		return describe(ErrInvalidRequest, "code_challenge_method must be S256")
	}
	if b, err := base64.RawURLEncoding.DecodeString(challenge); err != nil || len(b) != sha256.Size || len(challenge) != 43 {
		return describe(ErrInvalidRequest, "code_challenge must be a base64url SHA-256 digest")
	}
	return nil
}

// VerifyS256 checks a PKCE code verifier (RFC 7636 §4.1: 43–128 unreserved
// characters) against the challenge of its authorization request.
func VerifyS256(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	for _, r := range verifier {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' || r == '~') {
			return false
		}
	}
	sum := sha256.Sum256([]byte(verifier))
	return subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) == 1
}

// validateMetadata checks client metadata and returns the client it
// describes (without ID or secret). kind decides what a metadata document
// may not do: it never gets a shared secret.
func validateMetadata(m Metadata, kind string) (Client, error) {
	c := Client{Kind: kind}
	if len(m.RedirectURIs) == 0 || len(m.RedirectURIs) > maxRedirectURIs {
		return Client{}, describe(ErrInvalidRedirectURI, "between 1 and 10 redirect URIs are required")
	}
	for _, r := range m.RedirectURIs {
		if err := ValidateRedirectURI(r); err != nil {
			return Client{}, err
		}
	}
	c.RedirectURIs = slices.Compact(slices.Sorted(slices.Values(m.RedirectURIs)))

	c.TokenEndpointAuthMethod = m.TokenEndpointAuthMethod
	switch {
	case c.TokenEndpointAuthMethod == "" && kind == ClientMetadataDocument:
		c.TokenEndpointAuthMethod = AuthNone
	case c.TokenEndpointAuthMethod == "":
		// RFC 7591 §2's default.
		c.TokenEndpointAuthMethod = AuthClientSecretBasic
	}
	switch c.TokenEndpointAuthMethod {
	case AuthNone:
	case AuthClientSecretBasic, AuthClientSecretPost:
		if kind == ClientMetadataDocument {
			return Client{}, describe(ErrInvalidClientMetadata, "a client ID metadata document cannot use a shared secret")
		}
	default:
		return Client{}, describe(ErrInvalidClientMetadata, "token_endpoint_auth_method must be none, client_secret_basic or client_secret_post")
	}

	grants := m.GrantTypes
	if len(grants) == 0 {
		grants = []string{GrantAuthorizationCode}
	}
	for _, g := range grants {
		if g != GrantAuthorizationCode && g != GrantRefreshToken {
			return Client{}, describe(ErrInvalidClientMetadata, "grant_types may only be authorization_code and refresh_token")
		}
	}
	if !slices.Contains(grants, GrantAuthorizationCode) {
		return Client{}, describe(ErrInvalidClientMetadata, "grant_types must include authorization_code")
	}
	c.GrantTypes = slices.Compact(slices.Sorted(slices.Values(grants)))
	for _, rt := range m.ResponseTypes {
		if rt != ResponseTypeCode {
			return Client{}, describe(ErrInvalidClientMetadata, "response_types may only be code")
		}
	}

	name := strings.TrimSpace(m.ClientName)
	if utf8.RuneCountInString(name) > maxNameChars || !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		return Client{}, describe(ErrInvalidClientMetadata, "client_name must be at most 200 characters")
	}
	if name == "" {
		name = "Unnamed client"
	}
	c.Name = name
	if m.ClientURI != "" {
		u, err := url.Parse(m.ClientURI)
		if err != nil || len(m.ClientURI) > maxURILength || u.Scheme != "https" || u.Host == "" || u.User != nil {
			return Client{}, describe(ErrInvalidClientMetadata, "client_uri must be an https URL")
		}
		c.URI = &m.ClientURI
	}
	scopes := slices.Clone(Scopes)
	if m.Scope != "" {
		parsed, err := ParseScope(m.Scope)
		if err != nil {
			return Client{}, err
		}
		if slices.Contains(parsed, ScopeCLI) {
			return Client{}, describe(ErrInvalidClientMetadata, "the "+ScopeCLI+" scope belongs to the built-in CLI client")
		}
		scopes = parsed
	}
	c.Scopes = scopes
	return c, nil
}

// ValidateMetadataDocumentURL checks a client_id that names a client ID
// metadata document: an https URL with a path and nothing that could make
// two spellings name one client (fragment, credentials, dot segments).
func ValidateMetadataDocumentURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || len(raw) > maxClientIDLength || u.Scheme != "https" || u.Host == "" || u.User != nil ||
		u.Fragment != "" || strings.Contains(raw, "#") || u.Path == "" || u.Path == "/" {
		return describe(ErrInvalidClient, "a URL client_id must be an https URL with a path")
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return describe(ErrInvalidClient, "a URL client_id must not contain dot segments")
		}
	}
	return nil
}

// IsMetadataDocumentID reports whether a client_id is a URL (a client ID
// metadata document) rather than an ID this server issued.
func IsMetadataDocumentID(clientID string) bool { return strings.HasPrefix(clientID, "https://") }

// ValidateState bounds the client's opaque state.
func ValidateState(state string) error {
	if len(state) > maxStateBytes || !utf8.ValidString(state) || strings.ContainsRune(state, 0) {
		return describe(ErrInvalidRequest, "state must be at most 1024 bytes of text")
	}
	return nil
}

// ValidateNonce bounds the OpenID Connect nonce, echoed in the ID token.
func ValidateNonce(nonce string) error {
	if len(nonce) > maxNonceBytes || !utf8.ValidString(nonce) || strings.ContainsRune(nonce, 0) {
		return describe(ErrInvalidRequest, "nonce must be at most 512 bytes of text")
	}
	return nil
}

// joinScopes renders scopes as an OAuth scope string.
func joinScopes(scopes []string) string { return strings.Join(scopes, " ") }

// checkResource compares a requested RFC 8707 resource with the one
// resource this server issues tokens for. Scheme and host compare without
// case (both are case-insensitive); the path compares exactly.
func checkResource(requested, resource string) error {
	if requested == resource {
		return nil
	}
	r, err1 := url.Parse(requested)
	want, err2 := url.Parse(resource)
	if err1 == nil && err2 == nil && r.Fragment == "" && strings.EqualFold(r.Scheme, want.Scheme) &&
		strings.EqualFold(r.Host, want.Host) && r.EscapedPath() == want.EscapedPath() && r.RawQuery == want.RawQuery {
		return nil
	}
	return describe(ErrInvalidTarget, fmt.Sprintf("resource must be %s", resource))
}
