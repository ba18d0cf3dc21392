package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

// fixtureSecrets are the sensitive values testdata/plan.json carries in
// variables, prior state, output changes and masked attributes.
var fixtureSecrets = []string{
	"s3cr3t-db-password-1", "old-Pa55w0rd-value", "new-Pa55w0rd-value", "private-k3y-material", "misaligned-s3cret-token",
}

func trackedMeta() rego.InputMeta {
	commit := strings.Repeat("0123456789", 4)
	return rego.InputMeta{
		RunID: "run_abc", Kind: rego.KindTracked, CommitSHA: &commit, RepositoryID: "R_kgDOExample",
		WorkingDirectory: "infra/prod", WorkspaceID: "ws_abc", WorkspaceMetadata: map[string]any{"name": "prod"},
	}
}

func fixturePlan(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/plan.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeDoc(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// at follows a path of object keys and array indexes.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not an object at %q", path, k)
			}
			if v, ok = m[k]; !ok {
				t.Fatalf("%v: no key %q", path, k)
			}
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("%v: no index %d", path, k)
			}
			v = a[k]
		}
	}
	return v
}

func TestBuildInputFromPlan(t *testing.T) {
	t.Parallel()
	doc, err := rego.BuildInput(context.Background(), bytes.NewReader(fixturePlan(t)), trackedMeta())
	if err != nil {
		t.Fatalf("build input: %v", err)
	}

	for _, s := range fixtureSecrets {
		if bytes.Contains(doc, []byte(s)) {
			t.Errorf("secret %q is in the input", s)
		}
	}
	secrets := make([][]byte, len(fixtureSecrets))
	for i, s := range fixtureSecrets {
		secrets[i] = []byte(s)
	}
	if err := rego.CheckSecrets(doc, secrets); err != nil {
		t.Errorf("canary: %v", err)
	}
	if _, err := engine.ParseInput(doc); err != nil {
		t.Fatalf("the input does not parse: %v", err)
	}
	canonical, err := rego.CanonicalJSON(decodeDoc(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(canonical, doc) {
		t.Error("the input is not in canonical form")
	}

	m := decodeDoc(t, doc)
	wantEqual(t, "run", map[string]any{"id": "run_abc", "kind": "tracked"}, m["run"])
	rcs := m["resource_changes"].([]any)
	var addresses []string
	byAddress := map[string]any{}
	for _, rc := range rcs {
		a := at(t, rc, "address").(string)
		addresses = append(addresses, a)
		byAddress[a] = rc
	}
	// Every change is kept, in plan order; the deposed object gets its own
	// address.
	wantEqual(t, "addresses", []string{
		"terraform_data.web", "terraform_data.db_password", "terraform_data.credentials", "terraform_data.keys",
		"terraform_data.misaligned", "terraform_data.unchanged", "terraform_data.cbd",
		"terraform_data.cbd (deposed object 8f3a2b1c)", "data.terraform_remote_state.network",
	}, addresses)

	tests := []struct {
		name string
		path []any
		want any
	}{
		{"whole sensitive attribute", []any{"terraform_data.db_password", "change", "after", "input"}, nil},
		{"its mask is kept", []any{"terraform_data.db_password", "change", "after_sensitive"}, map[string]any{"input": true, "output": true}},
		{"nested sensitive field before", []any{"terraform_data.credentials", "change", "before", "input", "password"}, nil},
		{"nested plain field before", []any{"terraform_data.credentials", "change", "before", "input", "user"}, "deploy"},
		{"sensitive subtree before", []any{"terraform_data.credentials", "change", "before", "output"}, nil},
		{"nested sensitive field after", []any{"terraform_data.credentials", "change", "after", "input", "password"}, nil},
		{"nested plain field after", []any{"terraform_data.credentials", "change", "after", "input", "user"}, "deploy2"},
		{"tags kept", []any{"terraform_data.credentials", "change", "after", "input", "tags"}, map[string]any{"env": "prod", "owner": "platform"}},
		{"nested mask kept", []any{"terraform_data.credentials", "change", "before_sensitive"}, map[string]any{"input": map[string]any{"password": true, "tags": map[string]any{}}, "output": true}},
		{"sensitive list element", []any{"terraform_data.keys", "change", "after", "input", "keys"}, []any{"ssh-ed25519 AAAA public", nil}},
		{"misaligned mask nulls the whole value", []any{"terraform_data.misaligned", "change", "after"}, nil},
		{"misaligned mask kept", []any{"terraform_data.misaligned", "change", "after_sensitive"}, map[string]any{"input": []any{true}, "output": map[string]any{}}},
		{"numbers kept as written", []any{"terraform_data.web", "change", "after", "input", "ratio"}, json.Number("1.50")},
		{"no-op kept", []any{"terraform_data.unchanged", "change", "actions"}, []any{"no-op"}},
		{"deposed delete", []any{"terraform_data.cbd (deposed object 8f3a2b1c)", "change", "actions"}, []any{"delete"}},
		{"read kept", []any{"data.terraform_remote_state.network", "change", "actions"}, []any{"read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantEqual(t, tt.name, tt.want, at(t, byAddress[tt.path[0].(string)], tt.path[1:]...))
		})
	}
	for _, rc := range rcs {
		if _, ok := at(t, rc, "change").(map[string]any)["after_unknown"]; ok {
			t.Error("after_unknown is carried")
		}
	}
	if keys := slices.Sorted(maps.Keys(m)); !slices.Equal(keys, []string{"resource_changes", "run", "source", "version", "workspace"}) {
		t.Errorf("top-level keys %v", keys)
	}
}

// TestBuildInputThroughPolicy evaluates the fixture's input with the
// require-tags policy: the created resources without tags (the sensitive
// string, the one whose mask did not fit) are reported, the rest are not.
func TestBuildInputThroughPolicy(t *testing.T) {
	t.Parallel()
	doc, err := rego.BuildInput(context.Background(), bytes.NewReader(fixturePlan(t)), trackedMeta())
	if err != nil {
		t.Fatal(err)
	}
	input, err := engine.ParseInput(doc)
	if err != nil {
		t.Fatal(err)
	}
	d, err := loadPolicy(t, map[string]string{"p.rego": requireTags}).Evaluate(context.Background(), input, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range d.Findings {
		got = append(got, f.ID)
	}
	slices.Sort(got)
	wantEqual(t, "findings", []string{
		"missing-env-terraform_data.db_password", "missing-env-terraform_data.misaligned",
		"missing-owner-terraform_data.db_password", "missing-owner-terraform_data.misaligned",
	}, got)
}

// TestBuildInputLeakedSecret: terraform_data copies its input to output,
// and the provider does not mark the copy sensitive, so a plan can carry a
// secret unmasked. Masks cannot catch it; the canary does.
func TestBuildInputLeakedSecret(t *testing.T) {
	t.Parallel()
	plan := `{"format_version": "1.2", "resource_changes": [{
		"address": "terraform_data.leak", "type": "terraform_data", "provider_name": "terraform.io/builtin/terraform",
		"change": {"actions": ["no-op"],
			"before": {"input": "leaky-secret-value", "output": "leaky-secret-value"},
			"after": {"input": "leaky-secret-value", "output": "leaky-secret-value"},
			"before_sensitive": {"input": true}, "after_sensitive": {"input": true}}}]}`
	doc, err := rego.BuildInput(context.Background(), strings.NewReader(plan), trackedMeta())
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, rego.CheckSecrets(doc, [][]byte{[]byte("leaky-secret-value")}), rego.CodeInputSecretDetected)
}

func TestBuildInputRefusesBadPlans(t *testing.T) {
	t.Parallel()
	manual := trackedMeta()
	manual.Kind = rego.KindManual
	manual.RepositoryID = "cfg_1"
	change := func(address string) string {
		return `{"address": "` + address + `", "type": "t", "provider_name": "p", "change": {"actions": ["create"], "before": null, "after": {"a": 1}, "before_sensitive": false, "after_sensitive": {}}}`
	}
	many := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = change(fmt.Sprintf("t.r%d", i))
		}
		return `{"format_version": "1.2", "resource_changes": [` + strings.Join(parts, ",") + `]}`
	}
	big := `{"format_version": "1.2", "resource_changes": [`
	for i := range 40 {
		if i > 0 {
			big += ","
		}
		big += `{"address": "t.r` + fmt.Sprint(i) + `", "type": "t", "provider_name": "p", "change": {"actions": ["create"], "before": null, "after": {"a": "` + strings.Repeat("x", 60_000) + `"}, "before_sensitive": false, "after_sensitive": {}}}`
	}
	big += "]}"
	tests := []struct {
		name string
		plan string
		meta rego.InputMeta
		code string
	}{
		{"not json", "nope", trackedMeta(), rego.CodeInputInvalid},
		{"truncated", many(2)[:100], trackedMeta(), rego.CodeInputInvalid},
		{"not a plan", `{"resource_changes": []}`, trackedMeta(), rego.CodeInputInvalid},
		{"unsupported format", `{"format_version": "2.0", "resource_changes": []}`, trackedMeta(), rego.CodeInputInvalid},
		{"resource_changes twice", `{"format_version": "1.2", "resource_changes": [], "resource_changes": []}`, trackedMeta(), rego.CodeInputInvalid},
		{"trailing data", `{"format_version": "1.2"} {}`, trackedMeta(), rego.CodeInputInvalid},
		{"duplicate addresses", many(1)[:len(many(1))-2] + "," + change("t.r0") + "]}", trackedMeta(), rego.CodeInputInvalid},
		{"unknown action", strings.Replace(many(1), `"create"`, `"replace"`, 1), trackedMeta(), rego.CodeInputInvalid},
		{"manual run with a commit", many(1), manual, rego.CodeInputInvalid},
		{"too many resource changes", many(rego.MaxResourceChanges + 1), trackedMeta(), rego.CodeInputTooLarge},
		{"output too large", big, trackedMeta(), rego.CodeInputTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := rego.BuildInput(context.Background(), strings.NewReader(tt.plan), tt.meta)
			wantCode(t, err, tt.code)
		})
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestBuildInputReaderFailureIsNotAVerdict(t *testing.T) {
	t.Parallel()
	storage := errors.New("storage unavailable")
	r := io.MultiReader(strings.NewReader(`{"format_version": "1.2", "resource_changes": [`), failingReader{storage})
	_, err := rego.BuildInput(context.Background(), r, trackedMeta())
	if !errors.Is(err, storage) || rego.CodeOf(err) != "" {
		t.Fatalf("err %v, want the reader's error without a code", err)
	}
}
