package plandiff_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cairnhq/cairn/api/plandiff"
)

// FuzzBuild feeds plan JSON to Build and checks every artifact it returns
// against the plan as encoding/json reads it (see requireArtifact).
func FuzzBuild(f *testing.F) {
	plans, _ := filepath.Glob(filepath.Join("testdata", "*.plan.json"))
	for _, p := range plans {
		f.Add(readFixture(f, filepath.Base(p)))
	}
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[{"address":"a.b","change":{"actions":["update"],` +
		`"before":{"k":["s",1]},"after":{"k":["s",2]},"before_sensitive":{"k":[true]},"after_sensitive":{"k":[false,true]},"after_unknown":{"u":true}}}]}`))
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[{"address":"a.b","change":{"actions":["create"],` +
		`"after":{"k":"v"},"after_sensitive":{"k":{"x":true}},"after_unknown":{"k":true}}}]}`))
	f.Fuzz(func(t *testing.T, plan []byte) {
		requireArtifact(t, plan)
	})
}

// FuzzBuildBounds builds plans of up to 5,064 copies of one fuzzed
// resource change, so the 5,000-resource and 4 MiB bounds are crossed.
func FuzzBuildBounds(f *testing.F) {
	big := strings.Repeat("x", 900)
	f.Add([]byte(`{"address":"terraform_data.a","type":"terraform_data","name":"a","provider_name":"terraform.io/builtin/terraform",`+
		`"change":{"actions":["create"],"before":null,"after":{"input":"`+big+`"},"after_unknown":{"id":true},"before_sensitive":false,"after_sensitive":{}}}`),
		uint16(plandiff.MaxResources))
	f.Add([]byte(`{"address":"terraform_data.s","change":{"actions":["delete","create"],"before":{"input":"`+big+`","pw":"hunter2"},`+
		`"after":{"input":"`+big+`"},"before_sensitive":{"pw":true},"after_sensitive":{"input":true},"after_unknown":{}}}`),
		uint16(64))
	f.Add([]byte(`{"address":"terraform_data.n","change":{"actions":["no-op"]}}`), uint16(plandiff.MaxResources+10))
	f.Fuzz(func(t *testing.T, change []byte, copies uint16) {
		n := 1 + int(copies)%(plandiff.MaxResources+64)
		var plan bytes.Buffer
		plan.Grow(n * (len(change) + 1))
		plan.WriteString(`{"format_version":"1.2","resource_changes":[`)
		for i := range n {
			if i > 0 {
				plan.WriteByte(',')
			}
			plan.Write(change)
		}
		plan.WriteString(`]}`)
		requireArtifact(t, plan.Bytes())
	})
}

// planChange is the part of a resource change the properties look at.
type planChange struct {
	Address string `json:"address"`
	Change  struct {
		Actions         []string `json:"actions"`
		BeforeSensitive any      `json:"before_sensitive"`
		AfterSensitive  any      `json:"after_sensitive"`
	} `json:"change"`
}

// requireArtifact builds plan and checks: the same artifact every time;
// only the documented errors; the published schema; at most MaxResources
// resources and MaxBytes bytes; counts and totals over every change of the
// plan; resources in plan order with their addresses and actions; a
// truncated flag whenever something was cut; and never a value where the
// plan's sensitivity mask says sensitive.
func requireArtifact(t *testing.T, plan []byte) {
	t.Helper()
	a, err := plandiff.Build(context.Background(), bytes.NewReader(plan))
	again, errAgain := plandiff.Build(context.Background(), bytes.NewReader(plan))
	wire, _ := json.Marshal(a)
	wireAgain, _ := json.Marshal(again)
	if (err == nil) != (errAgain == nil) || !bytes.Equal(wire, wireAgain) {
		t.Fatalf("built %s (%v), then %s (%v)", wire, err, wireAgain, errAgain)
	}
	if err != nil {
		if !errors.Is(err, plandiff.ErrMalformedPlan) && !errors.Is(err, plandiff.ErrUnsupportedFormat) && !errors.Is(err, plandiff.ErrUnsupportedAction) {
			t.Fatalf("refused with %v", err)
		}
		return
	}
	// Validating megabytes against the schema would dominate the run;
	// the shapes of large artifacts are those of small ones, and
	// TestBuildMaxBytes validates a truncated one.
	if len(wire) < 256<<10 {
		schema, err := contract()
		if err != nil {
			t.Fatal(err)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(wire))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(inst); err != nil {
			t.Fatalf("artifact breaks the contract: %v", err)
		}
	}
	if len(a.Resources) > plandiff.MaxResources || len(wire) > plandiff.MaxBytes {
		t.Fatalf("artifact of %d resources and %d bytes", len(a.Resources), len(wire))
	}

	// The plan was accepted, so encoding/json reads a change as Build
	// did; plan keys are matched exactly, as planjson reads them (a
	// struct field would also take "Resource_Changes").
	var top map[string]json.RawMessage
	if err := json.Unmarshal(plan, &top); err != nil {
		t.Fatalf("accepted plan does not decode: %v", err)
	}
	var p struct{ ResourceChanges []planChange }
	if raw, ok := top["resource_changes"]; ok {
		if err := json.Unmarshal(raw, &p.ResourceChanges); err != nil {
			t.Fatalf("accepted plan's changes do not decode: %v", err)
		}
	}
	var shown []planChange
	var counts plandiff.Counts
	for _, c := range p.ResourceChanges {
		switch strings.Join(c.Change.Actions, ",") {
		case "create":
			counts.Add++
		case "update":
			counts.Change++
		case "delete":
			counts.Destroy++
		case "delete,create", "create,delete":
			counts.Add++
			counts.Destroy++
		default:
			continue
		}
		shown = append(shown, c)
	}
	if a.Counts != counts || a.TotalResources != len(shown) || len(a.Resources) > len(shown) {
		t.Fatalf("counts %+v of %d (%d listed), the plan has %+v of %d", a.Counts, a.TotalResources, len(a.Resources), counts, len(shown))
	}
	cut := len(a.Resources) < len(shown)
	for i, res := range a.Resources {
		c := shown[i]
		if res.Address != c.Address || strings.Join(res.Actions, ",") != strings.Join(c.Change.Actions, ",") {
			t.Fatalf("resource %d is %s %v, the plan's is %s %v", i, res.Address, res.Actions, c.Address, c.Change.Actions)
		}
		if res.Detail == plandiff.DetailWithheld {
			cut = cut || res.WithheldReason == plandiff.WithheldSize
			if string(res.Before) != "null" || string(res.After) != "null" {
				t.Fatalf("withheld %s shows %s and %s", res.Address, res.Before, res.After)
			}
			continue
		}
		for _, side := range []struct {
			name  string
			value json.RawMessage
			mask  any
		}{{"before", res.Before, c.Change.BeforeSensitive}, {"after", res.After, c.Change.AfterSensitive}} {
			var v any
			if err := json.Unmarshal(side.value, &v); err != nil {
				t.Fatalf("%s of %s is not JSON: %s", side.name, res.Address, side.value)
			}
			if path, leaked := sensitiveShown(v, side.mask, res.Address+"."+side.name); leaked {
				t.Fatalf("artifact shows %s, which the plan's mask marks sensitive: %s", path, side.value)
			}
		}
	}
	if cut && !a.Truncated {
		t.Fatalf("artifact cut resources or details without saying so")
	}
}

