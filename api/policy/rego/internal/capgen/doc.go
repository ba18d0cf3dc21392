// Package capgen generates contracts/policy/cairn-rego-capabilities-v1.json,
// the list of Rego built-ins a Cairn policy may call, from the capabilities
// OPA publishes for the release linked into the binary. Only deterministic,
// side-effect-free built-ins stay: a policy's verdict must depend on its
// input alone, and evaluation must not reach the network, the disk, the
// clock or a random source. The rules live here, in Forbidden, so the
// generator, the committed-file test and the runtime check in package rego
// all apply the same ones. Regenerate with
//
//	go test ./api/policy/rego/internal/capgen -run TestManifestIsGenerated -update
package capgen
