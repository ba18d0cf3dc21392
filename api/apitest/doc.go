// Package apitest starts a real cairn-api server for tests: the assembled
// Fiber application on a loopback port over a fresh PostgreSQL database,
// with clients that sign up, keep a session and call the API over HTTP. No
// part of Cairn is mocked.
package apitest
