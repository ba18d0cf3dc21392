package capgen_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/types"

	"github.com/cairnhq/cairn/api/policy/rego/internal/capgen"
	policycontract "github.com/cairnhq/cairn/contracts/policy"
)

var update = flag.Bool("update", false, "rewrite contracts/policy/cairn-rego-capabilities-v1.json and its digest")

const manifestFile = "cairn-rego-capabilities-v1.json"

func contractDir(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate test file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "..", "contracts", "policy")
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestManifestIsGenerated fails when the committed manifest or its digest
// drifts from what the generator produces, e.g. after an OPA upgrade or a
// hand edit.
func TestManifestIsGenerated(t *testing.T) {
	if !*update {
		t.Parallel()
	}
	generated, err := capgen.Generate()
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256Hex(generated)
	if *update {
		dir := contractDir(t)
		if err := os.WriteFile(filepath.Join(dir, manifestFile), generated, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, manifestFile+".sha256"), []byte(digest+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(policycontract.CapabilitiesJSON, generated) {
		t.Fatalf("%s differs from the generator's output; rerun with -update and review the diff", manifestFile)
	}
	if policycontract.CapabilitiesSHA256 != digest {
		t.Fatalf("committed digest %q, manifest hashes to %q", policycontract.CapabilitiesSHA256, digest)
	}
}

func TestGenerateIsReproducible(t *testing.T) {
	t.Parallel()
	a, err := capgen.Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := capgen.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two generations differ")
	}
}

func committed(t *testing.T) *ast.Capabilities {
	t.Helper()
	c, err := ast.LoadCapabilitiesJSON(bytes.NewReader(policycontract.CapabilitiesJSON))
	if err != nil {
		t.Fatalf("loading committed manifest: %v", err)
	}
	return c
}

// TestCommittedManifestAllowsNothingForbidden reads the committed file, not
// the generator, so a hand edit that adds a built-in fails here even if
// the digest was updated with it.
func TestCommittedManifestAllowsNothingForbidden(t *testing.T) {
	t.Parallel()
	c := committed(t)
	if v := capgen.Violations(c); len(v) > 0 {
		t.Fatalf("committed manifest violates the rules: %v", v)
	}
	if c.AllowNet == nil || len(c.AllowNet) != 0 {
		t.Fatalf("allow_net = %#v, want present and empty", c.AllowNet)
	}
	// Named one by one too, so a mistake in Forbidden itself cannot let
	// the built-ins the contract calls out slip through.
	for _, name := range []string{
		"http.send", "net.lookup_ip_addr", "net.cidr_contains", "net.cidr_merge", "opa.runtime",
		"trace", "print", "internal.print", "time.now_ns", "rand.intn", "uuid.rfc4122", "uuid.parse",
		"crypto.sha256", "crypto.hmac.sha256", "crypto.x509.parse_certificates", "io.jwt.decode",
		"io.jwt.decode_verify", "io.jwt.encode_sign", "rego.parse_module", "providers.aws.sign_req",
		"json.verify_schema", "json.match_schema", "graphql.parse",
	} {
		if c.ContainsBuiltin(name) {
			t.Errorf("manifest allows %s", name)
		}
	}
}

func TestCommittedManifestKeepsPureBuiltins(t *testing.T) {
	t.Parallel()
	c := committed(t)
	for _, name := range []string{
		"count", "sprintf", "regex.match", "object.get", "json.marshal", "yaml.unmarshal",
		"time.parse_rfc3339_ns", "time.format", "time.add_date", "semver.compare", "units.parse_bytes",
		"rego.metadata.rule", "rego.metadata.chain",
		// The tester injects internal.test_case into parameterised tests,
		// template strings compile to internal.template_string and `in`
		// to internal.member_2; without them valid policies fail to build.
		"internal.test_case", "internal.template_string", "internal.member_2", "internal.member_3",
	} {
		if !c.ContainsBuiltin(name) {
			t.Errorf("manifest lacks %s", name)
		}
	}
	if !c.ContainsFeature(ast.FeatureRegoV1) {
		t.Errorf("manifest lacks feature %s", ast.FeatureRegoV1)
	}
}

func TestViolationsCatchForbiddenCapabilities(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		caps ast.Capabilities
	}{
		{"network family by name", ast.Capabilities{Builtins: []*ast.Builtin{{Name: "net.cidr_contains"}}, AllowNet: []string{}}},
		{"future http built-in", ast.Capabilities{Builtins: []*ast.Builtin{{Name: "http.get"}}, AllowNet: []string{}}},
		{"clock", ast.Capabilities{Builtins: []*ast.Builtin{{Name: "time.now_ns"}}, AllowNet: []string{}}},
		{"unnamed nondeterministic", ast.Capabilities{Builtins: []*ast.Builtin{{Name: "x.y", Nondeterministic: true}}, AllowNet: []string{}}},
		{"deprecated", ast.Capabilities{Builtins: []*ast.Builtin{{Name: "re_match", Deprecated: true}}, AllowNet: []string{}}},
		{"allow_net absent", ast.Capabilities{Builtins: []*ast.Builtin{{Name: "count"}}}},
		{"allow_net names a host", ast.Capabilities{Builtins: []*ast.Builtin{{Name: "count"}}, AllowNet: []string{"example.com"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if v := capgen.Violations(&tt.caps); len(v) == 0 {
				t.Fatal("no violation reported")
			}
		})
	}
	ok := ast.Capabilities{Builtins: []*ast.Builtin{{Name: "count"}, {Name: "time.parse_ns"}}, AllowNet: []string{}}
	if v := capgen.Violations(&ok); len(v) > 0 {
		t.Fatalf("clean capabilities reported: %v", v)
	}
}

// TestManifestIsAStrictSubsetOfOPA guards against the generator inventing
// or altering built-ins: every kept declaration must be OPA's own.
func TestManifestIsAStrictSubsetOfOPA(t *testing.T) {
	t.Parallel()
	upstream := ast.CapabilitiesForThisVersion(ast.CapabilitiesRegoVersion(ast.RegoV1))
	c := committed(t)
	if len(c.Builtins) >= len(upstream.Builtins) {
		t.Fatalf("manifest keeps %d of %d built-ins; something should have been removed", len(c.Builtins), len(upstream.Builtins))
	}
	for _, b := range c.Builtins {
		i := slices.IndexFunc(upstream.Builtins, func(u *ast.Builtin) bool { return u.Name == b.Name })
		if i < 0 {
			t.Errorf("%s is not an OPA built-in", b.Name)
			continue
		}
		if types.Compare(b.Decl, upstream.Builtins[i].Decl) != 0 {
			t.Errorf("%s: declaration %v, OPA declares %v", b.Name, b.Decl, upstream.Builtins[i].Decl)
		}
	}
}
