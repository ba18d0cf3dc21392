// Package oauth is the OAuth 2.1 authorization server through which AI
// agents act for people: client registration (RFC 7591 and client ID
// metadata documents), the authorization code flow with PKCE S256, consent
// that binds a grant to one organization, RFC 8707 audience-bound JWT
// access tokens, rotating refresh tokens with reuse detection, revocation
// (RFC 7009), and the resolution of an access token to a principal for
// /v1. Codes, tokens and client secrets are stored only as keyed hashes;
// every access token is checked against its row, so revocation applies at
// once.
package oauth
