package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

// FuzzParseInput checks that every document ParseInput accepts satisfies
// each documented bound of cairn.policy.input/v1, measured independently
// with encoding/json's tokenizer: size, UTF-8, one JSON value, objects and
// arrays (a lower bound of the node count however scalars are counted),
// depth, keys per object without repeats, items per array, string length,
// resource changes, mask size; that its schema holds and no value is left
// where its mask says sensitive. Refusals carry an input code, and the
// verdict and value are the same every time.
func FuzzParseInput(f *testing.F) {
	f.Add(mustJSON(f, validInput()))
	doc, err := rego.BuildInput(context.Background(), bytes.NewReader(fixturePlan(f)), trackedMeta())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(doc)
	nested := validInput()
	deep := any("leaf")
	for range rego.MaxInputDepth - 5 {
		deep = []any{deep}
	}
	nested["workspace"].(map[string]any)["metadata"] = map[string]any{"deep": deep}
	f.Add(mustJSON(f, nested))
	f.Add([]byte(`{"version":"cairn.policy.input/v1","version":"x"}`))

	f.Fuzz(func(t *testing.T, doc []byte) {
		v, err := engine.ParseInput(doc)
		again, errAgain := engine.ParseInput(doc)
		if (err == nil) != (errAgain == nil) || (err == nil && v.Compare(again) != 0) {
			t.Fatalf("%q: %v, then %v", doc, err, errAgain)
		}
		if err != nil {
			if code := rego.CodeOf(err); code != rego.CodeInputInvalid && code != rego.CodeInputTooLarge {
				t.Fatalf("%q refused with %v", doc, err)
			}
			return
		}
		requireInputContract(t, doc)
	})
}

// FuzzBuildInput feeds plans to BuildInput. What it builds must pass
// ParseInput and the contract above, carry each change of the plan once
// with its masks unchanged, have nothing left where a plan's mask says
// sensitive, and be the same bytes every time.
func FuzzBuildInput(f *testing.F) {
	f.Add(fixturePlan(f))
	plans, _ := filepath.Glob(filepath.Join("..", "..", "..", "plandiff", "testdata", "*.plan.json"))
	for _, p := range plans {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[{"address":"a.b","deposed":"00000001","change":{"actions":["delete"],` +
		`"before":{"k":"v"},"before_sensitive":{"k":true}}},{"address":"a.b","change":{"actions":["create"],"after":[1,2],"after_sensitive":[false]}}]}`))

	f.Fuzz(func(t *testing.T, plan []byte) {
		doc, err := rego.BuildInput(context.Background(), bytes.NewReader(plan), trackedMeta())
		again, errAgain := rego.BuildInput(context.Background(), bytes.NewReader(plan), trackedMeta())
		if (err == nil) != (errAgain == nil) || !bytes.Equal(doc, again) {
			t.Fatalf("%q built %q (%v), then %q (%v)", plan, doc, err, again, errAgain)
		}
		if err != nil {
			if code := rego.CodeOf(err); code != rego.CodeInputInvalid && code != rego.CodeInputTooLarge {
				t.Fatalf("%q refused with %v", plan, err)
			}
			return
		}
		if _, err := engine.ParseInput(doc); err != nil {
			t.Fatalf("built input fails ParseInput: %v\n%s", err, doc)
		}
		requireInputContract(t, doc)
		requireChangesFromPlan(t, plan, doc)
	})
}

// requireInputContract checks an accepted input document against the
// documented bounds and schema without using the package's own checks.
func requireInputContract(t *testing.T, doc []byte) {
	t.Helper()
	if len(doc) > rego.MaxInputBytes || !utf8.Valid(doc) || !json.Valid(doc) {
		t.Fatalf("accepted %d bytes that are not one UTF-8 JSON document within %d", len(doc), rego.MaxInputBytes)
	}
	if err := inputShape(doc); err != nil {
		t.Fatalf("accepted input breaks a bound: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var in struct {
		Version string `json:"version"`
		Run     struct {
			Kind string `json:"kind"`
		} `json:"run"`
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions         []string `json:"actions"`
				Before          any      `json:"before"`
				After           any      `json:"after"`
				BeforeSensitive any      `json:"before_sensitive"`
				AfterSensitive  any      `json:"after_sensitive"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := dec.Decode(&in); err != nil {
		t.Fatalf("accepted input does not decode: %v", err)
	}
	if in.Version != rego.InputSchema || !slices.Contains([]string{rego.KindManual, rego.KindTracked, rego.KindSpeculative}, in.Run.Kind) {
		t.Fatalf("accepted input with version %q and run kind %q", in.Version, in.Run.Kind)
	}
	if len(in.ResourceChanges) > rego.MaxResourceChanges {
		t.Fatalf("accepted %d resource changes", len(in.ResourceChanges))
	}
	seen := map[string]bool{}
	masks := 0
	for _, rc := range in.ResourceChanges {
		if rc.Address == "" || seen[rc.Address] {
			t.Fatalf("accepted empty or repeated address %q", rc.Address)
		}
		seen[rc.Address] = true
		if !slices.Contains([]string{"no-op", "create", "read", "update", "delete", "delete,create", "create,delete", "forget"}, strings.Join(rc.Change.Actions, ",")) {
			t.Fatalf("accepted actions %q", rc.Change.Actions)
		}
		for _, side := range []struct{ value, mask any }{{rc.Change.Before, rc.Change.BeforeSensitive}, {rc.Change.After, rc.Change.AfterSensitive}} {
			masks += containers(side.mask)
			if path, ok := sensitiveLeft(side.value, side.mask, rc.Address); ok {
				t.Fatalf("accepted a value at %s that its mask marks sensitive", path)
			}
		}
	}
	if masks > rego.MaxSensitivityMapNodes {
		t.Fatalf("accepted masks with %d objects and arrays", masks)
	}
}

