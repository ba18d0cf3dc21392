// Package mcp is cairn-mcp, the agent tool endpoint: the Model Context
// Protocol over streamable HTTP at {mcp_url}/mcp, its RFC 9728 protected
// resource metadata, and the tools. It holds no credentials and no
// database: it checks each access token's signature, issuer, audience and
// expiry against the API's published keys, then every tool forwards the
// caller's own token to /v1, which resolves it against its stored record
// (so revocation and lost membership apply there at once) and applies the
// person's permissions within the agent's scopes.
package mcp
