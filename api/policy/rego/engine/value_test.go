package engine_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

// TestInputValueMatchesParseInput: the fast conversion builds exactly the
// value ParseInput builds, for inputs built from a real plan and for
// strings, numbers and nesting of every kind.
func TestInputValueMatchesParseInput(t *testing.T) {
	t.Parallel()
	fromPlan, err := rego.BuildInput(context.Background(), strings.NewReader(string(fixturePlan(t))), trackedMeta())
	if err != nil {
		t.Fatal(err)
	}
	odd := validInput()
	odd["workspace"].(map[string]any)["metadata"] = map[string]any{
		"escapes": "quote \" backslash \\ tab \t newline \n unicode é ☃ \u2028 <html>&", "empty": "",
		"numbers": []any{0, -0.0, 1e21, 123456789012345678, -3.25, 1.5e-7}, "nested": map[string]any{"a": []any{[]any{}, map[string]any{}}},
		"literals": []any{true, false, nil}, "": "empty key",
	}
	atBound, _ := benchInput(t)
	for name, doc := range map[string][]byte{"from a plan": fromPlan, "odd values": mustJSON(t, odd), "at the node bound": atBound,
		"with spacing": []byte(" { \"version\" : \"" + rego.InputSchema + "\" ,\n\t\"a\" : [ 1 , { } , [ ] ] } ")} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := engine.InputValue(doc)
			if err != nil {
				t.Fatal(err)
			}
			want, err := engine.ParseInput(doc)
			if name == "with spacing" {
				want, err = ast.ValueFromReader(bytes.NewReader(doc)) // not a valid input: OPA's own reading
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Compare(want) != 0 {
				t.Fatalf("values differ:\n%v\n%v", got, want)
			}
		})
	}
}

func TestInputValueRefusesWhatItCannotConvert(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a":`, rego.MaxInputDepth+1) + "1" + strings.Repeat("}", rego.MaxInputDepth+1)
	for name, tt := range map[string]struct {
		doc, code string
	}{
		"not json":   {"{nope", rego.CodeInputInvalid},
		"an array":   {"[]", rego.CodeInputInvalid},
		"truncated":  {`{"a": [1, 2`, rego.CodeInputInvalid},
		"two values": {`{} {}`, rego.CodeInputInvalid},
		"too deep":   {deep, rego.CodeInputTooLarge},
		"too large":  {`{"a":"` + strings.Repeat("x", rego.MaxInputBytes) + `"}`, rego.CodeInputTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := engine.InputValue([]byte(tt.doc))
			wantCode(t, err, tt.code)
		})
	}
}

func BenchmarkInputValueAtBound(b *testing.B) {
	doc, _ := benchInput(b)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := engine.InputValue(doc); err != nil {
			b.Fatal(err)
		}
	}
}
