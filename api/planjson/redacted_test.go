package planjson_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/planjson"
)

// secretPlan is what `tofu show -json` writes for an update of a
// terraform_data whose input is a sensitive variable ("hunter2") that the
// provider copied, unmarked, into its output; the secret is also in the
// variables, the prior state and the planned values, and a sensitive
// output holds it.
const secretPlan = `{
  "format_version": "1.2",
  "terraform_version": "1.10.6",
  "variables": {"password": {"value": "hunter2"}},
  "planned_values": {"root_module": {"resources": [{"address": "terraform_data.db", "values": {"input": "hunter2"}}]}},
  "resource_drift": [],
  "resource_changes": [
    {
      "address": "terraform_data.db", "mode": "managed", "type": "terraform_data", "name": "db",
      "provider_name": "terraform.io/builtin/terraform",
      "change": {
        "actions": ["update"],
        "before": {"id": "abc", "label": "kept", "input": "old-secret", "output": "aHVudGVyMg", "triggers_replace": null, "port": 5432},
        "after": {"id": "abc", "label": "kept", "input": "hunter2", "output": "hunter2", "triggers_replace": null, "port": 5432},
        "after_unknown": {},
        "before_sensitive": {"input": true, "label": true},
        "after_sensitive": {"input": true, "label": true, "port": true}
      }
    },
    {
      "address": "data.http.probe", "mode": "data", "type": "http", "name": "probe",
      "provider_name": "registry.opentofu.org/hashicorp/http",
      "change": {"actions": ["read"], "before": null, "after": {"url": "https://example.com/?k=hunter2", "tags": {"hunter2": "x"}},
        "after_unknown": {}, "before_sensitive": false, "after_sensitive": {}}
    },
    {
      "address": "terraform_data.unmasked", "mode": "managed", "type": "terraform_data", "name": "unmasked",
      "provider_name": "terraform.io/builtin/terraform",
      "change": {"actions": ["create"], "before": null, "after": {"input": "plain"}, "after_unknown": {"id": true}, "before_sensitive": false}
    }
  ],
  "output_changes": {
    "password": {"actions": ["create"], "before": null, "after": "hunter2", "after_unknown": false, "before_sensitive": false, "after_sensitive": true},
    "greeting": {"actions": ["create"], "before": null, "after": "hello", "after_unknown": false, "before_sensitive": false, "after_sensitive": false}
  },
  "prior_state": {"values": {"root_module": {"resources": [{"values": {"input": "hunter2"}}]}}},
  "configuration": {"root_module": {"variables": {"password": {"sensitive": true}}}},
  "relevant_attributes": [{"resource": "terraform_data.db", "attribute": ["input"]}],
  "timestamp": "2025-01-01T00:00:00Z"
}`

const schemas = `{
  "format_version": "1.0",
  "provider_schemas": {
    "terraform.io/builtin/terraform": {
      "provider": {"version": 0, "block": {}},
      "resource_schemas": {"terraform_data": {"version": 0, "block": {"attributes": {"input": {"type": "dynamic", "optional": true}}}}},
      "data_source_schemas": {"terraform_remote_state": {"version": 0, "block": {}}}
    },
    "registry.opentofu.org/hashicorp/http": {
      "provider": {"version": 0, "block": {}},
      "data_source_schemas": {"http": {"version": 0, "block": {}}, "other": {"version": 0, "block": {}}}
    },
    "registry.opentofu.org/hashicorp/unused": {"provider": {"version": 0, "block": {}}, "resource_schemas": {"x": {}}}
  }
}`

// renderedPlan is the shape OpenTofu's jsonformat.Plan decodes.
type renderedPlan struct {
	PlanFormatVersion string `json:"plan_format_version"`
	OutputChanges     map[string]struct {
		After          any `json:"after"`
		AfterSensitive any `json:"after_sensitive"`
	} `json:"output_changes"`
	ResourceChanges []struct {
		Address string `json:"address"`
		Change  struct {
			Before          any `json:"before"`
			After           any `json:"after"`
			BeforeSensitive any `json:"before_sensitive"`
			AfterSensitive  any `json:"after_sensitive"`
		} `json:"change"`
	} `json:"resource_changes"`
	ResourceDrift         []json.RawMessage `json:"resource_drift"`
	RelevantAttributes    []json.RawMessage `json:"relevant_attributes"`
	ProviderFormatVersion string            `json:"provider_format_version"`
	ProviderSchemas       map[string]struct {
		ResourceSchemas   map[string]json.RawMessage `json:"resource_schemas"`
		DataSourceSchemas map[string]json.RawMessage `json:"data_source_schemas"`
	} `json:"provider_schemas"`
}

func redacted(t *testing.T, plan, schemas string, secrets ...string) (renderedPlan, string) {
	t.Helper()
	var buf bytes.Buffer
	if err := planjson.WriteRedacted(context.Background(), &buf, strings.NewReader(plan), strings.NewReader(schemas), secrets); err != nil {
		t.Fatal(err)
	}
	// Exactly the sections OpenTofu's jsonformat.Plan reads.
	var sections map[string]json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &sections); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	var names []string
	for name := range sections {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"output_changes", "plan_format_version", "provider_format_version", "provider_schemas", "relevant_attributes",
		"resource_changes", "resource_drift"}; !slices.Equal(names, want) {
		t.Fatalf("sections %v, want %v", names, want)
	}
	var p renderedPlan
	if err := json.Unmarshal(buf.Bytes(), &p); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	return p, buf.String()
}

