package capgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/version"
)

// forbiddenNames are single built-ins that leave the manifest, with why.
var forbiddenNames = map[string]string{
	"opa.runtime":       "reads the host runtime and environment",
	"trace":             "tracing",
	"print":             "printing",
	"internal.print":    "printing (what print compiles to)",
	"time.now_ns":       "reads the clock",
	"rego.parse_module": "dynamic Rego parsing",
	// Both resolve a schema's $ref: file:// URLs are read from the local
	// disk (an error even echoes the first byte of the file) and http(s)
	// URLs are fetched unless a process-wide allow list happens to be set.
	"json.verify_schema": "resolves $ref against local files and remote hosts",
	"json.match_schema":  "resolves $ref against local files and remote hosts",
}

// forbiddenPrefixes remove whole families by name, so a built-in added to a
// family by a later OPA release stays out without anyone reviewing it.
var forbiddenPrefixes = []struct{ prefix, why string }{
	{"http.", "network"},
	// The CIDR helpers are pure, but the contract forbids the family by
	// name, and net.lookup_ip_addr sits in it.
	{"net.", "network and DNS"},
	{"crypto.", "cryptography"},
	{"io.jwt.", "JWT operations"},
	{"uuid.", "UUIDs"},
	{"rand.", "randomness"},
	{"providers.", "request signing reads the clock and credentials"},
	// Deterministic, but a GraphQL parser is attack surface that no check
	// of an infrastructure plan needs.
	{"graphql.", "not needed for plan checks"},
}

// Kept on purpose, though they may look suspect:
//   - rego.metadata.chain and rego.metadata.rule read the policy's own
//     annotations, fixed at compile time.
//   - time.* other than time.now_ns compute on the timestamp they are
//     given. Their one host dependence is the time zone argument: "Local"
//     is the host's zone and named zones come from its tz database (OPA
//     embeds one as a fallback), so workers should run with TZ unset.
//   - internal.test_case is what the tester injects into parameterised
//     tests, internal.template_string what $"..." compiles to, and
//     internal.member_2/3 what `in` compiles to.
//   - numbers.range and friends can allocate large values; evaluation is
//     bounded by its timeout, not by the manifest.

// Forbidden reports why b must not be in the manifest, or "" if it may be.
func Forbidden(b *ast.Builtin) string {
	if why, ok := forbiddenNames[b.Name]; ok {
		return why
	}
	for _, f := range forbiddenPrefixes {
		if strings.HasPrefix(b.Name, f.prefix) {
			return f.why
		}
	}
	// OPA flags what it knows to vary between evaluations; that flag alone
	// is enough, whatever the name.
	if b.Nondeterministic {
		return "marked nondeterministic by OPA"
	}
	// Strict compilation rejects deprecated built-ins anyway; leaving them
	// out keeps the manifest a true list of what a policy can call.
	if b.Deprecated {
		return "deprecated"
	}
	return ""
}

// Violations lists every way c breaks the manifest's rules: forbidden
// built-ins, and a network allow list that is absent (OPA reads absent as
// "any host") or not empty.
func Violations(c *ast.Capabilities) []string {
	var out []string
	for _, b := range c.Builtins {
		if why := Forbidden(b); why != "" {
			out = append(out, fmt.Sprintf("built-in %s: %s", b.Name, why))
		}
	}
	if c.AllowNet == nil {
		out = append(out, "allow_net is absent, which OPA reads as any host")
	} else if len(c.AllowNet) > 0 {
		out = append(out, fmt.Sprintf("allow_net names hosts %v", c.AllowNet))
	}
	return out
}

// manifest mirrors ast.Capabilities field for field, except that allow_net
// is always written: ast.Capabilities omits an empty list, and an omitted
// list means the opposite of an empty one. Wasm ABI versions are left out
// because policies are never compiled to Wasm.
type manifest struct {
	Builtins       []*ast.Builtin `json:"builtins"`
	FutureKeywords []string       `json:"future_keywords"`
	Features       []string       `json:"features"`
	AllowNet       []string       `json:"allow_net"`
}

// Generate returns the manifest for the OPA release linked into this
// binary: that release's published capabilities less every forbidden
// built-in, with no network access. The output is byte-for-byte stable, so
// a committed manifest can be compared with it.
func Generate() ([]byte, error) {
	release := "v" + version.Version
	upstream, err := ast.LoadCapabilitiesVersion(release)
	if err != nil {
		return nil, fmt.Errorf("loading capabilities of OPA %s: %w", release, err)
	}
	m := manifest{
		Builtins:       make([]*ast.Builtin, 0, len(upstream.Builtins)),
		FutureKeywords: slices.Sorted(slices.Values(upstream.FutureKeywords)),
		Features:       slices.Sorted(slices.Values(upstream.Features)),
		AllowNet:       []string{},
	}
	for _, b := range upstream.Builtins {
		if Forbidden(b) == "" {
			m.Builtins = append(m.Builtins, b)
		}
	}
	slices.SortFunc(m.Builtins, func(a, b *ast.Builtin) int { return strings.Compare(a.Name, b.Name) })
	if !slices.Contains(m.Features, ast.FeatureRegoV1) {
		return nil, fmt.Errorf("capabilities of OPA %s lack the %s feature", release, ast.FeatureRegoV1)
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encoding capabilities manifest: %w", err)
	}
	return buf.Bytes(), nil
}
