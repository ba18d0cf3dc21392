// Package retention deletes the agents' OAuth records and the federated
// sign-in records that can no longer be used. It holds only their SQL, so
// cairn-worker's sweep job reaches these tables without linking the OAuth
// server, SAML or OpenID Connect whose records they are.
package retention
