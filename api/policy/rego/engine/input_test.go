package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

func TestParseInputAcceptsValidInput(t *testing.T) {
	t.Parallel()
	manual := validInput()
	manual["run"] = map[string]any{"kind": "manual"}
	manual["source"] = map[string]any{"commit_sha": nil, "repository_id": "cfg_1", "working_directory": ""}

	redacted := validInput()
	redacted["resource_changes"] = []any{map[string]any{
		"address": "terraform_data.s", "type": "terraform_data", "provider_name": "terraform.io/builtin/terraform",
		"change": map[string]any{
			"actions":          []any{"delete", "create"},
			"before":           map[string]any{"input": nil, "list": []any{"a", nil}},
			"after":            map[string]any{"input": map[string]any{"password": nil, "user": "admin"}},
			"before_sensitive": map[string]any{"input": true, "list": []any{false, true}},
			"after_sensitive":  map[string]any{"input": map[string]any{"password": true}, "absent": true},
		},
	}}

	empty := validInput()
	empty["resource_changes"] = []any{}

	for name, doc := range map[string]map[string]any{
		"tracked": validInput(), "manual": manual, "redacted": redacted, "no changes": empty,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := engine.ParseInput(mustJSON(t, doc)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestParseInputRefusesBadInput(t *testing.T) {
	t.Parallel()
	change := func(mutate func(c map[string]any)) func(doc map[string]any) {
		return func(doc map[string]any) {
			rc := doc["resource_changes"].([]any)[0].(map[string]any)
			mutate(rc["change"].(map[string]any))
		}
	}
	tests := []struct {
		name   string
		mutate func(doc map[string]any)
		code   string
	}{
		{"unknown top-level field: plan", func(d map[string]any) { d["plan"] = map[string]any{} }, rego.CodeInputInvalid},
		{"unknown top-level field: variables", func(d map[string]any) { d["variables"] = map[string]any{} }, rego.CodeInputInvalid},
		{"unknown top-level field: credentials", func(d map[string]any) { d["credentials"] = "x" }, rego.CodeInputInvalid},
		{"missing top-level field", func(d map[string]any) { delete(d, "workspace") }, rego.CodeInputInvalid},
		{"wrong version", func(d map[string]any) { d["version"] = "cairn.policy.input/v2" }, rego.CodeInputInvalid},
		{"unknown run kind", func(d map[string]any) { d["run"] = map[string]any{"kind": "destroy"} }, rego.CodeInputInvalid},
		{"unknown run field", func(d map[string]any) { d["run"].(map[string]any)["token"] = "x" }, rego.CodeInputInvalid},
		{"bad run id", func(d map[string]any) { d["run"].(map[string]any)["id"] = "ws_1" }, rego.CodeInputInvalid},
		{"manual with a commit", func(d map[string]any) {
			d["run"] = map[string]any{"kind": "manual"}
			d["source"].(map[string]any)["repository_id"] = "cfg_1"
		}, rego.CodeInputInvalid},
		{"manual without a configuration version", func(d map[string]any) {
			d["run"] = map[string]any{"kind": "manual"}
			d["source"].(map[string]any)["commit_sha"] = nil
		}, rego.CodeInputInvalid},
		{"tracked without a commit", func(d map[string]any) { d["source"].(map[string]any)["commit_sha"] = nil }, rego.CodeInputInvalid},
		{"speculative without a commit", func(d map[string]any) {
			d["run"] = map[string]any{"kind": "speculative"}
			d["source"].(map[string]any)["commit_sha"] = nil
		}, rego.CodeInputInvalid},
		{"uppercase commit", func(d map[string]any) { d["source"].(map[string]any)["commit_sha"] = strings.Repeat("A", 40) }, rego.CodeInputInvalid},
		{"short commit", func(d map[string]any) { d["source"].(map[string]any)["commit_sha"] = "abc123" }, rego.CodeInputInvalid},
		{"bad workspace id", func(d map[string]any) { d["workspace"].(map[string]any)["id"] = "run_1" }, rego.CodeInputInvalid},
		{"metadata not an object", func(d map[string]any) { d["workspace"].(map[string]any)["metadata"] = []any{} }, rego.CodeInputInvalid},
		{"resource_changes not an array", func(d map[string]any) { d["resource_changes"] = map[string]any{} }, rego.CodeInputInvalid},
		{"bad actions tuple", change(func(c map[string]any) { c["actions"] = []any{"update", "create"} }), rego.CodeInputInvalid},
		{"unknown action", change(func(c map[string]any) { c["actions"] = []any{"replace"} }), rego.CodeInputInvalid},
		{"empty actions", change(func(c map[string]any) { c["actions"] = []any{} }), rego.CodeInputInvalid},
		{"after_unknown carried", change(func(c map[string]any) { c["after_unknown"] = map[string]any{} }), rego.CodeInputInvalid},
		{"sensitive value left in", change(func(c map[string]any) {
			c["after_sensitive"] = map[string]any{"input": map[string]any{"tags": map[string]any{"owner": true}}}
		}), rego.CodeInputInvalid},
		{"value without a mask", change(func(c map[string]any) { c["after_sensitive"] = nil }), rego.CodeInputInvalid},
		{"mask of the wrong shape", change(func(c map[string]any) { c["after_sensitive"] = map[string]any{"input": []any{true}} }), rego.CodeInputInvalid},
		{"mask that is not boolean", change(func(c map[string]any) { c["after_sensitive"] = map[string]any{"input": "yes"} }), rego.CodeInputInvalid},
		{"duplicate address", func(d map[string]any) {
			d["resource_changes"] = []any{resourceChange("terraform_data.a", nil), resourceChange("terraform_data.a", nil)}
		}, rego.CodeInputInvalid},
		{"empty address", func(d map[string]any) { d["resource_changes"] = []any{resourceChange("", nil)} }, rego.CodeInputInvalid},
		{"unknown resource change field", func(d map[string]any) {
			d["resource_changes"].([]any)[0].(map[string]any)["mode"] = "managed"
		}, rego.CodeInputInvalid},
		{"too many resource changes", func(d map[string]any) {
			var rcs []any
			for i := range rego.MaxResourceChanges + 1 {
				rcs = append(rcs, resourceChange(fmt.Sprintf("a.r%d", i), nil))
			}
			d["resource_changes"] = rcs
		}, rego.CodeInputTooLarge},
		{"too deep", func(d map[string]any) {
			var v any = "bottom"
			for range rego.MaxInputDepth {
				v = map[string]any{"a": v}
			}
			d["workspace"].(map[string]any)["metadata"] = v
		}, rego.CodeInputTooLarge},
		{"object with too many keys", func(d map[string]any) {
			m := map[string]any{}
			for i := range rego.MaxInputObjectKeys + 1 {
				m[fmt.Sprint(i)] = 0
			}
			d["workspace"].(map[string]any)["metadata"] = m
		}, rego.CodeInputTooLarge},
		{"array with too many items", func(d map[string]any) {
			d["workspace"].(map[string]any)["metadata"] = map[string]any{"a": make([]any, rego.MaxInputArrayItems+1)}
		}, rego.CodeInputTooLarge},
		{"string too long", func(d map[string]any) {
			d["workspace"].(map[string]any)["metadata"] = map[string]any{"a": strings.Repeat("x", rego.MaxInputStringBytes+1)}
		}, rego.CodeInputTooLarge},
		{"too many nodes", func(d map[string]any) {
			arrays := make([]any, 0, 6)
			for range 6 {
				inner := make([]any, 9000)
				for i := range inner {
					inner[i] = []any{}
				}
				arrays = append(arrays, inner)
			}
			d["workspace"].(map[string]any)["metadata"] = map[string]any{"a": arrays}
		}, rego.CodeInputTooLarge},
		{"too many sensitivity-map nodes", func(d map[string]any) {
			var rcs []any
			for i := range 2100 {
				rc := resourceChange(fmt.Sprintf("a.r%d", i), nil)
				mask := map[string]any{}
				for j := range 10 {
					mask[fmt.Sprint(j)] = map[string]any{}
				}
				rc["change"].(map[string]any)["after_sensitive"] = mask
				rcs = append(rcs, rc)
			}
			d["resource_changes"] = rcs
		}, rego.CodeInputTooLarge},
		{"too many bytes", func(d map[string]any) {
			var parts []any
			for range 33 {
				parts = append(parts, strings.Repeat("x", 65_000))
			}
			d["workspace"].(map[string]any)["metadata"] = map[string]any{"a": parts}
		}, rego.CodeInputTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := validInput()
			tt.mutate(doc)
			_, err := engine.ParseInput(mustJSON(t, doc))
			wantCode(t, err, tt.code)
		})
	}
}

func TestParseInputRefusesMalformedJSON(t *testing.T) {
	t.Parallel()
	valid := string(mustJSON(t, validInput()))
	for name, doc := range map[string]string{
		"not json":       "nope",
		"array":          "[]",
		"trailing value": valid + " {}",
		"duplicate key":  `{"version": "x", ` + valid[1:],
		"invalid utf-8":  strings.Replace(valid, "prod", "pr\xffd", 1),
		"truncated":      valid[:len(valid)-1],
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := engine.ParseInput([]byte(doc))
			wantCode(t, err, rego.CodeInputInvalid)
		})
	}
}

func TestCheckSecrets(t *testing.T) {
	t.Parallel()
	doc := validInput()
	doc["workspace"].(map[string]any)["metadata"] = map[string]any{
		"plain":   "the hunter22 value",
		"escaped": `pa"ss<word>`,
	}
	raw := mustJSON(t, doc) // encoding/json writes pa\"ss\u003cword\u003e
	tests := []struct {
		name   string
		secret string
		found  bool
	}{
		{"raw match", "hunter22", true},
		{"escaped match", `pa"ss<word>`, true},
		{"absent", "correct horse", false},
		{"too short to check", "the", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := rego.CheckSecrets(raw, [][]byte{[]byte("unrelated"), []byte(tt.secret)})
			if !tt.found {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, rego.CodeInputSecretDetected)
			if strings.Contains(err.Error(), tt.secret) {
				t.Fatal("the error repeats the secret")
			}
		})
	}
	// The same secret escaped without HTML escaping, as CanonicalJSON
	// writes it.
	canonical, err := rego.CanonicalJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, rego.CheckSecrets(canonical, [][]byte{[]byte(`pa"ss<word>`)}), rego.CodeInputSecretDetected)
}
