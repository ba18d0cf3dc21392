// Package e2e holds Cairn's end-to-end tests: the real binaries against a
// real PostgreSQL, driven by real clients.
package e2e
