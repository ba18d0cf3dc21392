package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

func TestBuildPassingPolicy(t *testing.T) {
	t.Parallel()
	b := build(t, map[string]string{
		"policies/tags.rego":      requireTags,
		"policies/tags_test.rego": requireTagsTest,
		"README.md":               "ignored",
		"data.json":               `{"cairn": {"v1": {"required": ["ignored"]}}}`,
	})
	if b.err != nil {
		t.Fatalf("build: %v", b.err)
	}
	wantEqual(t, "report", engine.BuildReport{Modules: 1, Tests: 2, Passed: 2}, b.report)
	var results engine.TestResults
	if err := json.Unmarshal(b.results, &results); err != nil {
		t.Fatalf("test results: %v", err)
	}
	for i := range results.Tests {
		results.Tests[i].DurationMS = 0
	}
	want := engine.TestResults{Schema: "cairn.policy.test-results/v1", Passed: 2, Tests: []engine.TestResult{
		{Package: "cairn.v1_test", Name: "test_tagged_passes", Result: "pass"},
		{Package: "cairn.v1_test", Name: "test_untagged_fails_twice", Result: "pass"},
	}}
	wantEqual(t, "test results", want, results)
	if len(b.bundle) == 0 {
		t.Fatal("no bundle written")
	}
}

func TestBuildWithoutTests(t *testing.T) {
	t.Parallel()
	b := build(t, map[string]string{"p.rego": requireTags})
	if b.err != nil {
		t.Fatalf("build: %v", b.err)
	}
	if b.report.Tests != 0 {
		t.Errorf("%d tests", b.report.Tests)
	}
	if want := `{"errored":0,"failed":0,"passed":0,"schema":"cairn.policy.test-results/v1","tests":[]}`; string(b.results) != want {
		t.Errorf("results %s, want %s", b.results, want)
	}
}

// TestBuildIsReproducible: the bundle digest identifies the code, so the
// same sources must give the same bytes.
func TestBuildIsReproducible(t *testing.T) {
	t.Parallel()
	fs := map[string]string{"a/p.rego": requireTags, "b/lib.rego": "package lib\n\nx := 1\n"}
	if a, b := mustBuild(t, fs), mustBuild(t, fs); !bytes.Equal(a, b) {
		t.Fatal("two builds of the same sources differ")
	}
}

