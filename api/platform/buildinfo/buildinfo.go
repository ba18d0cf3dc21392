// Package buildinfo carries the version stamped into a binary at link time
// (-ldflags "-X github.com/cairnhq/cairn/api/platform/buildinfo.Version=…"),
// so health endpoints can say what is running without touching anything else.
package buildinfo

// Version is the build's version; "dev" when not stamped.
var Version = "dev"
