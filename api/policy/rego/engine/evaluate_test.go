package engine_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

func parsedInput(t testing.TB, doc map[string]any) ast.Value {
	t.Helper()
	v, err := engine.ParseInput(mustJSON(t, doc))
	if err != nil {
		t.Fatalf("parse input: %v", err)
	}
	return v
}

// TestBundleRoundTrip builds a policy with its tests, loads the bundle the
// way a worker does and evaluates real inputs.
func TestBundleRoundTrip(t *testing.T) {
	t.Parallel()
	bundleBytes := mustBuild(t, map[string]string{"p.rego": requireTags, "p_test.rego": requireTagsTest})
	policy, err := engine.Load(context.Background(), bytes.NewReader(bundleBytes))
	if err != nil {
		t.Fatalf("load: %v", err)
	}

	tagged := validInput()
	d, err := policy.Evaluate(context.Background(), parsedInput(t, tagged), time.Second)
	if err != nil {
		t.Fatalf("evaluate: %v", err)
	}
	if len(d.Findings) != 0 {
		t.Fatalf("findings for a tagged resource: %+v", d.Findings)
	}

	untagged := validInput()
	untagged["resource_changes"] = []any{resourceChange("terraform_data.b", map[string]any{"input": map[string]any{"tags": map[string]any{"owner": "x"}}})}
	d, err = policy.Evaluate(context.Background(), parsedInput(t, untagged), time.Second)
	if err != nil {
		t.Fatalf("evaluate: %v", err)
	}
	want := rego.Decision{Findings: []rego.Finding{{
		ID:              "missing-env-terraform_data.b",
		Title:           "Missing required tag",
		Message:         "terraform_data.b has no env tag",
		ResourceAddress: "terraform_data.b",
		Details:         map[string]any{"tag": "env"},
	}}}
	wantEqual(t, "decision", want, d)
}

func TestEvaluateDecisionValidation(t *testing.T) {
	t.Parallel()
	finding := func(extra string) string {
		return `{"id": "f1", "title": "T", "message": "M"` + extra + `}`
	}
	tests := []struct {
		name     string
		decision string
		code     string
		findings int
	}{
		{"empty findings pass", `{"findings": []}`, "", 0},
		{"findings as a set", `{"findings": {` + finding("") + `}}`, "", 1},
		{"all fields", `{"findings": [` + finding(`, "resource_address": "a.b", "details": {"n": 1, "l": [1, {"x": null}]}`) + `]}`, "", 1},
		{"undefined", `{"findings": []} if { input.nothing }`, rego.CodeDecisionUndefined, 0},
		{"not an object", `[]`, rego.CodeDecisionInvalid, 0},
		{"no findings key", `{"result": []}`, rego.CodeDecisionInvalid, 0},
		{"unknown top-level key", `{"findings": [], "allow": true}`, rego.CodeDecisionInvalid, 0},
		{"findings not an array", `{"findings": "none"}`, rego.CodeDecisionInvalid, 0},
		{"unknown finding key", `{"findings": [` + finding(`, "severity": "high"`) + `]}`, rego.CodeDecisionInvalid, 0},
		{"finding not an object", `{"findings": ["f1"]}`, rego.CodeDecisionInvalid, 0},
		{"missing id", `{"findings": [{"title": "T", "message": "M"}]}`, rego.CodeDecisionInvalid, 0},
		{"empty message", `{"findings": [{"id": "f1", "title": "T", "message": ""}]}`, rego.CodeDecisionInvalid, 0},
		{"id not a string", `{"findings": [{"id": 1, "title": "T", "message": "M"}]}`, rego.CodeDecisionInvalid, 0},
		{"duplicate id", `{"findings": [` + finding("") + `, ` + finding(`, "resource_address": "other"`) + `]}`, rego.CodeDecisionInvalid, 0},
		{"500 findings", `{"findings": [f | some i in numbers.range(1, 500); f := {"id": sprintf("f%d", [i]), "title": "T", "message": "M"}]}`, "", 500},
		{"501 findings", `{"findings": [f | some i in numbers.range(1, 501); f := {"id": sprintf("f%d", [i]), "title": "T", "message": "M"}]}`, rego.CodeDecisionInvalid, 0},
		{"id of 128 characters", `{"findings": [{"id": "` + strings.Repeat("é", 128) + `", "title": "T", "message": "M"}]}`, "", 1},
		{"id of 129 characters", `{"findings": [{"id": "` + strings.Repeat("i", 129) + `", "title": "T", "message": "M"}]}`, rego.CodeDecisionInvalid, 0},
		{"title of 161 characters", `{"findings": [{"id": "f", "title": "` + strings.Repeat("t", 161) + `", "message": "M"}]}`, rego.CodeDecisionInvalid, 0},
		{"message of 4001 characters", `{"findings": [{"id": "f", "title": "T", "message": "` + strings.Repeat("m", 4001) + `"}]}`, rego.CodeDecisionInvalid, 0},
		{"address of 513 characters", `{"findings": [` + finding(`, "resource_address": "`+strings.Repeat("a", 513)+`"`) + `]}`, rego.CodeDecisionInvalid, 0},
		{"address not a string", `{"findings": [` + finding(`, "resource_address": null`) + `]}`, rego.CodeDecisionInvalid, 0},
		{"details not an object", `{"findings": [` + finding(`, "details": [1]`) + `]}`, rego.CodeDecisionInvalid, 0},
		{"details 8 deep", `{"findings": [` + finding(`, "details": `+nested(8)) + `]}`, "", 1},
		{"details 9 deep", `{"findings": [` + finding(`, "details": `+nested(9)) + `]}`, rego.CodeDecisionInvalid, 0},
		{"details with 257 keys", `{"findings": [` + finding(`, "details": {sprintf("k%d", [i]): i | some i in numbers.range(1, 257)}`) + `]}`, rego.CodeDecisionInvalid, 0},
		{"details over 16 KiB", `{"findings": [` + finding(`, "details": {"s": sprintf("%017000d", [0])}`) + `]}`, rego.CodeDecisionInvalid, 0},
		{"huge details array", `{"findings": [` + finding(`, "details": {"a": numbers.range(1, 10000)}`) + `]}`, rego.CodeDecisionInvalid, 0},
		{"decision over 512 KiB", `{"findings": [f | some i in numbers.range(1, 200); f := {"id": sprintf("f%d", [i]), "title": "T", "message": sprintf("%03000d", [0])}]}`, rego.CodeDecisionInvalid, 0},
	}
	input := parsedInput(t, validInput())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := decisionPolicy(t, tt.decision).Evaluate(context.Background(), input, 5*time.Second)
			if tt.code != "" {
				wantCode(t, err, tt.code)
				return
			}
			if err != nil {
				t.Fatalf("evaluate: %v", err)
			}
			if len(d.Findings) != tt.findings {
				t.Fatalf("%d findings, want %d", len(d.Findings), tt.findings)
			}
		})
	}
}

