// Package archive checks and unpacks the gzip-compressed tar archives that
// carry OpenTofu configurations. Those archives come from clients we do not
// trust, so an archive is read once as a stream, in memory bounded by its
// limits rather than its size: every bound (compressed bytes, expanded bytes,
// entries, path length) is enforced while reading, before the bytes it guards
// are consumed, and anything not plainly a set of files and directories under
// one root — links, devices, absolute or escaping paths, clashing names,
// trailing data — is refused with a stable code instead of being repaired.
package archive
