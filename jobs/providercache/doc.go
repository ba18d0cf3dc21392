// Package providercache keeps a worker's shared cache of provider packages
// for sandboxes: each package of the operator's filesystem mirror
// (CAIRN_PROVIDER_MIRROR) is verified once against the checksums the
// mirror publishes for it (its <version>.json, as `tofu providers mirror`
// writes it: zh: over the zip, h1: over its contents), unpacked once per
// (source, version, platform) and recorded with its h1 hash in a manifest
// that sandboxes never see. Before every sandbox uses the cache, each
// entry is hashed again and compared with the manifest: a changed entry is
// removed and the attempt fails closed, so the next one installs it again
// from the mirror. Sandboxes see only the unpacked packages, read-only, as
// a filesystem mirror in OpenTofu's unpacked layout, from which `tofu
// init` links instead of unzipping.
package providercache
