package engine

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/version"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/internal/capgen"
	policycontract "github.com/cairnhq/cairn/contracts/policy"
)

var entrypointRef = ast.MustParseRef(rego.Entrypoint)

var loadCapabilities = sync.OnceValues(func() (*ast.Capabilities, error) {
	if version.Version != rego.EngineVersion {
		return nil, fmt.Errorf("%w: linked OPA is %s, policies are pinned to %s", rego.ErrCapabilities, version.Version, rego.EngineVersion)
	}
	return parseCapabilities(policycontract.CapabilitiesJSON, policycontract.CapabilitiesSHA256)
})

// parseCapabilities parses a manifest that must hash to digest and obey
// the manifest's rules.
func parseCapabilities(manifest []byte, digest string) (*ast.Capabilities, error) {
	if got := rego.Digest(manifest); got != digest {
		return nil, fmt.Errorf("%w: %s hashes to %s, committed digest is %q", rego.ErrCapabilities, rego.CapabilitiesID, got, digest)
	}
	c, err := ast.LoadCapabilitiesJSON(bytes.NewReader(manifest))
	if err != nil {
		return nil, fmt.Errorf("%w: parsing %s: %w", rego.ErrCapabilities, rego.CapabilitiesID, err)
	}
	// The digest proves the file is the committed one, not that the
	// committed one is safe; the rules are checked again here so a bad
	// commit fails closed in production as well as in tests.
	if v := capgen.Violations(c); len(v) > 0 {
		return nil, fmt.Errorf("%w: %s", rego.ErrCapabilities, strings.Join(v, "; "))
	}
	if !c.ContainsFeature(ast.FeatureRegoV1) {
		return nil, fmt.Errorf("%w: %s lacks feature %s", rego.ErrCapabilities, rego.CapabilitiesID, ast.FeatureRegoV1)
	}
	return c, nil
}

// Capabilities returns the parsed capabilities manifest and its SHA-256
// (lowercase hex). The manifest is checked against its committed digest
// and its rules once per process; any mismatch is an error wrapping
// ErrCapabilities, and nothing may be compiled then. The returned value is
// a copy the caller may change. The digest is rego.CapabilitiesDigest's:
// processes that only record it check it there without parsing.
func Capabilities() (*ast.Capabilities, string, error) {
	c, err := loadCapabilities()
	if err != nil {
		return nil, "", err
	}
	cp := *c
	cp.Builtins = slices.Clone(c.Builtins)
	cp.FutureKeywords = slices.Clone(c.FutureKeywords)
	cp.Features = slices.Clone(c.Features)
	cp.WasmABIVersions = slices.Clone(c.WasmABIVersions)
	cp.AllowNet = make([]string, 0) // never nil: nil would mean any host
	return &cp, policycontract.CapabilitiesSHA256, nil
}

// parserOptions parses strictly as Rego v1 against the manifest.
func parserOptions(caps *ast.Capabilities) ast.ParserOptions {
	return ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: caps, ProcessAnnotation: true}
}

// newCompiler is the one compiler configuration for builds, tests and
// loads, so a bundle that built is compiled the same way when it runs.
func newCompiler(caps *ast.Capabilities) *ast.Compiler {
	return ast.NewCompiler().
		WithCapabilities(caps).
		WithStrict(true).
		WithDefaultRegoVersion(ast.RegoV1).
		// With print statements disabled OPA silently erases print calls;
		// enabled, they compile to internal.print, which the manifest
		// lacks, so a print in a policy is a compile error as it should be.
		WithEnablePrintStatements(true)
}

// checkEntrypoint requires the compiled policy to define Entrypoint as a
// complete rule, so a bundle can never answer "undefined" merely because
// the rule is missing or misnamed.
func checkEntrypoint(c *ast.Compiler) error {
	rules := c.GetRulesExact(entrypointRef)
	if len(rules) == 0 {
		return fmt.Errorf("no rule defines %s (package cairn.v1, rule decision)", rego.Entrypoint)
	}
	for _, r := range rules {
		if len(r.Head.Args) > 0 {
			return fmt.Errorf("%s: %s must be a rule, not a function", r.Location, rego.Entrypoint)
		}
		if r.Head.DocKind() != ast.CompleteDoc {
			return fmt.Errorf("%s: %s must be a complete rule (decision := {...})", r.Location, rego.Entrypoint)
		}
	}
	return nil
}