// nested is a details object n objects deep.
func nested(n int) string {
	return strings.Repeat(`{"a": `, n-1) + `{"a": 1}` + strings.Repeat("}", n-1)
}

func TestEvaluateFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		policy  string
		timeout time.Duration
		code    string
	}{
		{"built-in error is fatal", "package cairn.v1\n\ndecision := {\"findings\": []} if to_number(\"abc\") > 0\n", time.Second, rego.CodeEvaluatorFailed},
		{"conflicting outputs", "package cairn.v1\n\ndecision := {\"findings\": []} if input.version\n\ndecision := {\"findings\": [1]} if input.run\n", time.Second, rego.CodeEvaluatorFailed},
		{"timeout", "package cairn.v1\n\ndecision := {\"findings\": []} if {\n\tcount([1 | some i in numbers.range(1, 20000); some j in numbers.range(1, 20000); i < j]) > 0\n}\n", 50 * time.Millisecond, rego.CodeEvaluationTimeout},
	}
	input := parsedInput(t, validInput())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := loadPolicy(t, map[string]string{"p.rego": tt.policy})
			start := time.Now()
			_, err := p.Evaluate(context.Background(), input, tt.timeout)
			wantCode(t, err, tt.code)
			if elapsed := time.Since(start); elapsed > tt.timeout+2*time.Second {
				t.Errorf("took %v with a timeout of %v", elapsed, tt.timeout)
			}
		})
	}
}

func TestEvaluateCancelledIsNotAVerdict(t *testing.T) {
	t.Parallel()
	p := loadPolicy(t, map[string]string{"p.rego": requireTags})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Evaluate(ctx, parsedInput(t, validInput()), time.Second)
	if err == nil || rego.CodeOf(err) != "" {
		t.Fatalf("err %v, want a plain context error", err)
	}
}

