// Package site is the dashboard served by cairn-bff: server-rendered pages
// from web/templates that talk to the API only through its public contract.
package site
