package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// events renders go test -json events: test name to its action, and
// optional output per test.
func events(t *testing.T, actions map[string]string, output map[string]string) *strings.Reader {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for name, text := range output {
		if err := enc.Encode(testEvent{Action: "output", Test: name, Output: text}); err != nil {
			t.Fatal(err)
		}
	}
	for name, action := range actions {
		if err := enc.Encode(testEvent{Action: action, Test: name}); err != nil {
			t.Fatal(err)
		}
	}
	return strings.NewReader(b.String())
}

func TestSummarizeGatesOnNamedCausesAndThePassRate(t *testing.T) {
	t.Parallel()
	passing := map[string]string{}
	// 19 passing tests: one failure more leaves exactly 95 %.
	for c := 'A'; c <= 'S'; c++ {
		passing["Test"+string(c)] = "pass"
	}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range passing {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	cases := map[string]struct {
		actions map[string]string
		output  map[string]string
		wantErr string
	}{
		"a refusal the spec requires and an unmodelled resource are forgiven": {
			actions: with(map[string]string{
				"TestRunsCreate_RunDependent": "fail", "TestRunsCreate_RunDependent/with_auto-apply_requested": "fail",
				"TestQueryRunsList_RunDependent": "fail", "TestSkipped": "skip",
			}),
		},
		"a failure without a cause fails the harness": {
			actions: with(map[string]string{"TestWorkspacesLock": "fail"}),
			wantErr: "without a named cause",
		},
		"a top-level test is only as explained as its failed subtests": {
			actions: with(map[string]string{
				"TestRunsCreate_RunDependent": "fail", "TestRunsCreate_RunDependent/with_auto-apply_requested": "fail",
				"TestRunsCreate_RunDependent/without_a_workspace": "fail",
			}),
			wantErr: "without a named cause",
		},
		"a refusal is left out of the rate, not counted against it": {
			actions: map[string]string{
				"TestA": "pass", "TestRunsCreate_RunDependent": "fail",
				"TestRunsCreate_RunDependent/with_auto-apply_requested": "fail",
			},
		},
		"a known gap counts as a failure": {
			actions: with(map[string]string{"TestPlansRead_RunDependent": "fail", "TestPlansLogs_RunDependent": "fail"}),
			output: map[string]string{
				"TestPlansRead_RunDependent": "Error: Failed to resolve provider packages\n",
				"TestPlansLogs_RunDependent": "Error: Failed to resolve provider packages\n",
			},
			wantErr: "of go-tfe's counted top-level tests",
		},
		"a run without the fixture provider is a named gap": {
			actions: with(map[string]string{"TestPlansRead_RunDependent": "fail"}),
			output:  map[string]string{"TestPlansRead_RunDependent": "Error: Failed to resolve provider packages\n"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := summarize(events(t, tc.actions, tc.output), map[string]string{}, nil)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("summarize: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("summarize: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

// TestCompatSkipPatternNamesOnlyTheTestsOwnSubtests checks the pattern the
// way go test reads -test.skip: split at slashes, one expression per level.
func TestCompatSkipPatternNamesOnlyTheTestsOwnSubtests(t *testing.T) {
	t.Parallel()
	if p := compatSkipPattern("TestRunsCreate_RunDependent"); p != "" {
		t.Fatalf("a test without skipped subtests got %q", p)
	}
	levels := strings.Split(compatSkipPattern("TestRegistryModulesList"), "/")
	if len(levels) != 2 {
		t.Fatalf("levels %q", levels)
	}
	matches := func(expr, s string) bool { return regexp.MustCompile(expr).MatchString(s) }
	if !matches(levels[0], "TestRegistryModulesList") || matches(levels[0], "TestWorkspacesRead") ||
		!matches(levels[1], "include_no-code_modules") || matches(levels[1], "with_search_query") {
		t.Fatalf("pattern %q", levels)
	}
}

// TestCompatibilityPageMatchesTheResults fails when the committed page
// drifts from what the generator makes of the committed results file:
// regenerate it with `./bin/cairn-dev compat -write-docs`.
func TestCompatibilityPageMatchesTheResults(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "..")
	r, err := readCompatReport(filepath.Join(root, compatResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Suites) == 0 {
		t.Fatalf("%s holds no suite", compatResultsFile)
	}
	page, err := os.ReadFile(filepath.Join(root, compatPageFile))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(compatPage(r), string(page)); diff != "" {
		t.Fatalf("%s drifted from %s; run ./bin/cairn-dev compat -write-docs (-generated +committed):\n%s", compatPageFile, compatResultsFile, diff)
	}
}

// TestSummarizeCountsPerArea checks the rows a run writes: each top-level
// test under its file with its outcome and cause, subtests folded into
// their test, and the unselected tests kept with theirs.
func TestSummarizeCountsPerArea(t *testing.T) {
	t.Parallel()
	area := map[string]string{
		"TestRunsCreate_RunDependent": "run_integration_test.go", "TestRunsList_RunDependent": "run_integration_test.go",
		"TestQueryRunsList_RunDependent": "query_run_integration_test.go", "TestPlansRead_RunDependent": "plan_integration_test.go",
	}
	notRun := []compatTest{{Area: "run_integration_test.go", Name: "TestRun_Unmarshal", Outcome: outcomeNotRun, Cause: "a unit test"}}
	suite, err := summarize(events(t, map[string]string{
		"TestRunsCreate_RunDependent": "fail", "TestRunsCreate_RunDependent/with_auto-apply_requested": "fail",
		"TestRunsList_RunDependent": "pass", "TestRunsList_RunDependent/without_list_options": "pass",
		"TestQueryRunsList_RunDependent": "fail", "TestPlansRead_RunDependent": "skip",
	}, map[string]string{"TestPlansRead_RunDependent": "    plan_integration_test.go:20: Skipping test related to HCP Terraform\n"}), area, notRun)
	if err != nil {
		t.Fatal(err)
	}
	want := []compatTest{
		notRun[0],
		{Area: "plan_integration_test.go", Name: "TestPlansRead_RunDependent", Outcome: outcomeSkipped, Cause: "skipped by go-tfe: Skipping test related to HCP Terraform"},
		{Area: "query_run_integration_test.go", Name: "TestQueryRunsList_RunDependent", Outcome: outcomeNotModelled, Cause: "query runs are a resource Cairn does not model"},
		{Area: "run_integration_test.go", Name: "TestRunsCreate_RunDependent", Outcome: outcomeRefused, Cause: "its failed subtests: " + compatDeviations["TestRunsCreate_RunDependent/with_auto-apply_requested"]},
		{Area: "run_integration_test.go", Name: "TestRunsList_RunDependent", Outcome: outcomePassed},
	}
	if diff := cmp.Diff(want, suite.Tests); diff != "" {
		t.Fatalf("rows (-want +got):\n%s", diff)
	}
	var r compatReport
	r.mergeSuite(suite, false)
	r.mergeSuite(compatSuite{Client: suite.Client, Tests: []compatTest{{Area: "plan_integration_test.go", Name: "TestPlansRead_RunDependent", Outcome: outcomePassed}}}, true)
	if got := tally(r.Suites[0].Tests); got[outcomePassed] != 2 || got[outcomeSkipped] != 0 || len(r.Suites[0].Tests) != 5 {
		t.Fatalf("a narrowed run replaced more than its own rows: %+v", r.Suites[0].Tests)
	}
	if passed, counted := tally(r.Suites[0].Tests).rate(); passed != 2 || counted != 2 {
		t.Fatalf("rate counts %d of %d, want 2 of 2 (refused, not modelled and not run left out)", passed, counted)
	}
}
