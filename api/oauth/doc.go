// Package oauth is the OAuth 2.1 authorization server through which AI
// agents act for people: client registration (RFC 7591 and client ID
// metadata documents), the authorization code flow with PKCE S256, consent
// that binds a grant to one organization, RFC 8707 audience-bound JWT
// access tokens, rotating refresh tokens with reuse detection, revocation
// (RFC 7009), and the resolution of an access token to a principal for
// /v1. Codes, tokens and client secrets are stored only as keyed hashes;
// every access token is checked against its row, so revocation applies at
// once. The same server is an OpenID provider (the openid, profile and
// email scopes: RS256 ID tokens and userinfo) and serves `tofu login`
// through a built-in public client whose code becomes a user API token.
//
// It is our own code on go-jose rather than zitadel/oidc's op: that
// provider is built around OpenID sessions, ID tokens and a storage
// interface of its own, none of which agents need, while what they do
// need (PKCE for every client, exactly one audience, tokens kept only as
// keyed hashes, refresh reuse revoking the grant, and a request signed
// through the dashboard's consent screen instead of server-side state)
// would have been glue around it anyway.
package oauth
