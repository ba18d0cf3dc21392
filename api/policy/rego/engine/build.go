package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/cairnhq/cairn/api/policy/rego"
)

// TestResultsSchema is the schema field of the test results document.
const TestResultsSchema = "cairn.policy.test-results/v1"

// Test outcomes in the test results document.
const (
	TestPass  = "pass"
	TestFail  = "fail"
	TestError = "error"
)

// BuildReport counts what a build compiled and ran.
type BuildReport struct {
	// Modules counts the policy modules written to the bundle; test files
	// are not counted.
	Modules int
	// Tests counts the test rules run. Passed, Failed and Errored split
	// them: Failed are tests that ran and did not hold, Errored those that
	// could not finish (a built-in error, a conflict, the per-test timeout).
	Tests   int
	Passed  int
	Failed  int
	Errored int
}

// TestResults is the test results document Build writes. Its fields are
// declared in sorted order so its encoding is canonical.
type TestResults struct {
	Errored int          `json:"errored"`
	Failed  int          `json:"failed"`
	Passed  int          `json:"passed"`
	Schema  string       `json:"schema"`
	Tests   []TestResult `json:"tests"`
}

// TestResult is one test rule's outcome.
type TestResult struct {
	DurationMS int64  `json:"duration_ms"`
	Name       string `json:"name"`
	// Package is the test's package as written in its source, without
	// the "data." prefix.
	Package string `json:"package"`
	// Result is TestPass, TestFail or TestError.
	Result string `json:"result"`
}

type source struct {
	path string // slash-separated, relative to the source directory
	raw  []byte
}

// Build compiles the Rego source under sourceDir, runs its tests, and on
// success writes an OPA bundle of the policy modules to bundleOut and the
// test results document to testResultsOut.
//
// Every .rego file is a module and every *_test.rego file a test module;
// other files, data.json and data.yaml included, are ignored, so a bundle
// never carries data and a policy's verdict depends on its input alone.
// Modules are parsed as Rego v1 and compiled in strict mode against the
// capabilities manifest, so a call to a forbidden built-in fails the
// build. The policy modules must compile on their own (the bundle holds no
// tests) and define Entrypoint.
//
// A verdict on the policy is a *BuildError; its report is filled as far as
// the build got. When tests fail the results document is still written,
// and no bundle is; on any other error the writers' content must be
// discarded. Errors that are not a *BuildError (a cancelled ctx, a failing
// writer, an unreadable directory) say nothing about the policy.
func Build(ctx context.Context, sourceDir string, bundleOut, testResultsOut io.Writer) (BuildReport, error) {
	var report BuildReport
	caps, digest, err := Capabilities()
	if err != nil {
		return report, buildErr(rego.CodeToolchainUnavailable, err.Error())
	}
	sources, err := readSources(ctx, sourceDir)
	if err != nil {
		return report, err
	}
	policies, tests, err := parseSources(sources, caps)
	if err != nil {
		return report, err
	}
	report.Modules = len(policies)

	// The policy modules alone are what the bundle carries, so they must
	// compile without the tests' help.
	compiler := newCompiler(caps)
	if compiler.Compile(modulesByPath(policies)); compiler.Failed() {
		return report, buildErr(rego.CodeCompileFailed, compiler.Errors.Error())
	}
	if err := checkEntrypoint(compiler); err != nil {
		return report, buildErr(rego.CodeCompileFailed, err.Error())
	}

	results, err := runTests(ctx, caps, append(slices.Clone(policies), tests...))
	if err != nil {
		return report, err
	}
	for _, r := range results.Tests {
		report.Tests++
		switch r.Result {
		case TestPass:
			report.Passed++
		case TestFail:
			report.Failed++
		default:
			report.Errored++
		}
	}
	doc, err := rego.CanonicalJSON(results)
	if err != nil {
		return report, err
	}
	if len(doc) > rego.MaxTestResultsBytes {
		return report, buildErr(rego.CodeOutputBoundExceeded, fmt.Sprintf("test results are %d bytes, over %d", len(doc), rego.MaxTestResultsBytes))
	}
	if _, err := testResultsOut.Write(doc); err != nil {
		return report, fmt.Errorf("writing test results: %w", err)
	}
	if report.Failed > 0 || report.Errored > 0 {
		return report, buildErr(rego.CodeTestsFailed, failedTests(results))
	}

	if err := writeBundle(bundleOut, policies, digest); err != nil {
		return report, err
	}
	return report, nil
}

