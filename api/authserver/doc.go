// Package authserver is the identity server under /api/auth: e-mail and
// password sign-up and sign-in, sign-out, sessions, step-up
// reauthentication, organizations and member management. It sets the
// host-only, Secure, HttpOnly session cookie and answers 503 for every route
// when the database or AUTH_SECRET is missing.
package authserver
