package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/policy/rego"
	policycontract "github.com/cairnhq/cairn/contracts/policy"
)

// TestParseCapabilitiesFailsClosed covers what the embedded manifest
// cannot show: a manifest that does not match its digest, or that matches
// a digest but breaks the rules, is refused.
func TestParseCapabilitiesFailsClosed(t *testing.T) {
	t.Parallel()
	committed := policycontract.CapabilitiesJSON
	withHTTP := []byte(strings.Replace(string(committed), `"name": "abs"`, `"name": "http.send"`, 1))
	noAllowNet := []byte(strings.Replace(string(committed), `"allow_net": []`, `"wasm_abi_versions": []`, 1))
	tests := []struct {
		name     string
		manifest []byte
		digest   string
	}{
		{"edited without its digest", withHTTP, policycontract.CapabilitiesSHA256},
		{"digest of another file", committed, rego.Digest([]byte("{}"))},
		{"forbidden built-in with a matching digest", withHTTP, rego.Digest(withHTTP)},
		{"allow_net absent with a matching digest", noAllowNet, rego.Digest(noAllowNet)},
		{"not json", []byte("nope"), rego.Digest([]byte("nope"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if string(tt.manifest) == string(committed) && tt.digest == policycontract.CapabilitiesSHA256 {
				t.Fatal("test case does not change anything")
			}
			if _, err := parseCapabilities(tt.manifest, tt.digest); !errors.Is(err, rego.ErrCapabilities) {
				t.Fatalf("err %v, want ErrCapabilities", err)
			}
		})
	}
	if _, err := parseCapabilities(committed, policycontract.CapabilitiesSHA256); err != nil {
		t.Fatalf("committed manifest: %v", err)
	}
}
