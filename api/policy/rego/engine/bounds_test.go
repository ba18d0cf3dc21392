package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

// nodes counts a JSON document's values the way SPEC §8 does: objects,
// arrays and scalars, not object keys.
func nodes(t testing.TB, doc []byte) int {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var count func(any) int
	count = func(v any) int {
		n := 1
		switch x := v.(type) {
		case map[string]any:
			for _, e := range x {
				n += count(e)
			}
		case []any:
			for _, e := range x {
				n += count(e)
			}
		}
		return n
	}
	return count(v)
}

// withScalars is a valid input whose metadata holds k zeros, spread over
// arrays within the array bound.
func withScalars(k int) map[string]any {
	doc := validInput()
	var arrays []any
	for k > 0 {
		n := min(k, 9000)
		arrays = append(arrays, make([]any, n))
		k -= n
	}
	for _, a := range arrays {
		for i := range a.([]any) {
			a.([]any)[i] = 0
		}
	}
	doc["workspace"].(map[string]any)["metadata"] = map[string]any{"zeros": arrays}
	return doc
}

// TestInputNodeBoundCountsScalars: a document of exactly 50,000 nodes
// passes and one more scalar fails, so scalars count and keys do not.
func TestInputNodeBoundCountsScalars(t *testing.T) {
	t.Parallel()
	// Everything but the zeros: the document with {"zeros": null} as its
	// metadata, less the null.
	fixed := nodes(t, mustJSON(t, withScalars(0))) - 1
	k := rego.MaxInputNodes - fixed - 7 // "zeros" holds six arrays of zeros
	atLimit := mustJSON(t, withScalars(k))
	if got := nodes(t, atLimit); got != rego.MaxInputNodes {
		t.Fatalf("fixture has %d nodes, want %d", got, rego.MaxInputNodes)
	}
	if _, err := engine.ParseInput(atLimit); err != nil {
		t.Fatalf("%d nodes: %v", rego.MaxInputNodes, err)
	}
	_, err := engine.ParseInput(mustJSON(t, withScalars(k+1)))
	wantCode(t, err, rego.CodeInputTooLarge)

	// Long keys cost bytes, not nodes.
	keyed := validInput()
	keys := map[string]any{}
	for i := range 5000 {
		keys[fmt.Sprintf("key-%05d", i)] = map[string]any{}
	}
	keyed["workspace"].(map[string]any)["metadata"] = keys
	if _, err := engine.ParseInput(mustJSON(t, keyed)); err != nil {
		t.Fatalf("5,000 keys of empty objects: %v", err)
	}
}

// maskedChanges is a valid input with n changes, each carrying an
// after_sensitive mask of m false booleans.
func maskedChanges(n, m int) map[string]any {
	doc := validInput()
	var rcs []any
	for i := range n {
		mask := map[string]any{}
		for j := range m {
			mask[fmt.Sprint(j)] = false
		}
		rc := resourceChange(fmt.Sprintf("a.r%d", i), nil)
		rc["change"].(map[string]any)["after_sensitive"] = mask
		rcs = append(rcs, rc)
	}
	doc["resource_changes"] = rcs
	return doc
}

// TestSensitivityBoundCountsBooleans: every mask node counts, booleans
// included, toward the 20,000-node bound: each change below has 2 mask
// nodes of its own (before_sensitive false, the after_sensitive object)
// and 38 false leaves, 40 in all, so 500 changes reach it exactly.
func TestSensitivityBoundCountsBooleans(t *testing.T) {
	t.Parallel()
	if _, err := engine.ParseInput(mustJSON(t, maskedChanges(500, 38))); err != nil {
		t.Fatalf("20,000 mask nodes: %v", err)
	}
	_, err := engine.ParseInput(mustJSON(t, maskedChanges(500, 39)))
	wantCode(t, err, rego.CodeInputTooLarge)
}

// TestBuildInputAtTheNodeBound: the plan the bounds admit is built, the
// next change is refused as too large, and a 5,000-change plan (SPEC's
// change bound) cannot fit: every change carries at least ten values.
func TestBuildInputAtTheNodeBound(t *testing.T) {
	t.Parallel()
	change := func(i int) string {
		return fmt.Sprintf(`{"address": "t.r%d", "type": "t", "provider_name": "p", "change": {"actions": ["create"], "before": null, "after": {"a": 1}, "before_sensitive": false, "after_sensitive": {}}}`, i)
	}
	plan := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = change(i)
		}
		return `{"format_version": "1.2", "resource_changes": [` + strings.Join(parts, ",") + `]}`
	}
	one, err := rego.BuildInput(context.Background(), strings.NewReader(plan(1)), trackedMeta())
	if err != nil {
		t.Fatal(err)
	}
	two, err := rego.BuildInput(context.Background(), strings.NewReader(plan(2)), trackedMeta())
	if err != nil {
		t.Fatal(err)
	}
	perChange := nodes(t, two) - nodes(t, one)
	fixed := nodes(t, one) - perChange
	if perChange != 12 {
		t.Fatalf("a change has %d nodes, want 12", perChange)
	}
	largest := (rego.MaxInputNodes - fixed) / perChange
	doc, err := rego.BuildInput(context.Background(), strings.NewReader(plan(largest)), trackedMeta())
	if err != nil {
		t.Fatalf("%d changes: %v", largest, err)
	}
	if _, err := engine.ParseInput(doc); err != nil {
		t.Fatalf("%d changes: %v", largest, err)
	}
	_, err = rego.BuildInput(context.Background(), strings.NewReader(plan(largest+1)), trackedMeta())
	wantCode(t, err, rego.CodeInputTooLarge)
	_, err = rego.BuildInput(context.Background(), strings.NewReader(plan(rego.MaxResourceChanges)), trackedMeta())
	wantCode(t, err, rego.CodeInputTooLarge)
}