type parsedModule struct {
	path   string
	raw    []byte
	module *ast.Module
}

func modulesByPath(ms []parsedModule) map[string]*ast.Module {
	out := make(map[string]*ast.Module, len(ms))
	for _, m := range ms {
		out[m.path] = m.module
	}
	return out
}

// readSources reads every .rego file under dir, within the module and byte
// limits. dir is opened as an os.Root so no path in the archive can reach
// outside it, and links are refused rather than followed: an extracted
// archive has no business pointing elsewhere.
func readSources(ctx context.Context, dir string) ([]source, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening policy source: %w", err)
	}
	defer root.Close()

	var sources []source
	var total int64
	err = fs.WalkDir(root.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".rego") {
			return nil
		}
		if !d.Type().IsRegular() {
			return buildErr(rego.CodeCompileFailed, path+": not a regular file")
		}
		if len(sources) == rego.MaxModules {
			return buildErr(rego.CodeCompileFailed, fmt.Sprintf("more than %d .rego files", rego.MaxModules))
		}
		f, err := root.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		raw, err := io.ReadAll(newBoundedReader(f, rego.MaxSourceBytes-total))
		if errors.Is(err, errBound) {
			return buildErr(rego.CodeCompileFailed, fmt.Sprintf(".rego files exceed %d bytes in total", rego.MaxSourceBytes))
		}
		if err != nil {
			return err
		}
		total += int64(len(raw))
		sources = append(sources, source{path: path, raw: raw})
		return nil
	})
	var be *rego.BuildError
	if errors.As(err, &be) {
		return nil, be
	}
	if err != nil {
		return nil, fmt.Errorf("reading policy source: %w", err)
	}
	// WalkDir visits in lexical order already; sorting states the
	// guarantee the bundle's byte-for-byte stability rests on.
	slices.SortFunc(sources, func(a, b source) int { return strings.Compare(a.path, b.path) })
	return sources, nil
}

// parseSources parses every file, reporting all parse errors at once, and
// splits test modules from policy modules.
func parseSources(sources []source, caps *ast.Capabilities) (policies, tests []parsedModule, err error) {
	opts := parserOptions(caps)
	var errs []string
	for _, s := range sources {
		m, err := ast.ParseModuleWithOpts(s.path, string(s.raw), opts)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if m == nil { // a file of comments only
			errs = append(errs, s.path+": no package declaration")
			continue
		}
		pm := parsedModule{path: s.path, raw: s.raw, module: m}
		if strings.HasSuffix(s.path, "_test.rego") {
			tests = append(tests, pm)
		} else {
			policies = append(policies, pm)
		}
	}
	if len(errs) > 0 {
		return nil, nil, buildErr(rego.CodeCompileFailed, strings.Join(errs, "\n"))
	}
	return policies, tests, nil
}

