package engine

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/cairnhq/cairn/api/platform/jsondoc"
	"github.com/cairnhq/cairn/api/policy/rego"
)

// FuzzDecision checks the validation of what a tenant's policy returns,
// written as a Rego term (so sets and non-string keys are reachable too):
// an accepted decision keeps every bound of the contract (findings, their
// required fields and lengths, details depth, keys and size, the whole
// decision's size), has unique finding IDs, and encodes to JSON that a
// jsonb column stores. Refusals are CodeDecisionInvalid. The term goes the
// way OPA's result goes in Evaluate: written out through the bounded
// writer, then judged by rego.DecisionFromJSON, the one set of rules.
func FuzzDecision(f *testing.F) {
	for _, s := range []string{
		`{"findings": []}`,
		`{"findings": [{"id": "tags.owner", "title": "Owner tag missing", "message": "terraform_data.a has no owner tag", ` +
			`"resource_address": "terraform_data.a", "details": {"missing": ["owner"], "count": 1, "nested": {"ok": false, "n": null}}}]}`,
		`{"findings": {{"id": "a", "title": "t", "message": "m"}, {"id": "b", "title": "t", "message": "m"}}}`,
		`{"findings": [{"id": "a", "title": "t", "message": "m\u0000"}]}`,
		`{"findings": [{"id": "a", "title": "t", "message": "m", "details": {1: "non-string key"}}]}`,
		`{"findings": [{"id": "a", "title": "t", "message": "m"}, {"id": "a", "title": "t", "message": "m"}]}`,
		`{"findings": [], "allow": true}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, term string) {
		parsed, err := ast.ParseTerm(term)
		if err != nil || !parsed.IsGround() {
			return
		}
		d, err := decisionOf(parsed.Value)
		if err != nil {
			if rego.CodeOf(err) != rego.CodeDecisionInvalid {
				t.Fatalf("%s refused with %v", term, err)
			}
			return
		}
		encoded, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Findings) > rego.MaxFindings || len(encoded) > rego.MaxDecisionBytes {
			t.Fatalf("accepted %d findings in %d bytes", len(d.Findings), len(encoded))
		}
		if err := jsondoc.CheckText(encoded); err != nil {
			t.Fatalf("accepted decision %s: %v", encoded, err)
		}
		ids := map[string]bool{}
		for _, fd := range d.Findings {
			for _, field := range []struct {
				value    string
				maxChars int
				required bool
			}{{fd.ID, rego.MaxFindingIDChars, true}, {fd.Title, rego.MaxFindingTitleChars, true}, {fd.Message, rego.MaxFindingMessageChars, true},
				{fd.ResourceAddress, rego.MaxResourceAddressChars, false}} {
				if (field.required && field.value == "") || utf8.RuneCountInString(field.value) > field.maxChars {
					t.Fatalf("accepted finding %+v", fd)
				}
			}
			if ids[fd.ID] {
				t.Fatalf("accepted finding ID %q twice", fd.ID)
			}
			ids[fd.ID] = true
			if fd.Details == nil {
				continue
			}
			details, _ := json.Marshal(fd.Details)
			if len(details) > rego.MaxDetailsBytes || depth(fd.Details) > rego.MaxDetailsDepth || keyCount(fd.Details) > rego.MaxDetailsKeys {
				t.Fatalf("accepted details %s", details)
			}
		}
	})
}

func depth(v any) int {
	deepest := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			deepest = max(deepest, depth(e))
		}
	case []any:
		for _, e := range x {
			deepest = max(deepest, depth(e))
		}
	default:
		return 0
	}
	return deepest + 1
}

func keyCount(v any) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		n += len(x)
		for _, e := range x {
			n += keyCount(e)
		}
	case []any:
		for _, e := range x {
			n += keyCount(e)
		}
	}
	return n
}