// inputShape walks doc's tokens and checks the size bounds of the input
// contract.
func inputShape(doc []byte) error {
	type open struct {
		object bool
		n      int
		keys   map[string]bool
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	var stack []*open
	nodes := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var top *open
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		// In an object, tokens alternate key, value; a key is a string
		// read when the count of keys and values is even.
		isKey := top != nil && top.object && top.n%2 == 0
		if s, ok := tok.(string); ok && len(s) > rego.MaxInputStringBytes {
			return fmt.Errorf("a string of %d bytes", len(s))
		}
		switch {
		case tok == json.Delim('}') || tok == json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		case isKey:
			key := tok.(string)
			if top.keys[key] {
				return fmt.Errorf("key %q repeats", key)
			}
			top.keys[key] = true
			if len(top.keys) > rego.MaxInputObjectKeys {
				return fmt.Errorf("an object with over %d keys", rego.MaxInputObjectKeys)
			}
			top.n++
			continue
		}
		if top != nil {
			top.n++
			if !top.object && top.n > rego.MaxInputArrayItems {
				return fmt.Errorf("an array with over %d items", rego.MaxInputArrayItems)
			}
		}
		if tok == json.Delim('{') || tok == json.Delim('[') {
			if nodes++; nodes > rego.MaxInputNodes {
				return fmt.Errorf("over %d objects and arrays", rego.MaxInputNodes)
			}
			stack = append(stack, &open{object: tok == json.Delim('{'), keys: map[string]bool{}})
			if len(stack) > rego.MaxInputDepth {
				return fmt.Errorf("nested %d deep", len(stack))
			}
		}
	}
}

func containers(v any) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		n++
		for _, e := range x {
			n += containers(e)
		}
	case []any:
		n++
		for _, e := range x {
			n += containers(e)
		}
	}
	return n
}

// sensitiveLeft reports the first place where value is not null although
// mask marks it sensitive, or where mask does not describe value (which
// leaves it unknown whether the value is safe). Masks mirror the value:
// true covers a subtree, false nothing, objects and arrays descend.
func sensitiveLeft(value, mask any, path string) (string, bool) {
	if value == nil {
		return "", false
	}
	switch m := mask.(type) {
	case bool:
		return path, m
	case map[string]any:
		obj, ok := value.(map[string]any)
		if !ok {
			return path, true
		}
		for k, sub := range m {
			if p, bad := sensitiveLeft(obj[k], sub, path+"."+k); bad {
				return p, true
			}
		}
		return "", false
	case []any:
		arr, ok := value.([]any)
		if !ok || len(arr) != len(m) {
			return path, true
		}
		for i := range arr {
			if p, bad := sensitiveLeft(arr[i], m[i], fmt.Sprintf("%s[%d]", path, i)); bad {
				return p, true
			}
		}
		return "", false
	}
	return path, true
}

// requireChangesFromPlan checks the built input's changes against the
// plan's: the same number, in order, with the plan's own masks.
func requireChangesFromPlan(t *testing.T, plan, doc []byte) {
	t.Helper()
	type change struct {
		Change struct {
			BeforeSensitive any `json:"before_sensitive"`
			AfterSensitive  any `json:"after_sensitive"`
		} `json:"change"`
	}
	// Plan keys are matched exactly, as planjson reads them; a struct
	// field would also take "Resource_Changes". Within a change,
	// encoding/json reads it as BuildInput did.
	var top map[string]json.RawMessage
	decodeNumbers(t, plan, &top)
	var p, in struct {
		ResourceChanges []change `json:"resource_changes"`
	}
	if raw, ok := top["resource_changes"]; ok {
		decodeNumbers(t, raw, &p.ResourceChanges)
	}
	decodeNumbers(t, doc, &in)
	if len(p.ResourceChanges) != len(in.ResourceChanges) {
		t.Fatalf("plan has %d changes, input %d", len(p.ResourceChanges), len(in.ResourceChanges))
	}
	for i := range p.ResourceChanges {
		got, want := mustJSON(t, in.ResourceChanges[i].Change), mustJSON(t, p.ResourceChanges[i].Change)
		if !bytes.Equal(got, want) {
			t.Fatalf("change %d masks %s, plan has %s", i, got, want)
		}
	}
}

func decodeNumbers(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatal(err)
	}
}