func TestBuildRefusesBadPolicies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		files  map[string]string
		code   string
		detail string
	}{
		{"syntax error", map[string]string{"p.rego": "package cairn.v1\n\ndecision := {\n"}, rego.CodeCompileFailed, "p.rego"},
		{"rego v0 syntax", map[string]string{"p.rego": "package cairn.v1\n\ndecision = {\"findings\": []} { true }\n"}, rego.CodeCompileFailed, "rego_parse_error"},
		{"no entrypoint", map[string]string{"p.rego": "package cairn.v1\n\nverdict := {\"findings\": []}\n"}, rego.CodeCompileFailed, rego.Entrypoint},
		{"entrypoint in another package", map[string]string{"p.rego": "package cairn.v2\n\ndecision := {\"findings\": []}\n"}, rego.CodeCompileFailed, rego.Entrypoint},
		{"entrypoint only in a test file", map[string]string{"p_test.rego": "package cairn.v1\n\ndecision := {\"findings\": []}\n"}, rego.CodeCompileFailed, rego.Entrypoint},
		{"entrypoint is a function", map[string]string{"p.rego": "package cairn.v1\n\ndecision(x) := {\"findings\": [x]}\n"}, rego.CodeCompileFailed, "function"},
		{"entrypoint is a partial set", map[string]string{"p.rego": "package cairn.v1\n\ndecision contains 1\n"}, rego.CodeCompileFailed, "complete rule"},
		{"strict mode: unused variable", map[string]string{"p.rego": "package cairn.v1\n\ndecision := {\"findings\": []} if {\n\tx := 1\n}\n"}, rego.CodeCompileFailed, "unused"},
		{"deprecated built-in", map[string]string{"p.rego": "package cairn.v1\n\ndecision := {\"findings\": []} if re_match(\"a\", \"a\")\n"}, rego.CodeCompileFailed, "re_match"},
		{"test does not compile", map[string]string{
			"p.rego":      requireTags,
			"p_test.rego": "package cairn.v1_test\n\ntest_x if {\n\tundefined_function(1)\n}\n",
		}, rego.CodeCompileFailed, "undefined_function"},
		{"failing test", map[string]string{
			"p.rego":      requireTags,
			"p_test.rego": "package cairn.v1_test\n\nimport data.cairn.v1\n\ntest_finds_nothing if {\n\tcount(v1.decision.findings) == 1 with input as {\"resource_changes\": []}\n}\n",
		}, rego.CodeTestsFailed, "cairn.v1_test.test_finds_nothing: fail"},
		{"erroring test", map[string]string{
			"p.rego":      requireTags,
			"p_test.rego": "package cairn.v1_test\n\ntest_number if {\n\tto_number(\"not a number\") == 1\n}\n",
		}, rego.CodeTestsFailed, "cairn.v1_test.test_number: error"},
		{"test hits a rule conflict", map[string]string{
			"p.rego":      "package cairn.v1\n\ndecision := {\"findings\": []}\n\nx := 1 if input.a\n\nx := 2 if input.b\n",
			"p_test.rego": "package cairn.v1_test\n\nimport data.cairn.v1\n\ntest_conflict if {\n\tv1.x with input as {\"a\": true, \"b\": true}\n}\n",
		}, rego.CodeTestsFailed, "test_conflict: error"},
		{"too many modules", manyModules(rego.MaxModules + 1), rego.CodeCompileFailed, "more than"},
		{"too much source", map[string]string{
			"p.rego":   requireTags,
			"big.rego": "package big\n\n# " + strings.Repeat("x", rego.MaxSourceBytes) + "\n",
		}, rego.CodeCompileFailed, "bytes in total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := build(t, tt.files)
			wantCode(t, b.err, tt.code)
			wantDetail(t, b.err, tt.detail)
			if len(b.bundle) != 0 {
				t.Error("a bundle was written for a failed build")
			}
		})
	}
}

func manyModules(n int) map[string]string {
	fs := map[string]string{"p.rego": requireTags}
	for i := range n - 1 {
		fs[fmt.Sprintf("lib/m%04d.rego", i)] = fmt.Sprintf("package lib.m%d\n\nx := %d\n", i, i)
	}
	return fs
}

// TestBuildFailedTestsStillReportResults: authors need to see which test
// failed, so the results document is written even though no bundle is.
func TestBuildFailedTestsStillReportResults(t *testing.T) {
	t.Parallel()
	b := build(t, map[string]string{
		"p.rego": requireTags,
		"p_test.rego": `package cairn.v1_test

test_b_passes if { 1 == 1 }

test_a_fails if { 1 == 2 }

test_c_errors if { to_number("x") == 1 }
`,
	})
	wantCode(t, b.err, rego.CodeTestsFailed)
	wantEqual(t, "report", engine.BuildReport{Modules: 1, Tests: 3, Passed: 1, Failed: 1, Errored: 1}, b.report)
	var results engine.TestResults
	if err := json.Unmarshal(b.results, &results); err != nil {
		t.Fatalf("test results: %v", err)
	}
	var got []string
	for _, r := range results.Tests {
		got = append(got, r.Name+"="+r.Result)
	}
	wantEqual(t, "tests", []string{"test_a_fails=fail", "test_b_passes=pass", "test_c_errors=error"}, got)
	if results.Passed != 1 || results.Failed != 1 || results.Errored != 1 {
		t.Errorf("counts %d/%d/%d", results.Passed, results.Failed, results.Errored)
	}
}

