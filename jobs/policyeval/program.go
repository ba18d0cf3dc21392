package policyeval

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairnhq/cairn/jobs/sandbox"
)

// ProgramName is the policy program (jobs/cmd/cairn-policy): the one
// binary that links the policy engine, run in a sandbox as "cairn-policy
// evaluate REQUEST" for each evaluation and "cairn-policy build SRC OUT"
// for each build. It is installed read-only under this name.
const ProgramName = "cairn-policy"

// ProgramBeside is where a worker expects the policy program: beside its
// own executable, where make build and the image put every binary. The
// path is returned even if nothing is there yet; CheckProgram decides.
func ProgramBeside() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locating the worker executable: %w", err)
	}
	return filepath.Join(filepath.Dir(self), ProgramName), nil
}

// CheckProgram returns the real path of the policy program at path, or an
// error if it is missing, not executable, or could be replaced by anyone
// but root or this worker's user (sandbox.TrustedProgram): a run's policy
// gate trusts what it answers, so only the installed program may answer.
// Builds and evaluations check it each time they install it, so a worker
// without it refuses each one (policy_toolchain_unavailable,
// policy_evaluator_failed) until it is installed, and never passes one.
func CheckProgram(path string) (string, error) {
	trusted, err := sandbox.TrustedProgram(path)
	if err != nil {
		return "", fmt.Errorf("policy program %s unavailable (make build puts it beside cairn-worker): %w", ProgramName, err)
	}
	return trusted, nil
}
