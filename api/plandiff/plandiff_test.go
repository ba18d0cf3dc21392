package plandiff_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cairnhq/cairn/api/plandiff"
	"github.com/cairnhq/cairn/api/plandiff/plandifftest"
)

// canary is the fake secret in the hand-built fixtures and in the tofu
// fixture (testdata/tofu-1.10.6-config, applied at generation 1 and
// planned at generation 2 with -var secret=hunter2-canary).
const canary = "hunter2-canary"

var contract = sync.OnceValues(func() (*jsonschema.Schema, error) {
	return jsonschema.NewCompiler().Compile(filepath.Join("..", "..", "contracts", "plan-diff-v1.schema.json"))
})

// build runs Build and returns the artifact with its wire form, which
// must satisfy the published contract.
func build(t testing.TB, plan []byte) (plandiff.Artifact, []byte) {
	t.Helper()
	a, err := plandiff.Build(context.Background(), bytes.NewReader(plan))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	wire, err := json.Marshal(a)
	if err != nil {
		t.Fatalf("marshal artifact: %v", err)
	}
	schema, err := contract()
	if err != nil {
		t.Fatalf("compile contract: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(wire))
	if err != nil {
		t.Fatalf("read artifact back: %v", err)
	}
	if err := schema.Validate(inst); err != nil {
		t.Fatalf("artifact breaks contracts/plan-diff-v1.schema.json: %v", err)
	}
	return a, wire
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameJSON compares documents by value; numbers stay literal, so 1.50
// turning into 1.5 is a difference.
func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	decode := func(b []byte) any {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		return v
	}
	if !reflect.DeepEqual(decode(got), decode(want)) {
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, got, "", "  ")
		t.Errorf("artifact differs from the expected one; got:\n%s\nwant:\n%s", pretty.Bytes(), want)
	}
}

func TestBuildFixtures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		fixture string
	}{
		{"create with unknown attributes", "create"},
		{"update in a module", "update"},
		{"delete", "delete"},
		{"replace in both orders", "replace"},
		{"no-op and read omitted", "omitted"},
		{"sensitive values redacted, sensitive wins over unknown", "sensitive"},
		{"unknown values marked, including list elements", "unknown"},
		{"unresolvable masks withhold the detail", "unresolved"},
		{"tofu 1.10.6 plan", "tofu-1.10.6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, got := build(t, readFixture(t, tt.fixture+".plan.json"))
			sameJSON(t, got, readFixture(t, tt.fixture+".artifact.json"))
		})
	}
}

func TestBuildCountsAsTofu(t *testing.T) {
	t.Parallel()
	// tofu printed "Plan: 4 to add, 2 to change, 3 to destroy." for this plan.
	a, _ := build(t, readFixture(t, "tofu-1.10.6.plan.json"))
	if want := (plandiff.Counts{Add: 4, Change: 2, Destroy: 3}); a.Counts != want {
		t.Errorf("counts = %+v, want %+v", a.Counts, want)
	}
	if a.TotalResources != 7 || len(a.Resources) != 7 {
		t.Errorf("total_resources = %d, resources = %d, want 7 and 7", a.TotalResources, len(a.Resources))
	}
}

func TestBuildNeverShowsSecrets(t *testing.T) {
	t.Parallel()
	var synthetic bytes.Buffer
	if err := plandifftest.PlanJSON(&synthetic, 20); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		plan   []byte
		secret string
	}{
		// Besides masked attributes, these plans hold the secret in
		// variables, planned_values, prior_state and an unmasked no-op.
		{"hand-built sensitive values", readFixture(t, "sensitive.plan.json"), canary},
		{"values behind unresolvable masks", readFixture(t, "unresolved.plan.json"), canary},
		{"tofu 1.10.6 plan", readFixture(t, "tofu-1.10.6.plan.json"), canary},
		{"synthetic plan", synthetic.Bytes(), plandifftest.Secret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if !bytes.Contains(tt.plan, []byte(tt.secret)) {
				t.Fatalf("fixture does not hold %q, so the test proves nothing", tt.secret)
			}
			_, wire := build(t, tt.plan)
			if bytes.Contains(wire, []byte(tt.secret)) {
				t.Errorf("artifact shows the secret %q:\n%s", tt.secret, wire)
			}
		})
	}
}

func TestBuildEmptyPlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		plan string
	}{
		{"no resource_changes", `{"format_version":"1.2","terraform_version":"1.10.6","planned_values":{"root_module":{}}}`},
		{"empty resource_changes", `{"format_version":"1.2","resource_changes":[]}`},
		{"null resource_changes", `{"format_version":"1.2","resource_changes":null}`},
		{"only no-op", `{"format_version":"1.2","resource_changes":[{"address":"terraform_data.a","type":"terraform_data","name":"a","provider_name":"terraform.io/builtin/terraform","change":{"actions":["no-op"],"before":{"input":"x"},"after":{"input":"x"},"after_unknown":{},"before_sensitive":{},"after_sensitive":{}}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, wire := build(t, []byte(tt.plan))
			want := `{"schema":"cairn.plan-diff/v1","resources":[],"counts":{"add":0,"change":0,"destroy":0},"total_resources":0,"truncated":false}`
			if string(wire) != want {
				t.Errorf("got %s, want %s", wire, want)
			}
		})
	}
}

func TestBuildMaxResources(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		resources     int
		wantTruncated bool
	}{
		{"at the bound", plandiff.MaxResources, false},
		{"one over", plandiff.MaxResources + 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var plan bytes.Buffer
			if err := plandifftest.PlanJSON(&plan, tt.resources); err != nil {
				t.Fatal(err)
			}
			a, _ := build(t, plan.Bytes())
			if len(a.Resources) != plandiff.MaxResources || a.Truncated != tt.wantTruncated {
				t.Fatalf("resources = %d, truncated = %v; want %d, %v", len(a.Resources), a.Truncated, plandiff.MaxResources, tt.wantTruncated)
			}
			// The first ones in plan order are kept.
			if got, want := a.Resources[plandiff.MaxResources-1].Address, fmt.Sprintf("terraform_data.item[%d]", plandiff.MaxResources-1); got != want {
				t.Errorf("last kept = %s, want %s", got, want)
			}
			if a.TotalResources != tt.resources || a.Counts != (plandiff.Counts{Add: tt.resources}) {
				t.Errorf("total_resources = %d, counts = %+v; want both over all %d", a.TotalResources, a.Counts, tt.resources)
			}
		})
	}
}

// change is one hand-made terraform_data resource change for the size
// tests, whose plans are too large to keep in testdata.
type change struct {
	name  string
	input string
}

func planWith(changes ...change) []byte {
	type rc struct {
		Address      string `json:"address"`
		Mode         string `json:"mode"`
		Type         string `json:"type"`
		Name         string `json:"name"`
		ProviderName string `json:"provider_name"`
		Change       struct {
			Actions         []string       `json:"actions"`
			Before          any            `json:"before"`
			After           map[string]any `json:"after"`
			AfterUnknown    map[string]any `json:"after_unknown"`
			BeforeSensitive bool           `json:"before_sensitive"`
			AfterSensitive  map[string]any `json:"after_sensitive"`
		} `json:"change"`
	}
	plan := struct {
		FormatVersion   string `json:"format_version"`
		ResourceChanges []rc   `json:"resource_changes"`
	}{FormatVersion: "1.2"}
	for _, c := range changes {
		r := rc{Address: "terraform_data." + c.name, Mode: "managed", Type: "terraform_data", Name: c.name, ProviderName: "terraform.io/builtin/terraform"}
		r.Change.Actions = []string{"create"}
		r.Change.After = map[string]any{"input": c.input, "triggers_replace": nil}
		r.Change.AfterUnknown = map[string]any{"id": true, "output": true}
		r.Change.AfterSensitive = map[string]any{}
		plan.ResourceChanges = append(plan.ResourceChanges, r)
	}
	b, err := json.Marshal(plan)
	if err != nil {
		panic(err)
	}
	return b
}

func TestBuildMaxBytes(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	sized := func(sizes ...int) []change {
		var cs []change
		for i, n := range sizes {
			cs = append(cs, change{name: fmt.Sprintf("r%d", i), input: strings.Repeat("x", n)})
		}
		return cs
	}
	tests := []struct {
		name         string
		changes      []change
		wantWithheld []bool // per resource, in plan order
	}{
		{
			name:         "fits",
			changes:      sized(mib, mib, mib),
			wantWithheld: []bool{false, false, false},
		},
		{
			name:         "largest withheld first",
			changes:      sized(2*mib, 3*mib/2, 3*mib, mib/2),
			wantWithheld: []bool{true, false, true, false},
		},
		{
			name:         "equal sizes withheld in plan order",
			changes:      sized(mib, mib, mib, mib, mib, mib),
			wantWithheld: []bool{true, true, true, false, false, false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, wire := build(t, planWith(tt.changes...))
			if len(wire) > plandiff.MaxBytes {
				t.Fatalf("artifact is %d bytes, over %d", len(wire), plandiff.MaxBytes)
			}
			if len(a.Resources) != len(tt.changes) {
				t.Fatalf("resources = %d, want %d (none dropped)", len(a.Resources), len(tt.changes))
			}
			anyWithheld := false
			for i, res := range a.Resources {
				withheld := res.Detail == plandiff.DetailWithheld
				anyWithheld = anyWithheld || withheld
				if withheld != tt.wantWithheld[i] {
					t.Errorf("%s withheld = %v, want %v", res.Address, withheld, tt.wantWithheld[i])
				}
				if withheld && (res.WithheldReason != plandiff.WithheldSize || string(res.After) != "null") {
					t.Errorf("%s: reason %q, after %.20s; want size and null", res.Address, res.WithheldReason, res.After)
				}
			}
			if a.Truncated != anyWithheld {
				t.Errorf("truncated = %v, want %v", a.Truncated, anyWithheld)
			}
			if a.Counts.Add != len(tt.changes) {
				t.Errorf("counts.add = %d, want %d", a.Counts.Add, len(tt.changes))
			}
		})
	}
}

func TestBuildDropsTrailingWhenWithholdingIsNotEnough(t *testing.T) {
	t.Parallel()
	// 5,000 resources with equally long 1,000-byte names exceed 4 MiB even
	// without values.
	var changes []change
	for i := range plandiff.MaxResources {
		changes = append(changes, change{name: fmt.Sprintf("r%04d_%s", i, strings.Repeat("n", 994)), input: "v"})
	}
	a, wire := build(t, planWith(changes...))
	if !a.Truncated || len(a.Resources) == 0 || len(a.Resources) >= plandiff.MaxResources {
		t.Fatalf("truncated = %v, resources = %d; want true and some dropped", a.Truncated, len(a.Resources))
	}
	if len(wire) > plandiff.MaxBytes {
		t.Fatalf("artifact is %d bytes, over %d", len(wire), plandiff.MaxBytes)
	}
	entry, err := json.Marshal(a.Resources[0])
	if err != nil {
		t.Fatal(err)
	}
	if room := plandiff.MaxBytes - len(wire); room >= len(entry)+1 {
		t.Errorf("%d bytes left, enough for one more resource of %d", room, len(entry)+1)
	}
	for i, res := range a.Resources {
		if res.Address != "terraform_data."+changes[i].name || res.WithheldReason != plandiff.WithheldSize {
			t.Fatalf("resource %d = %s (%s), want %s withheld for size", i, res.Address, res.WithheldReason, changes[i].name)
		}
	}
	if a.TotalResources != plandiff.MaxResources || a.Counts.Add != plandiff.MaxResources {
		t.Errorf("total_resources = %d, counts = %+v; want all %d", a.TotalResources, a.Counts, plandiff.MaxResources)
	}
}

func TestBuildRejects(t *testing.T) {
	t.Parallel()
	const changeJSON = `{"address":"terraform_data.a","type":"terraform_data","name":"a","provider_name":"terraform.io/builtin/terraform","change":{"actions":%s,"before":null,"after":{"input":"x"},"after_unknown":{},"before_sensitive":false,"after_sensitive":{}}}`
	withActions := func(actions string) string {
		return `{"format_version":"1.2","resource_changes":[` + fmt.Sprintf(changeJSON, actions) + `]}`
	}
	tests := []struct {
		name string
		plan string
		want error
	}{
		{"empty input", ``, plandiff.ErrMalformedPlan},
		{"not json", `hunter2`, plandiff.ErrMalformedPlan},
		{"top level array", `[]`, plandiff.ErrMalformedPlan},
		{"cut short", `{"format_version":"1.2","resource_changes":[{"address":"a"`, plandiff.ErrMalformedPlan},
		{"cut inside a skipped block", `{"format_version":"1.2","variables":{"a":{"value":"x"}`, plandiff.ErrMalformedPlan},
		{"trailing data", `{"format_version":"1.2"} {}`, plandiff.ErrMalformedPlan},
		{"no format_version", `{"resource_changes":[]}`, plandiff.ErrMalformedPlan},
		{"resource_changes not an array", `{"format_version":"1.2","resource_changes":{}}`, plandiff.ErrMalformedPlan},
		{"resource_changes twice", `{"format_version":"1.2","resource_changes":[],"resource_changes":[]}`, plandiff.ErrMalformedPlan},
		{"change not an object", `{"format_version":"1.2","resource_changes":["x"]}`, plandiff.ErrMalformedPlan},
		{"change without address", `{"format_version":"1.2","resource_changes":[{"change":{"actions":["create"]}}]}`, plandiff.ErrMalformedPlan},
		{"change without actions", withActions(`[]`), plandiff.ErrMalformedPlan},
		{"actions not strings", withActions(`[1]`), plandiff.ErrMalformedPlan},
		{"format 2", `{"format_version":"2.0","resource_changes":[]}`, plandiff.ErrUnsupportedFormat},
		{"forget", withActions(`["forget"]`), plandiff.ErrUnsupportedAction},
		{"create twice", withActions(`["create","create"]`), plandiff.ErrUnsupportedAction},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, err := plandiff.Build(context.Background(), strings.NewReader(tt.plan))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if a.Schema != "" || a.Resources != nil {
				t.Errorf("got a partial artifact %+v with the error", a)
			}
		})
	}
}

func TestBuildReaderFailureIsNotMalformed(t *testing.T) {
	t.Parallel()
	broken := errors.New("connection reset")
	_, err := plandiff.Build(context.Background(), iotest.ErrReader(broken))
	if !errors.Is(err, broken) || errors.Is(err, plandiff.ErrMalformedPlan) {
		t.Errorf("err = %v, want %v and not ErrMalformedPlan", err, broken)
	}
}

func TestBuildCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := plandiff.Build(ctx, bytes.NewReader(readFixture(t, "create.plan.json")))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func BenchmarkBuild5000(b *testing.B) {
	var plan bytes.Buffer
	if err := plandifftest.PlanJSON(&plan, plandiff.MaxResources); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(plan.Len()))
	b.ReportAllocs()
	for b.Loop() {
		a, err := plandiff.Build(context.Background(), bytes.NewReader(plan.Bytes()))
		if err != nil {
			b.Fatal(err)
		}
		if len(a.Resources) != plandiff.MaxResources {
			b.Fatalf("resources = %d", len(a.Resources))
		}
	}
}
