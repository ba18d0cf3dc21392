package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

// requireTags is the policy most tests use: every terraform_data change
// that is created or updated must carry owner and env tags in its input.
const requireTags = `package cairn.v1

required := {"owner", "env"}

findings contains f if {
	some rc in input.resource_changes
	rc.type == "terraform_data"
	some action in rc.change.actions
	action in {"create", "update"}
	some tag in required
	not rc.change.after.input.tags[tag]
	f := {
		"id": sprintf("missing-%s-%s", [tag, rc.address]),
		"title": "Missing required tag",
		"message": sprintf("%s has no %s tag", [rc.address, tag]),
		"resource_address": rc.address,
		"details": {"tag": tag},
	}
}

decision := {"findings": findings}
`

const requireTagsTest = `package cairn.v1_test

import data.cairn.v1

tagged := {
	"address": "terraform_data.a",
	"type": "terraform_data",
	"change": {"actions": ["create"], "after": {"input": {"tags": {"owner": "x", "env": "prod"}}}},
}

untagged := {
	"address": "terraform_data.b",
	"type": "terraform_data",
	"change": {"actions": ["create"], "after": {"input": {"tags": {}}}},
}

test_tagged_passes if {
	v1.decision.findings == set() with input as {"resource_changes": [tagged]}
}

test_untagged_fails_twice if {
	count(v1.decision.findings) == 2 with input as {"resource_changes": [untagged]}
}
`

// files writes name → content under a fresh directory.
func files(t *testing.T, fs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range fs {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type built struct {
	report  engine.BuildReport
	bundle  []byte
	results []byte
	err     error
}

func build(t *testing.T, fs map[string]string) built {
	t.Helper()
	var bundle, results bytes.Buffer
	report, err := engine.Build(context.Background(), files(t, fs), &bundle, &results)
	return built{report: report, bundle: bundle.Bytes(), results: results.Bytes(), err: err}
}

// mustBuild builds a policy that must pass and returns its bundle.
func mustBuild(t *testing.T, fs map[string]string) []byte {
	t.Helper()
	b := build(t, fs)
	if b.err != nil {
		t.Fatalf("build: %v", b.err)
	}
	return b.bundle
}

func loadPolicy(t testing.TB, fs map[string]string) *engine.Policy {
	t.Helper()
	dir := t.TempDir()
	for name, content := range fs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var bundle, results bytes.Buffer
	if _, err := engine.Build(context.Background(), dir, &bundle, &results); err != nil {
		t.Fatalf("build: %v", err)
	}
	p, err := engine.Load(context.Background(), &bundle)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return p
}

// decisionPolicy is a policy whose decision is the given Rego expression.
func decisionPolicy(t testing.TB, expr string) *engine.Policy {
	t.Helper()
	return loadPolicy(t, map[string]string{"policy.rego": "package cairn.v1\n\ndecision := " + expr + "\n"})
}

func wantEqual(t *testing.T, what string, want, got any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", code)
	}
	if got := rego.CodeOf(err); got != code {
		t.Fatalf("code %q (%v), want %s", got, err, code)
	}
}

func wantDetail(t *testing.T, err error, fragment string) {
	t.Helper()
	var be *rego.BuildError
	var ee *rego.EvalError
	var detail string
	switch {
	case errors.As(err, &be):
		detail = be.Detail
	case errors.As(err, &ee):
		detail = ee.Detail
	default:
		t.Fatalf("%v is neither a BuildError nor an EvalError", err)
	}
	if !strings.Contains(detail, fragment) {
		t.Fatalf("detail %q does not mention %q", detail, fragment)
	}
}

// validInput is a minimal valid input document as a map, for tests to
// change one thing in.
func validInput() map[string]any {
	return map[string]any{
		"version": rego.InputSchema,
		"run":     map[string]any{"kind": "tracked", "id": "run_1"},
		"source": map[string]any{
			"commit_sha":        strings.Repeat("a", 40),
			"repository_id":     "12345",
			"working_directory": "infra",
		},
		"workspace": map[string]any{"id": "ws_1", "metadata": map[string]any{"name": "prod"}},
		"resource_changes": []any{
			resourceChange("terraform_data.a", map[string]any{"input": map[string]any{"tags": map[string]any{"owner": "x", "env": "prod"}}}),
		},
	}
}

func resourceChange(address string, after any) map[string]any {
	return map[string]any{
		"address":       address,
		"type":          "terraform_data",
		"provider_name": "terraform.io/builtin/terraform",
		"change": map[string]any{
			"actions":          []any{"create"},
			"before":           nil,
			"after":            after,
			"before_sensitive": false,
			"after_sensitive":  map[string]any{},
		},
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
