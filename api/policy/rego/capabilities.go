package rego

import (
	"errors"
	"fmt"
	"sync"

	policycontract "github.com/cairnhq/cairn/contracts/policy"
)

// Identities every policy version and evaluation records.
const (
	// EngineVersion is the OPA release the policy program (cairn-policy)
	// links; package engine's tests prove it is the one go.mod pins, so
	// processes that only record it need not link OPA to name it.
	EngineVersion = "1.18.2"
	// Entrypoint is the one query a policy bundle answers.
	Entrypoint = "data.cairn.v1.decision"
	// InputSchema is the version field of every policy input document.
	InputSchema = "cairn.policy.input/v1"
	// CapabilitiesID names the capabilities manifest in
	// contracts/policy.
	CapabilitiesID = "cairn-rego-capabilities-v1"
)

// ErrCapabilities means the embedded capabilities manifest cannot be
// trusted: its digest does not match, it does not parse, it allows a
// forbidden built-in, or the linked OPA is not EngineVersion. Nothing is
// compiled, evaluated or recorded against it then.
var ErrCapabilities = errors.New("capabilities manifest unusable")

var checkDigest = sync.OnceValue(func() error {
	return manifestMatches(policycontract.CapabilitiesJSON, policycontract.CapabilitiesSHA256)
})

// manifestMatches requires manifest to hash to digest.
func manifestMatches(manifest []byte, digest string) error {
	if got := Digest(manifest); got != digest {
		return fmt.Errorf("%w: %s hashes to %s, committed digest is %q", ErrCapabilities, CapabilitiesID, got, digest)
	}
	return nil
}

// CapabilitiesDigest returns the SHA-256 (lowercase hex) of the embedded
// capabilities manifest, once it has checked that the manifest hashes to
// its committed digest; otherwise an error wrapping ErrCapabilities. It is
// what the API and the worker record and compare. It does not parse the
// manifest: that, and the manifest's rules, are the engine's
// (engine.Capabilities), which refuses to compile anything against a
// manifest that breaks them.
func CapabilitiesDigest() (string, error) {
	if err := checkDigest(); err != nil {
		return "", err
	}
	return policycontract.CapabilitiesSHA256, nil
}
