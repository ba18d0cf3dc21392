// Package authserver is the identity server under /api/auth: e-mail and
// password sign-up and sign-in, sign-out, sessions, step-up
// reauthentication, organizations, member management and invitations. It
// resolves the client address for sign-in and sign-up throttling (trusting
// forwarding headers only from configured proxies), sets the host-only,
// Secure, HttpOnly session cookie and answers 503 for every route when the
// database or AUTH_SECRET is missing.
package authserver
