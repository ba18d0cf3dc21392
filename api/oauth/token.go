package oauth

import (
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// AccessTokenType is the JWT "typ" of access tokens (RFC 9068), so an
// access token is never mistaken for another JWT signed by the same
// issuer, nor another JWT for an access token.
const AccessTokenType = "at+jwt"

// SigningAlgorithm is the only algorithm access tokens use. Ed25519 keys
// derive deterministically from a 32-byte seed, so every API replica
// signs with the same key from AUTH_SECRET alone, with no key store.
const SigningAlgorithm = jose.EdDSA

// Claims are the claims of an access token. OrganizationID is the
// organization chosen at consent: /v1 acts in it and nowhere else.
type Claims struct {
	Issuer         string           `json:"iss"`
	Subject        string           `json:"sub"`
	Audience       jwt.Audience     `json:"aud"`
	Expiry         *jwt.NumericDate `json:"exp"`
	NotBefore      *jwt.NumericDate `json:"nbf,omitempty"`
	IssuedAt       *jwt.NumericDate `json:"iat"`
	ID             string           `json:"jti"`
	ClientID       string           `json:"client_id"`
	Scope          string           `json:"scope"`
	OrganizationID string           `json:"org_id"`
}

// Scopes returns the token's scopes.
func (c Claims) Scopes() []string { return strings.Fields(c.Scope) }

// Signer signs access tokens with one Ed25519 key.
type Signer struct {
	// keys is the public key set, built once: /v1 verifies every bearer
	// against it.
	keys   jose.JSONWebKeySet
	signer jose.Signer
}

// NewSigner derives the signing key from a 32-byte seed.
func NewSigner(seed []byte) (*Signer, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("oauth: the signing seed must be %d bytes", ed25519.SeedSize)
	}
	key := ed25519.NewKeyFromSeed(seed)
	public := jose.JSONWebKey{Key: key.Public(), Algorithm: string(SigningAlgorithm), Use: "sig"}
	thumb, err := public.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("oauth: key thumbprint: %w", err)
	}
	public.KeyID = base64.RawURLEncoding.EncodeToString(thumb)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: SigningAlgorithm, Key: key},
		(&jose.SignerOptions{}).WithType(AccessTokenType).WithHeader("kid", public.KeyID))
	if err != nil {
		return nil, fmt.Errorf("oauth: creating signer: %w", err)
	}
	return &Signer{keys: jose.JSONWebKeySet{Keys: []jose.JSONWebKey{public}}, signer: signer}, nil
}

// Sign returns the compact JWT of claims.
func (s *Signer) Sign(c Claims) (string, error) {
	token, err := jwt.Signed(s.signer).Claims(c).Serialize()
	if err != nil {
		return "", fmt.Errorf("signing access token: %w", err)
	}
	return token, nil
}

// KeySet is the public JSON Web Key Set that verifies the signer's tokens.
func (s *Signer) KeySet() jose.JSONWebKeySet { return s.keys }

// maxTokenBytes bounds what is parsed at all.
const maxTokenBytes = 4096

// VerifyAccessToken checks an access token against a key set: the
// signature (EdDSA only, by kid), the "at+jwt" type, the issuer, exactly
// one audience equal to audience, and expiry, not-before and issue times
// with leeway for clock skew. Every failure is ErrInvalidToken. cairn-mcp
// calls it with the JWKS it fetched; /v1 reads its own tokens with
// ReadIssuedAccessToken, and both judge the header and the claims with
// the same checkHeader and checkClaims.
func VerifyAccessToken(raw string, keys jose.JSONWebKeySet, issuer, audience string, now time.Time, leeway time.Duration) (Claims, error) {
	if raw == "" || len(raw) > maxTokenBytes {
		return Claims{}, ErrInvalidToken
	}
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{SigningAlgorithm})
	if err != nil || len(tok.Headers) != 1 {
		return Claims{}, ErrInvalidToken
	}
	h := tok.Headers[0]
	header := compactHeader{Algorithm: h.Algorithm, KeyID: h.KeyID}
	header.Type, _ = h.ExtraHeaders[jose.HeaderType].(string)
	key, err := checkHeader(header, keys)
	if err != nil {
		return Claims{}, err
	}
	var c Claims
	if err := tok.Claims(key.Key, &c); err != nil {
		return Claims{}, ErrInvalidToken
	}
	if err := checkClaims(c, issuer, audience, now, leeway); err != nil {
		return Claims{}, err
	}
	return c, nil
}

