package engine_test

import (
	"testing"

	"github.com/open-policy-agent/opa/v1/version"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
	policycontract "github.com/cairnhq/cairn/contracts/policy"
)

func TestCapabilities(t *testing.T) {
	t.Parallel()
	caps, digest, err := engine.Capabilities()
	if err != nil {
		t.Fatal(err)
	}
	if digest != policycontract.CapabilitiesSHA256 || digest != rego.Digest(policycontract.CapabilitiesJSON) {
		t.Errorf("digest %s, committed %s", digest, policycontract.CapabilitiesSHA256)
	}
	if caps.AllowNet == nil || len(caps.AllowNet) != 0 {
		t.Errorf("allow_net %#v, want empty and present", caps.AllowNet)
	}
	for _, name := range []string{"http.send", "time.now_ns", "opa.runtime"} {
		if caps.ContainsBuiltin(name) {
			t.Errorf("capabilities allow %s", name)
		}
	}
	// Callers get a copy: changing it must not change what is compiled.
	caps.Builtins = nil
	again, _, err := engine.Capabilities()
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Builtins) == 0 {
		t.Fatal("a caller's change reached the shared capabilities")
	}
}

// TestEngineVersionIsLinked fails when go.mod moves OPA without the
// constant (and the manifest) following.
func TestEngineVersionIsLinked(t *testing.T) {
	t.Parallel()
	if version.Version != rego.EngineVersion {
		t.Fatalf("linked OPA %s, EngineVersion %s", version.Version, rego.EngineVersion)
	}
}
