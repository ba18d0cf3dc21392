package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
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
	for _, name := range []string{"TestA", "TestB", "TestC", "TestD", "TestE", "TestF", "TestG", "TestH", "TestI"} {
		passing[name] = "pass"
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
		"too many forgiven failures still miss the pass rate": {
			actions: map[string]string{
				"TestA": "pass", "TestRunsCreate_RunDependent": "fail",
				"TestRunsCreate_RunDependent/with_auto-apply_requested": "fail",
			},
			wantErr: "of go-tfe's top-level tests",
		},
		"a run without the fixture provider is a named gap": {
			actions: with(map[string]string{"TestPlansRead_RunDependent": "fail"}),
			output:  map[string]string{"TestPlansRead_RunDependent": "Error: Failed to resolve provider packages\n"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := summarize(events(t, tc.actions, tc.output))
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
