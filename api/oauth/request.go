package oauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// AuthorizationRequest is a validated authorization request: what the
// person is asked to consent to. It travels from /authorize to the
// dashboard's login and consent screens and back as a signed query, so
// no server keeps it and nobody can alter it on the way.
type AuthorizationRequest struct {
	ClientID      string
	RedirectURI   string
	Scopes        []string
	State         string
	CodeChallenge string
	Resource      string
	// Nonce is the OpenID Connect nonce, echoed in the ID token.
	Nonce     string
	ExpiresAt time.Time
}

// signedFields are exactly the fields of a signed request, in no order
// that matters: url.Values encodes them sorted.
var signedFields = []string{"client_id", "redirect_uri", "scope", "state", "code_challenge", "resource", "nonce", "exp"}

// signRequest renders the request as a query carrying its MAC.
func signRequest(key []byte, r AuthorizationRequest) string {
	v := r.values()
	v.Set("sig", requestMAC(key, v))
	return v.Encode()
}

func (r AuthorizationRequest) values() url.Values {
	return url.Values{
		"client_id":      {r.ClientID},
		"redirect_uri":   {r.RedirectURI},
		"scope":          {joinScopes(r.Scopes)},
		"state":          {r.State},
		"code_challenge": {r.CodeChallenge},
		"resource":       {r.Resource},
		"nonce":          {r.Nonce},
		"exp":            {strconv.FormatInt(r.ExpiresAt.Unix(), 10)},
	}
}

func requestMAC(key []byte, v url.Values) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("cairn-oauth-authorization-request\x00" + v.Encode()))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// verifyRequest parses a signed request query. Anything altered, added or
// missing fails the MAC; an expired request is ErrRequestExpired.
func verifyRequest(key []byte, query string, now time.Time) (AuthorizationRequest, error) {
	if len(query) > 8192 {
		return AuthorizationRequest{}, describe(ErrInvalidRequest, "authorization request too long")
	}
	v, err := url.ParseQuery(query)
	if err != nil {
		return AuthorizationRequest{}, describe(ErrInvalidRequest, "malformed authorization request")
	}
	sig := v.Get("sig")
	v.Del("sig")
	for name, values := range v {
		if !slices.Contains(signedFields, name) || len(values) != 1 {
			return AuthorizationRequest{}, describe(ErrInvalidRequest, "malformed authorization request")
		}
	}
	if len(v) != len(signedFields) || !hmac.Equal([]byte(sig), []byte(requestMAC(key, v))) {
		return AuthorizationRequest{}, describe(ErrInvalidRequest, "authorization request signature mismatch")
	}
	exp, err := strconv.ParseInt(v.Get("exp"), 10, 64)
	if err != nil {
		return AuthorizationRequest{}, describe(ErrInvalidRequest, "malformed authorization request")
	}
	r := AuthorizationRequest{
		ClientID: v.Get("client_id"), RedirectURI: v.Get("redirect_uri"), State: v.Get("state"),
		CodeChallenge: v.Get("code_challenge"), Resource: v.Get("resource"), Nonce: v.Get("nonce"), ExpiresAt: time.Unix(exp, 0),
	}
	if r.Scopes, err = ParseScope(v.Get("scope")); err != nil {
		return AuthorizationRequest{}, err
	}
	if !now.Before(r.ExpiresAt) {
		return AuthorizationRequest{}, ErrRequestExpired
	}
	return r, nil
}
