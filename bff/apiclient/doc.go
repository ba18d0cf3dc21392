// Package apiclient is the dashboard's server-side client of the API: it
// speaks the /v1 contract with the signed-in user's API session, unwraps
// the envelope, and turns every error into an *Error that keeps the
// upstream status, code, request ID and Retry-After for the page.
package apiclient
