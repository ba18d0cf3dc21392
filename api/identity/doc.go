// Package identity is who is signing in: accounts with argon2id passwords,
// server-side sessions stored as keyed token hashes, organizations, their
// memberships and the invitations that create them. It resolves a session
// token to an access.Principal whose organization comes from a live
// membership, never from request input. Sign-in failures slow down the
// (account, client address) pair and the address instead of locking the
// account, answer the same whether an e-mail exists or not, and password
// hashing runs under a memory budget so a burst cannot exhaust the process.
package identity
