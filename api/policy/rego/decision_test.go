package rego_test

import (
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/policy/rego"
)

// TestDecisionFromJSON: the rules every process applies to a decision
// document, whoever wrote it (a sandboxed evaluation, or the engine from
// OPA's result); package engine's tests drive the same rules through real
// policies.
func TestDecisionFromJSON(t *testing.T) {
	t.Parallel()
	finding := `{"id": "f1", "title": "T", "message": "M"}`
	tests := []struct {
		name, doc string
		findings  int // -1: refused with CodeDecisionInvalid
	}{
		{"empty findings", `{"findings": []}`, 0},
		{"one finding with everything", `{"findings": [{"id": "f1", "title": "T", "message": "M", "resource_address": "a.b", "details": {"n": 1.5, "l": [true, null, "s"]}}]}`, 1},
		{"not json", `{"findings": [`, -1},
		{"two documents", `{"findings": []} {"findings": []}`, -1},
		{"invalid UTF-8", "{\"findings\": [{\"id\": \"\xff\", \"title\": \"T\", \"message\": \"M\"}]}", -1},
		{"an array", `[]`, -1},
		{"extra key", `{"findings": [], "allow": true}`, -1},
		{"findings an object", `{"findings": {}}`, -1},
		{"unknown finding key", `{"findings": [{"id": "f1", "title": "T", "message": "M", "severity": "high"}]}`, -1},
		{"duplicate id", `{"findings": [` + finding + `,` + finding + `]}`, -1},
		{"title a number", `{"findings": [{"id": "f1", "title": 1, "message": "M"}]}`, -1},
		{"NUL in a message", `{"findings": [{"id": "f1", "title": "T", "message": "\u0000"}]}`, -1},
		{"details an array", `{"findings": [{"id": "f1", "title": "T", "message": "M", "details": []}]}`, -1},
		{"details 9 deep", `{"findings": [{"id": "f1", "title": "T", "message": "M", "details": ` +
			strings.Repeat(`{"a": `, 8) + `{"a": 1}` + strings.Repeat("}", 8) + `}]}`, -1},
		{"details 8 deep", `{"findings": [{"id": "f1", "title": "T", "message": "M", "details": ` +
			strings.Repeat(`{"a": `, 7) + `{"a": 1}` + strings.Repeat("}", 7) + `}]}`, 1},
		{"over the bound", `{"findings": [], "pad": "` + strings.Repeat("x", rego.MaxDecisionBytes) + `"}`, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := rego.DecisionFromJSON([]byte(tt.doc))
			if tt.findings < 0 {
				if rego.CodeOf(err) != rego.CodeDecisionInvalid {
					t.Fatalf("err %v, want %s", err, rego.CodeDecisionInvalid)
				}
				return
			}
			if err != nil || len(d.Findings) != tt.findings {
				t.Fatalf("%d findings, err %v; want %d", len(d.Findings), err, tt.findings)
			}
		})
	}
}
