// Package session is the dashboard's own session: an scs session stored in
// PostgreSQL whose cookie is the only credential the browser holds. It maps
// to the API session token (never exposed to browser JavaScript), the
// active organization, and a per-session CSRF token for unsafe requests.
// Rows are keyed by an HMAC of the cookie's token and their data is sealed
// to the row under keys derived from AUTH_SECRET, so the table holds no
// credential in clear.
package session
