package policyprogram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
	"github.com/cairnhq/cairn/jobs/policybuild"
	"github.com/cairnhq/cairn/jobs/policyeval"
)

// Build is the build program, cairn-policy build SRC OUT, run in a build
// sandbox (jobs/policybuild prepares it): it compiles and tests the sources in src
// and writes the bundle, test results and report into out. Policy faults
// become a report's failure code with exit status 0; only a broken
// environment returns an error.
func Build(ctx context.Context, src, out string) error {
	var once sync.Once
	writeReport := func(r policybuild.Report) (err error) {
		once.Do(func() {
			body, merr := json.Marshal(r)
			if merr != nil {
				err = merr
				return
			}
			err = os.WriteFile(filepath.Join(out, policybuild.ReportFile), body, 0o600)
		})
		return err
	}
	// A test that allocates without end is stopped short of the memory
	// ceiling with a verdict, rather than left to crash at it.
	stop := policyeval.WatchMemory(5*time.Millisecond, func() {
		fmt.Fprintln(os.Stderr, "policy build failed:", policy.FailureLimit, "the build neared its memory ceiling")
		_ = writeReport(policybuild.Report{FailureCode: policy.FailureLimit})
		os.Exit(0)
	})
	defer stop()
	bundle, err := os.Create(filepath.Join(out, policybuild.BundleFile))
	if err != nil {
		return err
	}
	defer bundle.Close()
	results, err := os.Create(filepath.Join(out, policybuild.TestResultsFile))
	if err != nil {
		return err
	}
	defer results.Close()
	report := policybuild.Report{}
	built, err := engine.Build(ctx, src, bundle, results)
	var buildErr *rego.BuildError
	switch {
	case errors.As(err, &buildErr):
		report.FailureCode = buildErr.Code
		// Compiler detail goes to the sandbox's stderr, which only the
		// worker's log sees; clients get the code alone.
		fmt.Fprintln(os.Stderr, "policy build failed:", buildErr.Code, buildErr.Detail)
	case err != nil:
		return err
	default:
		report.TestsPassed = built.Passed
	}
	return writeReport(report)
}
