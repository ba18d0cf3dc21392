// Package identity is who is signing in: accounts with argon2id passwords,
// server-side sessions stored as keyed token hashes, organizations and their
// memberships. It resolves a session token to an access.Principal whose
// organization comes from a live membership, never from request input, and
// it rate-limits failed sign-ins without revealing which e-mails exist.
package identity
