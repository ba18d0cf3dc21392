// Package buildinfo carries what is stamped into a binary at link time
// (-ldflags "-X github.com/cairnhq/cairn/api/platform/buildinfo.Version=…
// -X github.com/cairnhq/cairn/api/platform/buildinfo.Revision=…"), so
// health endpoints and run evidence can say what is running without
// touching anything else.
package buildinfo

// Version is the build's version; "dev" when not stamped.
var Version = "dev"

// Revision is the full commit ID of the source the build was made from;
// empty when not stamped.
var Revision = ""