// ReadIssuedAccessToken checks everything VerifyAccessToken checks but the
// signature's arithmetic, for the one caller that next finds the token's
// row by the keyed hash of its exact bytes, stored when Cairn issued it: a
// match proves Cairn signed these bytes, and a token that does not match
// is refused whatever its signature. Verifying the Ed25519 signature again
// would prove nothing more and cost about an eighth of an agent's call.
// For the same reason it decodes the token with the standard library, not
// go-jose, whose decoder (kept for the signature check) took more than
// twice as long and allocated nearly four times as much on every agent
// call (33-38 against 15-17 µs, 6.1 against 1.7 KB): the bytes it reads
// are Cairn's own once the row matches, and before that they only fail or
// pass the same checks.
func ReadIssuedAccessToken(raw string, keys jose.JSONWebKeySet, issuer, audience string, now time.Time) (Claims, error) {
	if raw == "" || len(raw) > maxTokenBytes {
		return Claims{}, ErrInvalidToken
	}
	header, claims, err := decodeCompact(raw)
	if err != nil {
		return Claims{}, ErrInvalidToken
	}
	if _, err := checkHeader(header, keys); err != nil {
		return Claims{}, err
	}
	if err := checkClaims(claims, issuer, audience, now, 0); err != nil {
		return Claims{}, err
	}
	return claims, nil
}

// compactHeader is what an access token's protected header may say.
type compactHeader struct {
	Algorithm string `json:"alg"`
	KeyID     string `json:"kid"`
	Type      string `json:"typ"`
	// Critical names extensions the reader must understand; access tokens
	// use none, so a header that names any is refused.
	Critical json.RawMessage `json:"crit"`
}

// decodeCompact decodes the header and claims of a JWS in compact form
// (three base64url parts, the last a non-empty signature) without
// checking the signature.
func decodeCompact(raw string) (compactHeader, Claims, error) {
	encodedHeader, rest, _ := strings.Cut(raw, ".")
	encodedClaims, signature, ok := strings.Cut(rest, ".")
	if !ok || signature == "" || strings.Contains(signature, ".") {
		return compactHeader{}, Claims{}, errors.New("not a compact JWS")
	}
	var header compactHeader
	var claims Claims
	if err := decodeSegment(encodedHeader, &header); err != nil {
		return compactHeader{}, Claims{}, fmt.Errorf("header: %w", err)
	}
	if header.Critical != nil {
		return compactHeader{}, Claims{}, errors.New("critical header extensions")
	}
	if err := decodeSegment(encodedClaims, &claims); err != nil {
		return compactHeader{}, Claims{}, fmt.Errorf("claims: %w", err)
	}
	return header, claims, nil
}

func decodeSegment(segment string, into any) error {
	raw, err := base64.RawURLEncoding.DecodeString(segment)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// checkHeader is what both readers check of the header: the algorithm,
// the "at+jwt" type, and exactly one key of the set by kid. It returns
// that key.
func checkHeader(h compactHeader, keys jose.JSONWebKeySet) (jose.JSONWebKey, error) {
	if h.Algorithm != string(SigningAlgorithm) {
		return jose.JSONWebKey{}, ErrInvalidToken
	}
	if !strings.EqualFold(h.Type, AccessTokenType) && !strings.EqualFold(h.Type, "application/"+AccessTokenType) {
		return jose.JSONWebKey{}, ErrInvalidToken
	}
	matching := keys.Key(h.KeyID)
	if h.KeyID == "" || len(matching) != 1 || matching[0].Algorithm != string(SigningAlgorithm) {
		return jose.JSONWebKey{}, ErrInvalidToken
	}
	return matching[0], nil
}

// checkClaims is what both readers check of the claims; every failure is
// ErrInvalidToken, with the reason joined.
func checkClaims(c Claims, issuer, audience string, now time.Time, leeway time.Duration) error {
	if err := c.validate(issuer, audience, now, leeway); err != nil {
		return errors.Join(ErrInvalidToken, err)
	}
	return nil
}

func (c Claims) validate(issuer, audience string, now time.Time, leeway time.Duration) error {
	switch {
	case c.Issuer != issuer:
		return errors.New("issuer")
	case len(c.Audience) != 1 || c.Audience[0] != audience:
		return errors.New("audience")
	case c.Expiry == nil || c.IssuedAt == nil:
		return errors.New("exp and iat are required")
	case now.Add(-leeway).After(c.Expiry.Time()):
		return errors.New("expired")
	case c.NotBefore != nil && now.Add(leeway).Before(c.NotBefore.Time()):
		return errors.New("not yet valid")
	case now.Add(leeway).Before(c.IssuedAt.Time()):
		return errors.New("issued in the future")
	case c.Subject == "" || c.ID == "" || c.ClientID == "" || c.OrganizationID == "":
		return errors.New("sub, jti, client_id and org_id are required")
	}
	return nil
}
