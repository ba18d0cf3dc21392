package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The compatibility results are one JSON file that every client suite
// writes its rows into (go-tfe's integration tests now; OpenTofu's
// internal/cloud cases and the terraform CLI add suites of their own), and
// docs/reference/compatibility.md is generated from it, so the page says
// what the last run measured.
const (
	compatResultsFile = "docs/reference/compatibility.json"
	compatPageFile    = "docs/reference/compatibility.md"
)

// Outcomes of one test. Only passed, failed and unexplained count towards
// the pass rate; the others are excluded from it, each with its cause.
const (
	outcomePassed      = "passed"
	outcomeFailed      = "failed"      // a known gap: Cairn's to fix, counted as a failure
	outcomeUnexplained = "unexplained" // a failure without a named cause
	outcomeRefused     = "refused"     // SPEC.md refuses what the test needs
	outcomeNotModelled = "not_modelled"
	outcomeSkipped     = "skipped" // the suite skips it itself (enterprise, beta, upstream)
	outcomeNotRun      = "not_run" // not selected, for the cause given
)

// compatReport is the results file: one suite per client.
type compatReport struct {
	Suites []compatSuite `json:"suites"`
}

// compatSuite is one client's tests, grouped by area (for go-tfe, the
// integration test file).
type compatSuite struct {
	Client string `json:"client"`
	// Command reproduces the suite's run.
	Command string       `json:"command"`
	Tests   []compatTest `json:"tests"`
	// ListAll lists passing rows on the page too, with their cause (the
	// test that proves them): a suite of workflows rather than tests.
	ListAll bool `json:"list_all,omitempty"`
}

// compatTest is one top-level test's outcome.
type compatTest struct {
	Area    string `json:"area"`
	Name    string `json:"name"`
	Outcome string `json:"outcome"`
	Cause   string `json:"cause,omitempty"`
}

// compatTally counts a set of tests by outcome.
type compatTally map[string]int

// rate is the share of the counted tests that passed: refused, unmodelled,
// skipped and unselected tests are excluded; known gaps and unexplained
// failures count against it.
func (t compatTally) rate() (passed, counted int) {
	passed = t[outcomePassed]
	return passed, passed + t[outcomeFailed] + t[outcomeUnexplained]
}

func tally(tests []compatTest) compatTally {
	t := compatTally{}
	for _, test := range tests {
		t[test.Outcome]++
	}
	return t
}

// areas returns the suite's areas in order, with their tests.
func (s compatSuite) areas() ([]string, map[string][]compatTest) {
	byArea := map[string][]compatTest{}
	for _, test := range s.Tests {
		byArea[test.Area] = append(byArea[test.Area], test)
	}
	return slices.Sorted(maps.Keys(byArea)), byArea
}

// mergeSuite puts a run's suite into the report. A narrowed run replaces
// only the tests it ran and keeps the suite's others; a full run replaces
// the suite.
func (r *compatReport) mergeSuite(s compatSuite, narrowed bool) {
	i := slices.IndexFunc(r.Suites, func(old compatSuite) bool { return old.Client == s.Client })
	if i < 0 {
		r.Suites = append(r.Suites, s)
		i = len(r.Suites) - 1
	} else if narrowed {
		ran := map[string]bool{}
		for _, t := range s.Tests {
			ran[t.Name] = true
		}
		kept := slices.DeleteFunc(slices.Clone(r.Suites[i].Tests), func(t compatTest) bool { return ran[t.Name] })
		s.Tests = append(kept, s.Tests...)
		s.Command = r.Suites[i].Command
	}
	slices.SortFunc(s.Tests, func(a, b compatTest) int {
		return strings.Compare(a.Area+"\x00"+a.Name, b.Area+"\x00"+b.Name)
	})
	r.Suites[i] = s
	slices.SortFunc(r.Suites, func(a, b compatSuite) int { return strings.Compare(a.Client, b.Client) })
}

func readCompatReport(path string) (compatReport, error) {
	var r compatReport
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("reading compatibility results: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("decoding %s: %w", path, err)
	}
	return r, nil
}

// writeCompatSuite merges a suite into the results file at path.
func writeCompatSuite(path string, s compatSuite, narrowed bool) error {
	r, err := readCompatReport(path)
	if err != nil {
		return err
	}
	r.mergeSuite(s, narrowed)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeCompatPage regenerates the compatibility page from the results file.
func writeCompatPage(resultsPath, pagePath string) error {
	r, err := readCompatReport(resultsPath)
	if err != nil {
		return err
	}
	return os.WriteFile(pagePath, []byte(compatPage(r)), 0o644)
}

// compatPage renders the results as Markdown: per client a table of its
// areas, then every test that did not pass with its cause.
func compatPage(r compatReport) string {
	var b strings.Builder
	b.WriteString("# Client compatibility\n\n")
	b.WriteString("<!-- Generated by `./bin/cairn-dev compat -write-docs` from compatibility.json; do not edit. -->\n\n")
	b.WriteString("Each client's own tests, run against a real `cairn-api` and `cairn-worker`. The pass rate counts the\n" +
		"tests that ran, less those SPEC.md refuses by design and those about resources Cairn does not model; a\n" +
		"known gap counts as a failure. Skipped tests are skipped by the suite itself (enterprise- or beta-only\n" +
		"upstream); tests not run need no server or something no test environment has.\n")
	for _, s := range r.Suites {
		passed, counted := tally(s.Tests).rate()
		fmt.Fprintf(&b, "\n## %s\n\n", s.Client)
		if s.Command != "" {
			fmt.Fprintf(&b, "Run with `%s`. ", s.Command)
		}
		fmt.Fprintf(&b, "%d of %d counted tests pass (%s).\n\n", passed, counted, percent(passed, counted))
		b.WriteString("| Area | Passing | Failing | Refused by design | Not modelled | Skipped | Not run |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		names, byArea := s.areas()
		for _, area := range names {
			t := tally(byArea[area])
			fmt.Fprintf(&b, "| `%s` | %d | %d | %d | %d | %d | %d |\n", area, t[outcomePassed],
				t[outcomeFailed]+t[outcomeUnexplained], t[outcomeRefused], t[outcomeNotModelled], t[outcomeSkipped], t[outcomeNotRun])
		}
		for _, area := range names {
			var rows []string
			for _, t := range byArea[area] {
				if t.Outcome == outcomePassed && !s.ListAll {
					continue
				}
				rows = append(rows, fmt.Sprintf("| `%s` | %s | %s |", t.Name, outcomeLabel(t.Outcome), strings.ReplaceAll(t.Cause, "|", "\\|")))
			}
			if len(rows) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\n### `%s`\n\n| Test | Outcome | Cause |\n| --- | --- | --- |\n%s\n", area, strings.Join(rows, "\n"))
		}
	}
	return b.String()
}

func outcomeLabel(outcome string) string {
	switch outcome {
	case outcomeFailed:
		return "failing (known gap)"
	case outcomeUnexplained:
		return "failing (unexplained)"
	case outcomeRefused:
		return "refused by design"
	case outcomeNotModelled:
		return "not modelled"
	case outcomeNotRun:
		return "not run"
	}
	return outcome
}

func percent(n, of int) string {
	if of == 0 {
		return "none counted"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(n)/float64(of))
}
