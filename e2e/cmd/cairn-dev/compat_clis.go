package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// The CLI suite: every workflow README shows for `tofu`, proven for both
// CLIs by the end-to-end test named next to it, which the harness runs
// (against its own stacks on the harness's cluster) so that the page says
// what the last run measured. A workflow a CLI lacks itself is listed with
// the reason instead of a test.

// cliWorkflow is one README workflow and, per CLI, the end-to-end test
// (or subtest) that proves it, or why the CLI cannot do it.
type cliWorkflow struct {
	name string
	// proof maps a CLI to its test; missing maps a CLI to its own limit.
	proof, missing map[string]string
}

const (
	cliTofu      = "OpenTofu 1.10.6"
	cliTerraform = "Terraform 1.5.7"
)

var cliWorkflows = []cliWorkflow{
	{name: "state mode: init, apply and state pull continue the other CLI's state (same lineage, next serial)",
		proof: map[string]string{cliTofu: "TestBothCLIsShareAWorkspace", cliTerraform: "TestBothCLIsShareAWorkspace"}},
	{name: "remote plan with its log streamed from the sandbox",
		proof: map[string]string{cliTofu: "TestBothCLIsShareAWorkspace", cliTerraform: "TestBothCLIsShareAWorkspace"}},
	{name: "remote apply approved at the CLI's own prompt; both CLIs read the same serial and outputs",
		proof: map[string]string{cliTofu: "TestBothCLIsShareAWorkspace", cliTerraform: "TestBothCLIsShareAWorkspace"}},
	{name: "a soft policy failure overridden from the CLI",
		proof: map[string]string{cliTofu: "TestSoftPolicyFailureOverriddenFromTheCLI/tofu", cliTerraform: "TestSoftPolicyFailureOverriddenFromTheCLI/terraform"}},
	{name: "login (the browser flow stores a user token for the host)",
		proof: map[string]string{cliTofu: "TestTofuLogin/tofu", cliTerraform: "TestTofuLogin/terraform"}},
	{name: "modules from the private registry",
		proof: map[string]string{cliTofu: "TestRegistryModulesWithTheCLIs/tofu", cliTerraform: "TestRegistryModulesWithTheCLIs/terraform"}},
	{name: "a workspace pinned to the operator-listed terraform version runs terraform in the sandbox",
		proof:   map[string]string{cliTerraform: "TestTerraformVersionRunsTerraform"},
		missing: map[string]string{cliTofu: "a Terraform version is for the terraform CLI's workspaces; OpenTofu's pin OpenTofu"}},
}

// cliTests are the top-level tests the workflows name.
func cliTests() []string {
	var names []string
	for _, w := range cliWorkflows {
		for _, test := range w.proof {
			top, _, _ := strings.Cut(test, "/")
			if !slices.Contains(names, top) {
				names = append(names, top)
			}
		}
	}
	slices.Sort(names)
	return names
}

// compatCLIs runs the workflows' end-to-end tests against pg and returns a
// row per workflow and CLI; a failed or missing proof is unexplained.
func compatCLIs(ctx context.Context, pg *devstack.Postgres, selection string) (compatSuite, error) {
	suite := compatSuite{Client: "The CLIs: " + cliTofu + " and " + cliTerraform, Command: "make test-compat", ListAll: true}
	names := cliTests()
	if selection != "" {
		re, err := regexp.Compile(selection)
		if err != nil {
			return suite, err
		}
		names = slices.DeleteFunc(names, func(n string) bool { return !re.MatchString(n) })
	}
	if len(names) == 0 {
		return suite, nil
	}
	fmt.Printf("==> the CLIs: %d end-to-end tests (%s)\n", len(names), strings.Join(names, ", "))
	cmd := exec.CommandContext(ctx, "go", "test", "-json", "-count=1", "-timeout=20m", "-run", "^("+strings.Join(names, "|")+")$", "./e2e")
	var events bytes.Buffer
	cmd.Env = append(os.Environ(), testEnv(pg, nil)...)
	cmd.Stdout, cmd.Stderr = &events, os.Stderr
	_ = cmd.Run()
	outcome, output := readTestEvents(&events)
	// A failed test's own lines say why; they are the harness's to show.
	for _, name := range slices.Sorted(maps.Keys(outcome)) {
		if outcome[name] == "fail" && output[name] != nil {
			lines := strings.Split(strings.TrimRight(output[name].String(), "\n"), "\n")
			fmt.Printf("  FAIL  %s\n          %s\n", name, strings.Join(lines[max(0, len(lines)-30):], "\n          "))
		}
	}
	unexplained := 0
	for _, w := range cliWorkflows {
		for _, cli := range []string{cliTofu, cliTerraform} {
			row := compatTest{Area: cli, Name: w.name}
			test, proven := w.proof[cli]
			top, _, _ := strings.Cut(test, "/")
			switch {
			case !proven:
				row.Outcome, row.Cause = outcomeNotRun, w.missing[cli]
			case !slices.Contains(names, top):
				continue // narrowed away
			case outcome[test] == "pass":
				row.Outcome, row.Cause = outcomePassed, "end-to-end test "+test
			case outcome[test] == "skip":
				row.Outcome, row.Cause = outcomeSkipped, "end-to-end test "+test+" skipped itself"
			default:
				unexplained++
				row.Outcome, row.Cause = outcomeUnexplained, "end-to-end test "+test+" did not pass"
			}
			fmt.Printf("  %-5s %s: %s (%s)\n", strings.ToUpper(row.Outcome), cli, row.Name, row.Cause)
			suite.Tests = append(suite.Tests, row)
		}
	}
	if unexplained > 0 {
		return suite, fmt.Errorf("the CLIs: %d workflows not proven", unexplained)
	}
	return suite, nil
}
