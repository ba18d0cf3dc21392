// Package plandifftest writes synthetic OpenTofu plan JSON, so benchmarks
// and load tests of plan handling (the plan diff, the policy input) can use
// plans of any size without running tofu or keeping large fixtures in the
// repository. The shape follows `tofu show -json` of OpenTofu 1.10
// (format_version 1.2).
package plandifftest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// Secret is the value of the plan's sensitive variable and begins every
// resource's sensitive token, so a caller can assert it never gets past
// redaction.
const Secret = "plandifftest-canary-secret"

type resourceChange struct {
	Address      string `json:"address"`
	Mode         string `json:"mode"`
	Type         string `json:"type"`
	Name         string `json:"name"`
	Index        int    `json:"index"`
	ProviderName string `json:"provider_name"`
	Change       change `json:"change"`
}

type change struct {
	Actions         []string `json:"actions"`
	Before          any      `json:"before"`
	After           any      `json:"after"`
	AfterUnknown    any      `json:"after_unknown"`
	BeforeSensitive any      `json:"before_sensitive"`
	AfterSensitive  any      `json:"after_sensitive"`
}

type plannedResource struct {
	Address         string `json:"address"`
	Mode            string `json:"mode"`
	Type            string `json:"type"`
	Name            string `json:"name"`
	Index           int    `json:"index"`
	ProviderName    string `json:"provider_name"`
	SchemaVersion   int    `json:"schema_version"`
	Values          any    `json:"values"`
	SensitiveValues any    `json:"sensitive_values"`
}

// PlanJSON writes a valid plan with the given number of terraform_data
// create changes (terraform_data.item[0], [1], ...). Each carries plain,
// nested, sensitive and unknown attributes, and planned_values repeats
// them as tofu does, so parsing cost resembles a real plan's.
func PlanJSON(w io.Writer, resources int) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	write := func(s string) { _, _ = bw.WriteString(s) } // bufio keeps the first error for Flush

	write(`{"format_version":"1.2","terraform_version":"1.10.6","variables":{"token":{"value":`)
	if err := enc.Encode(Secret); err != nil {
		return fmt.Errorf("writing plan variables: %w", err)
	}
	write(`}},"planned_values":{"root_module":{"resources":[`)
	for i := range resources {
		if i > 0 {
			write(",")
		}
		if err := enc.Encode(plannedResource{
			Address: address(i), Mode: "managed", Type: "terraform_data", Name: "item", Index: i,
			ProviderName: provider, Values: after(i), SensitiveValues: afterSensitive(),
		}); err != nil {
			return fmt.Errorf("writing planned values: %w", err)
		}
	}
	write(`]}},"resource_changes":[`)
	for i := range resources {
		if i > 0 {
			write(",")
		}
		if err := enc.Encode(resourceChange{
			Address: address(i), Mode: "managed", Type: "terraform_data", Name: "item", Index: i,
			ProviderName: provider,
			Change: change{
				Actions:         []string{"create"},
				Before:          nil,
				After:           after(i),
				AfterUnknown:    map[string]any{"id": true, "output": true},
				BeforeSensitive: false,
				AfterSensitive:  afterSensitive(),
			},
		}); err != nil {
			return fmt.Errorf("writing resource changes: %w", err)
		}
	}
	write(`],"configuration":{"root_module":{"variables":{"token":{"sensitive":true}}}},"timestamp":"2025-01-01T00:00:00Z","errored":false}`)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing plan json: %w", err)
	}
	return nil
}

// TaggedPlanJSON writes a plan of n small terraform_data creations in the
// shape policies inspect: owner and env tags under input (every fiftieth
// resource has none) and a sensitive password in every tenth. Resources
// this small keep a plan of 5,000 changes within the policy input's
// bounds, as real plans of that size with small resources are.
func TaggedPlanJSON(w io.Writer, n int) error {
	changes := make([]resourceChange, n)
	for i := range changes {
		input := map[string]any{"size": i % 7}
		sensitive := map[string]any{}
		if i%50 != 0 {
			input["tags"] = map[string]any{"owner": "team-a", "env": "prod"}
		}
		if i%10 == 1 {
			input["password"] = nil
			sensitive["password"] = true
		}
		changes[i] = resourceChange{Address: address(i), Mode: "managed", Type: "terraform_data", Name: "item", Index: i,
			ProviderName: provider, Change: change{Actions: []string{"create"}, After: map[string]any{"input": input},
				AfterUnknown: map[string]any{"output": true}, BeforeSensitive: false, AfterSensitive: map[string]any{"input": sensitive}}}
	}
	return json.NewEncoder(w).Encode(map[string]any{"format_version": "1.2", "terraform_version": "1.10.6", "resource_changes": changes})
}

const provider = "terraform.io/builtin/terraform"

func address(i int) string { return fmt.Sprintf("terraform_data.item[%d]", i) }

func after(i int) map[string]any {
	return map[string]any{
		"input": map[string]any{
			"name":  fmt.Sprintf("item-%d", i),
			"size":  i,
			"tags":  []string{"synthetic", "bench"},
			"token": fmt.Sprintf("%s-%d", Secret, i),
		},
		"triggers_replace": nil,
	}
}

func afterSensitive() map[string]any {
	return map[string]any{
		"input":  map[string]any{"tags": []bool{false, false}, "token": true},
		"output": map[string]any{},
	}
}
