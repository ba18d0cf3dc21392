// Package serviceaccount is service accounts and their sst_ tokens: the
// credentials automation uses on the remote-backend API. A token carries an
// explicit subset of its issuer's permissions, optional project and
// workspace boundaries and an expiry at most a year ahead; its plaintext is
// shown once and only a keyed hash is stored.
package serviceaccount
