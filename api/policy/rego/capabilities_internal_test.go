package rego

import (
	"errors"
	"testing"

	policycontract "github.com/cairnhq/cairn/contracts/policy"
)

// TestManifestMatchesFailsClosed: the digest processes record is refused
// when the embedded manifest does not hash to it, so an edited manifest
// cannot be recorded under the committed identity by a process that never
// parses it.
func TestManifestMatchesFailsClosed(t *testing.T) {
	t.Parallel()
	committed := policycontract.CapabilitiesJSON
	edited := append([]byte{' '}, committed...)
	if err := manifestMatches(edited, policycontract.CapabilitiesSHA256); !errors.Is(err, ErrCapabilities) {
		t.Fatalf("edited manifest: err %v, want ErrCapabilities", err)
	}
	if err := manifestMatches(committed, Digest([]byte("{}"))); !errors.Is(err, ErrCapabilities) {
		t.Fatalf("another digest: err %v, want ErrCapabilities", err)
	}
	got, err := CapabilitiesDigest()
	if err != nil || got != policycontract.CapabilitiesSHA256 || got != Digest(committed) {
		t.Fatalf("CapabilitiesDigest() = %q, %v; committed %s", got, err, policycontract.CapabilitiesSHA256)
	}
}
