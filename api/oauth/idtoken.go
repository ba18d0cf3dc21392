package oauth

import (
	"context"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
)

// IDTokenTTL is an ID token's lifetime: it proves a sign-in to the client
// that receives it, which checks it at once.
const IDTokenTTL = time.Hour

// ClaimsSupported are the claims of ID tokens and userinfo answers, as the
// OpenID discovery document lists them.
var ClaimsSupported = []string{"iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "azp", "email", "email_verified", "name"}

// UserInfo is what the OpenID provider tells a client about the person,
// by the granted scopes: the stable user ID always, the e-mail address
// with email, the name with profile. Cairn does not verify e-mail
// addresses (people sign up with any), so email_verified is false.
type UserInfo struct {
	Subject       string `json:"sub"`
	Email         string `json:"email,omitempty"`
	EmailVerified *bool  `json:"email_verified,omitempty"`
	Name          string `json:"name,omitempty"`
}

func userInfoOf(p Person, scopes []string) UserInfo {
	info := UserInfo{Subject: p.ID}
	if slices.Contains(scopes, ScopeEmail) {
		verified := false
		info.Email, info.EmailVerified = p.Email, &verified
	}
	if slices.Contains(scopes, ScopeProfile) {
		info.Name = p.Name
	}
	return info
}

// IDTokenClaims are an ID token's claims (OpenID Connect Core §2).
type IDTokenClaims struct {
	Issuer          string `json:"iss"`
	Audience        string `json:"aud"`
	AuthorizedParty string `json:"azp"`
	Expiry          int64  `json:"exp"`
	IssuedAt        int64  `json:"iat"`
	AuthTime        int64  `json:"auth_time"`
	Nonce           string `json:"nonce,omitempty"`
	UserInfo
}

// idToken signs the ID token of a code exchange for a grant with the
// openid scope: audience the client, the nonce of the authorization
// request, and auth_time when the person last authenticated in the
// session that consented.
func (s *Service) idToken(ctx context.Context, tx *sqlx.Tx, c Client, g Grant, code codeRow, now time.Time) (string, error) {
	if s.opts.IDTokenKeys == nil {
		return "", describe(ErrInvalidScope, "ID tokens are not available: no master key to sign them")
	}
	person, err := personByID(ctx, tx, g.UserID)
	if err != nil {
		return "", err
	}
	authTime := g.CreatedAt
	if code.AuthTime != nil {
		authTime = *code.AuthTime
	}
	return s.opts.IDTokenKeys.Sign(ctx, IDTokenClaims{
		Issuer: s.opts.Issuer, Audience: c.ID, AuthorizedParty: c.ID,
		Expiry: now.Add(IDTokenTTL).Unix(), IssuedAt: now.Unix(), AuthTime: authTime.Unix(), Nonce: code.Nonce,
		UserInfo: userInfoOf(person, g.Scopes),
	})
}

// UserInfo answers the userinfo endpoint for an access token that carries
// the openid scope: a bad, revoked or expired token, or one whose person
// left the grant's organization, is ErrInvalidToken; one without openid
// is ErrInsufficientScope.
func (s *Service) UserInfo(ctx context.Context, raw string) (UserInfo, error) {
	row, err := s.liveToken(ctx, raw)
	if err != nil {
		return UserInfo{}, err
	}
	if !slices.Contains(row.Scopes, ScopeOpenID) {
		return UserInfo{}, ErrInsufficientScope
	}
	if row.Role == nil {
		return UserInfo{}, ErrInvalidToken
	}
	person, err := personByID(ctx, s.db, row.UserID)
	if err != nil {
		return UserInfo{}, ErrInvalidToken
	}
	return userInfoOf(person, row.Scopes), nil
}