// handmadeBundle writes a bundle the way an attacker or a bug might, not
// through Build.
func handmadeBundle(t *testing.T, modules map[string]string, data map[string]any, regoVersion int) []byte {
	t.Helper()
	roots := []string{""}
	b := bundle.Bundle{Manifest: bundle.Manifest{Roots: &roots, RegoVersion: &regoVersion}, Data: data}
	for name, src := range modules {
		b.Modules = append(b.Modules, bundle.ModuleFile{URL: "/" + name, Path: "/" + name, Raw: []byte(src)})
	}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).UseModulePath(true).DisableFormat(true).Write(b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestLoadDoesNotTrustTheBundle: Load recompiles under the manifest, so a
// bundle that was not built by Build cannot smuggle in what Build refuses.
func TestLoadDoesNotTrustTheBundle(t *testing.T) {
	t.Parallel()
	ok := "package cairn.v1\n\ndecision := {\"findings\": []}\n"
	tests := []struct {
		name   string
		bundle func(t *testing.T) []byte
		detail string
	}{
		{"forbidden built-in", func(t *testing.T) []byte {
			return handmadeBundle(t, map[string]string{"p.rego": "package cairn.v1\n\ndecision := {\"findings\": []} if http.send({\"method\": \"get\", \"url\": \"http://127.0.0.1:1\"})\n"}, map[string]any{}, 1)
		}, "http.send"},
		{"no entrypoint", func(t *testing.T) []byte {
			return handmadeBundle(t, map[string]string{"p.rego": "package cairn.v1\n\nverdict := 1\n"}, map[string]any{}, 1)
		}, rego.Entrypoint},
		{"rego v0", func(t *testing.T) []byte {
			return handmadeBundle(t, map[string]string{"p.rego": ok}, map[string]any{}, 0)
		}, "rego_version"},
		{"data", func(t *testing.T) []byte {
			return handmadeBundle(t, map[string]string{"p.rego": ok}, map[string]any{"cairn": map[string]any{"allow": true}}, 1)
		}, "data"},
		{"not gzip", func(t *testing.T) []byte { return []byte("not a bundle") }, "reading bundle"},
		{"decompression bomb", func(t *testing.T) []byte {
			var buf bytes.Buffer
			zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
			if err != nil {
				t.Fatal(err)
			}
			tw := tar.NewWriter(zw)
			big := int64(24 << 20) // a few KiB compressed, past the expanded bound
			if err := tw.WriteHeader(&tar.Header{Name: "/big.rego", Mode: 0o600, Size: big, Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			if _, err := io.CopyN(tw, zeros{}, big); err != nil {
				t.Fatal(err)
			}
			_ = tw.Close()
			_ = zw.Close()
			return buf.Bytes()
		}, "byte bound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := engine.Load(context.Background(), bytes.NewReader(tt.bundle(t)))
			wantCode(t, err, rego.CodeEvaluatorFailed)
			wantDetail(t, err, tt.detail)
		})
	}
	// The control: the same writer with a good module loads.
	if _, err := engine.Load(context.Background(), bytes.NewReader(handmadeBundle(t, map[string]string{"p.rego": ok}, map[string]any{}, 1))); err != nil {
		t.Fatalf("good handmade bundle: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestEvaluateConcurrently shares one policy and one input across
// goroutines, as a worker does; run with -race.
func TestEvaluateConcurrently(t *testing.T) {
	t.Parallel()
	p := loadPolicy(t, map[string]string{"p.rego": requireTags})
	doc := validInput()
	var changes []any
	for i := range 50 {
		changes = append(changes, resourceChange(fmt.Sprintf("terraform_data.r%d", i), map[string]any{"input": map[string]any{"tags": map[string]any{}}}))
	}
	doc["resource_changes"] = changes
	input := parsedInput(t, doc)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			d, err := p.Evaluate(context.Background(), input, 5*time.Second)
			if err == nil && len(d.Findings) != 100 {
				err = fmt.Errorf("%d findings, want 100", len(d.Findings))
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestDecisionJSON(t *testing.T) {
	t.Parallel()
	got := string(mustJSON(t, rego.Decision{Findings: []rego.Finding{{ID: "a", Title: "b", Message: "c"}}}))
	if want := `{"findings":[{"id":"a","title":"b","message":"c"}]}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	var d rego.Decision
	if err := json.Unmarshal([]byte(`{"findings":[{"id":"a","title":"b","message":"c","resource_address":"x","details":{"k":1}}]}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Findings[0].ResourceAddress != "x" || d.Findings[0].Details["k"] == nil {
		t.Fatalf("decoded %+v", d)
	}
}
