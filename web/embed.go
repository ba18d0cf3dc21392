// Package web holds the dashboard's server-rendered templates and static
// files, embedded into cairn-bff so the binary is the whole deployment.
package web

import "embed"

// Templates are Go html/template files.
//
//go:embed templates
var Templates embed.FS

// Static files are served under /static/ with long-lived caching; names carry
// versions so a change is a new URL.
//
//go:embed static
var Static embed.FS