// TestBuildForbiddenBuiltins: each forbidden built-in fails compilation
// because the manifest lacks it; the detail names it so the failure is not
// some other compile error.
func TestBuildForbiddenBuiltins(t *testing.T) {
	t.Parallel()
	tests := []struct {
		builtin string
		body    string
	}{
		{"http.send", `http.send({"method": "get", "url": "http://127.0.0.1:1"}).status_code == 200`},
		{"time.now_ns", `time.now_ns() > 0`},
		{"rand.intn", `rand.intn("seed", 10) > 0`},
		{"uuid.rfc4122", `uuid.rfc4122("seed") != ""`},
		{"crypto.sha256", `crypto.sha256("x") != ""`},
		{"io.jwt.decode", `io.jwt.decode("a.b.c")[0] != {}`},
		{"net.lookup_ip_addr", `count(net.lookup_ip_addr("localhost")) > 0`},
		{"net.cidr_contains", `net.cidr_contains("10.0.0.0/8", "10.0.0.1")`},
		{"opa.runtime", `opa.runtime().env != {}`},
		{"internal.print", `print("hello")`}, // what print compiles to
		{"trace", `trace("hello")`},
		{"rego.parse_module", `rego.parse_module("x.rego", "package x") != {}`},
		{"json.match_schema", `json.match_schema({}, {"$ref": "file:///etc/hostname"})[0]`},
		{"graphql.is_valid", `graphql.is_valid("{ a }", "type Query { a: Int }")`},
	}
	for _, tt := range tests {
		t.Run(tt.builtin, func(t *testing.T) {
			t.Parallel()
			src := "package cairn.v1\n\ndecision := {\"findings\": []} if {\n\t" + tt.body + "\n}\n"
			b := build(t, map[string]string{"p.rego": src})
			wantCode(t, b.err, rego.CodeCompileFailed)
			wantDetail(t, b.err, "undefined function "+tt.builtin)
		})
	}
	// The same shape with a permitted built-in compiles, so the failures
	// above are the built-ins' doing.
	b := build(t, map[string]string{"p.rego": "package cairn.v1\n\ndecision := {\"findings\": []} if {\n\ttime.parse_rfc3339_ns(\"2024-01-01T00:00:00Z\") > 0\n}\n"})
	if b.err != nil {
		t.Fatalf("permitted built-in: %v", b.err)
	}
}

func TestBuildRefusesLinks(t *testing.T) {
	t.Parallel()
	dir := files(t, map[string]string{"p.rego": requireTags})
	outside := filepath.Join(t.TempDir(), "secret.rego")
	if err := os.WriteFile(outside, []byte("package secret\n\nx := 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link.rego")); err != nil {
		t.Fatal(err)
	}
	var bundle, results bytes.Buffer
	_, err := engine.Build(context.Background(), dir, &bundle, &results)
	wantCode(t, err, rego.CodeCompileFailed)
	wantDetail(t, err, "link.rego: not a regular file")
}

func TestBuildTestResultsBound(t *testing.T) {
	t.Parallel()
	// Long test names make a results document over 2 MiB from a modest
	// number of tests.
	var src strings.Builder
	src.WriteString("package cairn.v1_test\n\n")
	long := strings.Repeat("x", 2000)
	for i := range 1100 {
		fmt.Fprintf(&src, "test_%s_%d if { true }\n\n", long, i)
	}
	b := build(t, map[string]string{"p.rego": requireTags, "p_test.rego": src.String()})
	wantCode(t, b.err, rego.CodeOutputBoundExceeded)
	if len(b.results) != 0 || len(b.bundle) != 0 {
		t.Error("output written past the bound")
	}
}

func TestBuildCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var bundle, results bytes.Buffer
	_, err := engine.Build(ctx, files(t, map[string]string{"p.rego": requireTags}), &bundle, &results)
	if err == nil || rego.CodeOf(err) != "" {
		t.Fatalf("err %v: a cancelled build is not a verdict", err)
	}
}