func TestRedactedPlanHoldsNoSecretAndWhatTheRendererReads(t *testing.T) {
	t.Parallel()
	p, raw := redacted(t, secretPlan, schemas, "hunter2")
	for _, leak := range []string{"hunter2", base64.RawStdEncoding.EncodeToString([]byte("hunter2")), "old-secret",
		"prior_state", "planned_values", "variables", "configuration", "timestamp"} {
		if strings.Contains(raw, leak) {
			t.Errorf("the redacted plan holds %q:\n%s", leak, raw)
		}
	}
	if p.PlanFormatVersion != "1.2" || p.ProviderFormatVersion != "1.0" || len(p.ResourceChanges) != 3 ||
		len(p.RelevantAttributes) != 1 || p.ResourceDrift == nil {
		t.Fatalf("sections: %s", raw)
	}

	change := p.ResourceChanges[0].Change
	before, _ := change.Before.(map[string]any)
	after, _ := change.After.(map[string]any)
	// Masked values are placeholders of their own type, marked sensitive;
	// an unchanged value keeps its placeholder, a changed one does not.
	if before["input"] == after["input"] || before["label"] != after["label"] || strings.Contains(raw, "kept") ||
		before["id"] != "abc" || after["id"] != "abc" {
		t.Errorf("input, label and id: %v / %v", before, after)
	}
	if _, ok := after["port"].(float64); !ok || after["port"] == 5432.0 || before["port"] != 5432.0 {
		t.Errorf("a sensitive number is not a number placeholder: %v / %v", before["port"], after["port"])
	}
	// The provider's unmasked copy of the secret (raw and base64) is
	// replaced and marked sensitive on both sides.
	for side, m := range map[string]any{"before": change.BeforeSensitive, "after": change.AfterSensitive} {
		if mm, _ := m.(map[string]any); mm["output"] != true || mm["input"] != true {
			t.Errorf("%s mask %v does not mark input and output", side, m)
		}
	}
	if after["output"] == before["output"] {
		t.Errorf("different values share a placeholder: %v", after["output"])
	}
	// A secret in a nested string and in a key.
	probe := p.ResourceChanges[1].Change
	if m, _ := probe.AfterSensitive.(map[string]any); m["url"] != true || m["tags"] != true {
		t.Errorf("probe mask %v", probe.AfterSensitive)
	}
	// A value without a mask is hidden whole.
	if p.ResourceChanges[2].Change.BeforeSensitive != false || p.ResourceChanges[2].Change.AfterSensitive != true {
		t.Errorf("unmasked value: %+v", p.ResourceChanges[2].Change)
	}
	if out := p.OutputChanges["password"]; out.AfterSensitive != true || out.After == "hunter2" {
		t.Errorf("sensitive output %+v", out)
	}
	if out := p.OutputChanges["greeting"]; out.After != "hello" || out.AfterSensitive != false {
		t.Errorf("plain output %+v", out)
	}

	// Only the schemas of the types the changes name.
	if len(p.ProviderSchemas) != 2 {
		t.Fatalf("providers %v", p.ProviderSchemas)
	}
	builtin, http := p.ProviderSchemas["terraform.io/builtin/terraform"], p.ProviderSchemas["registry.opentofu.org/hashicorp/http"]
	if len(builtin.ResourceSchemas) != 1 || builtin.ResourceSchemas["terraform_data"] == nil || len(builtin.DataSourceSchemas) != 0 ||
		len(http.DataSourceSchemas) != 1 || http.DataSourceSchemas["http"] == nil {
		t.Fatalf("schemas %s", raw)
	}
}

// TestRedactedPlanPlaceholdersAreNotTheValue: two documents of the same
// plan use unrelated placeholders, so a placeholder says nothing about
// the value beyond equality inside one document.
func TestRedactedPlanPlaceholdersAreNotTheValue(t *testing.T) {
	t.Parallel()
	a, _ := redacted(t, secretPlan, schemas)
	b, _ := redacted(t, secretPlan, schemas)
	input := func(p renderedPlan) any { return p.ResourceChanges[0].Change.After.(map[string]any)["input"] }
	if input(a) == input(b) {
		t.Fatal("two documents share a placeholder")
	}
}

func TestRedactedPlanRefusesWhatIsNoPlan(t *testing.T) {
	t.Parallel()
	for name, plan := range map[string]string{
		"state JSON":          `{"values": {}}`,
		"format 2":            `{"format_version": "2.0"}`,
		"changes twice":       `{"format_version": "1.2", "resource_changes": [], "resource_changes": []}`,
		"trailing data":       `{"format_version": "1.2"} {}`,
		"changes not a list":  `{"format_version": "1.2", "resource_changes": {}}`,
		"change not a object": `{"format_version": "1.2", "resource_changes": [1]}`,
	} {
		err := planjson.WriteRedacted(context.Background(), &bytes.Buffer{}, strings.NewReader(plan), strings.NewReader(schemas), nil)
		if !errors.Is(err, planjson.ErrMalformed) && !errors.Is(err, planjson.ErrUnsupportedFormat) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