// runTests runs every test rule with OPA's tester under the same compiler
// configuration as the bundle, with built-in errors raised as in
// evaluation, and returns the results ordered by package then name.
func runTests(ctx context.Context, caps *ast.Capabilities, modules []parsedModule) (TestResults, error) {
	results := TestResults{Schema: TestResultsSchema, Tests: []TestResult{}}
	runner := tester.NewRunner().
		SetCompiler(newCompiler(caps)).
		SetModules(modulesByPath(modules)).
		SetTimeout(rego.TestTimeout).
		RaiseBuiltinErrors(true)
	ch, err := runner.RunTests(ctx, nil)
	if err != nil {
		// The tester compiles policy and tests together; the policy alone
		// compiled, so the tests are what failed.
		return results, buildErr(rego.CodeCompileFailed, err.Error())
	}
	for r := range ch {
		if r.Skip { // todo_test_ rules: declared, deliberately not run
			continue
		}
		out := TestResult{
			Package:    strings.TrimPrefix(r.Package, "data."),
			Name:       r.Name,
			DurationMS: r.Duration.Milliseconds(),
			Result:     TestPass,
		}
		switch {
		case r.Error != nil:
			out.Result = TestError
		case r.Fail:
			out.Result = TestFail
		}
		results.Tests = append(results.Tests, out)
	}
	// A cancelled build stops the tester early; what ran is no verdict.
	if err := ctx.Err(); err != nil {
		return results, fmt.Errorf("running policy tests: %w", err)
	}
	slices.SortFunc(results.Tests, func(a, b TestResult) int {
		if c := strings.Compare(a.Package, b.Package); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, t := range results.Tests {
		switch t.Result {
		case TestPass:
			results.Passed++
		case TestFail:
			results.Failed++
		default:
			results.Errored++
		}
	}
	return results, nil
}

func failedTests(r TestResults) string {
	var b strings.Builder
	for _, t := range r.Tests {
		if t.Result != TestPass {
			fmt.Fprintf(&b, "%s.%s: %s\n", t.Package, t.Name, t.Result)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// bundleMetadata is recorded in the bundle manifest so a bundle says which
// engine and manifest built it.
func bundleMetadata(capabilitiesDigest string) map[string]any {
	return map[string]any{
		"cairn": map[string]any{
			"engine_version":      rego.EngineVersion,
			"capabilities_id":     rego.CapabilitiesID,
			"capabilities_sha256": capabilitiesDigest,
			"entrypoint":          rego.Entrypoint,
		},
	}
}

// writeBundle writes the policy modules as an OPA bundle. The roots are
// the top-level package names present, which always include "cairn". The
// bytes are a function of the sources alone (no timestamps, sorted paths),
// so rebuilding the same sources yields the same bundle digest.
func writeBundle(w io.Writer, policies []parsedModule, capabilitiesDigest string) error {
	rootSet := map[string]bool{}
	files := make([]bundle.ModuleFile, 0, len(policies))
	for _, p := range policies {
		path := p.module.Package.Path
		if len(path) < 2 {
			return buildErr(rego.CodeBundleFailed, p.path+": package has no name")
		}
		top, ok := path[1].Value.(ast.String)
		if !ok {
			return buildErr(rego.CodeBundleFailed, p.path+": package name is not a plain string")
		}
		rootSet[string(top)] = true
		name := "/" + p.path
		files = append(files, bundle.ModuleFile{URL: name, Path: name, Raw: p.raw, Parsed: p.module})
	}
	roots := make([]string, 0, len(rootSet))
	for r := range rootSet {
		roots = append(roots, r)
	}
	slices.Sort(roots)

	b := bundle.Bundle{
		Manifest: bundle.Manifest{Roots: &roots, Metadata: bundleMetadata(capabilitiesDigest)},
		Data:     map[string]any{},
		Modules:  files,
	}
	b.Manifest.SetRegoVersion(ast.RegoV1)

	bw := &boundedWriter{w: w, limit: rego.MaxBundleBytes}
	err := bundle.NewWriter(bw).UseModulePath(true).DisableFormat(true).Write(b)
	switch {
	case err == nil:
		return nil
	case bw.destErr != nil:
		return fmt.Errorf("writing policy bundle: %w", bw.destErr)
	case errors.Is(err, errBound):
		return buildErr(rego.CodeOutputBoundExceeded, fmt.Sprintf("bundle over %d bytes", rego.MaxBundleBytes))
	default:
		return buildErr(rego.CodeBundleFailed, err.Error())
	}
}