// sensitiveShown reports a place where the artifact's value v is neither
// null nor the redaction marker although mask marks some of it sensitive.
// Masks mirror the value: true covers a subtree, objects and arrays
// descend, anything absent is not sensitive.
func sensitiveShown(v, mask any, path string) (string, bool) {
	if v == nil || isRedacted(v) || !hasTrue(mask) {
		return "", false
	}
	switch m := mask.(type) {
	case map[string]any:
		obj, ok := v.(map[string]any)
		if !ok {
			return path, true
		}
		for k, sub := range m {
			if p, bad := sensitiveShown(obj[k], sub, path+"."+k); bad {
				return p, true
			}
		}
		return "", false
	case []any:
		arr, ok := v.([]any)
		if !ok {
			return path, true
		}
		for i := range min(len(arr), len(m)) {
			if p, bad := sensitiveShown(arr[i], m[i], fmt.Sprintf("%s[%d]", path, i)); bad {
				return p, true
			}
		}
		return "", false
	}
	return path, true // true itself
}

func isRedacted(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 1 && m["cairn:redacted"] == "sensitive"
}

func hasTrue(mask any) bool {
	switch m := mask.(type) {
	case bool:
		return m
	case map[string]any:
		for _, e := range m {
			if hasTrue(e) {
				return true
			}
		}
	case []any:
		for _, e := range m {
			if hasTrue(e) {
				return true
			}
		}
	}
	return false
}

// FuzzRedactSecrets checks the runner's second line of defence: after
// RedactSecrets, no value shown in the artifact, key or scalar, contains a
// secret the run fed the plan, wherever the plan put it.
func FuzzRedactSecrets(f *testing.F) {
	plans, _ := filepath.Glob(filepath.Join("testdata", "*.plan.json"))
	for _, p := range plans {
		f.Add(readFixture(f, filepath.Base(p)), canary)
	}
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[{"address":"a.b","change":{"actions":["create"],`+
		`"after":{"tags":{"hunter2-canary":"x"},"port":8443,"note":"pw=hunter2-canary"},"after_sensitive":{},"after_unknown":{}}}]}`), canary)
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[{"address":"a.b","change":{"actions":["create"],`+
		`"after":{"port":8443,"s":"<&>"},"after_sensitive":{},"after_unknown":{}}}]}`), "8443")
	f.Fuzz(func(t *testing.T, plan []byte, secret string) {
		a, err := plandiff.Build(context.Background(), bytes.NewReader(plan))
		if err != nil || secret == "" {
			return
		}
		a.RedactSecrets([]string{secret})
		for _, res := range a.Resources {
			for _, side := range []json.RawMessage{res.Before, res.After} {
				dec := json.NewDecoder(bytes.NewReader(side))
				dec.UseNumber()
				var v any
				if err := dec.Decode(&v); err != nil {
					t.Fatalf("%s: value %s is not JSON after redaction", res.Address, side)
				}
				if where, ok := holds(v, secret); ok {
					t.Fatalf("%s still shows the secret %q in %q: %s", res.Address, secret, where, side)
				}
			}
		}
	})
}

// holds returns a key or scalar of v that contains secret, skipping the
// artifact's own markers.
func holds(v any, secret string) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, strings.Contains(x, secret)
	case json.Number:
		return string(x), strings.Contains(string(x), secret)
	case map[string]any:
		if isRedacted(x) || (len(x) == 1 && x["cairn:unknown"] == true) {
			return "", false
		}
		for k, e := range x {
			if strings.Contains(k, secret) {
				return k, true
			}
			if where, ok := holds(e, secret); ok {
				return where, true
			}
		}
	case []any:
		for _, e := range x {
			if where, ok := holds(e, secret); ok {
				return where, true
			}
		}
	}
	return "", false
}
