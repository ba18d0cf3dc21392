// Package proxy is the dashboard's same-origin path to the API: browser
// JavaScript calls /api/control-plane/<api path> and this handler forwards it
// to <api url>/<api path>. The browser never holds the API session token; the
// proxy swaps the dashboard session for it upstream. Because that makes the
// proxy a credential-bearing doorway, it admits only method and path pairs
// generated from the API contract (see internal/routegen), refuses unsafe
// requests that are cross-origin or lack the session's CSRF token, never
// follows or exposes redirects off the dashboard, never hands API cookies to
// the browser, and reduces upstream errors to status, code and request ID.
package proxy
