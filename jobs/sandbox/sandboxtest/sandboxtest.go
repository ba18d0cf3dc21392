// Package sandboxtest serves the tests of packages that make local sandbox
// drivers: every sandboxed command starts through cairn-sandbox-exec, which
// `make build` puts beside cairn-worker but a test binary does not have.
package sandboxtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cairnhq/cairn/jobs/sandbox"
)

// InstallExec builds cairn-sandbox-exec from this module into a new
// directory and puts that directory first in PATH, where sandbox.NewLocal
// finds it. Call it from TestMain before m.Run; the returned function
// removes the directory. Building from source, not taking a copy from bin/,
// keeps the tests on the code under test.
func InstallExec() (func(), error) {
	if os.Getenv(InstalledEnv) != "" {
		// A test binary started by a test that installed it already, with
		// PATH passed on.
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", "cairn-sandbox-exec-")
	if err != nil {
		return nil, err
	}
	remove := func() { _ = os.RemoveAll(dir) }
	// Sandboxes of a root worker run as other users, who must be able to
	// reach the program through this directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		remove()
		return nil, err
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		remove()
		return nil, fmt.Errorf("building %s needs the go command: %w", sandbox.ExecProgram, err)
	}
	build := exec.Command(goTool, "build", "-o", filepath.Join(dir, sandbox.ExecProgram),
		"github.com/cairnhq/cairn/jobs/cmd/cairn-sandbox-exec")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		remove()
		return nil, fmt.Errorf("building %s: %w\n%s", sandbox.ExecProgram, err, strings.TrimSpace(string(out)))
	}
	err = os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if err == nil {
		err = os.Setenv(InstalledEnv, "1")
	}
	if err != nil {
		remove()
		return nil, err
	}
	return remove, nil
}

// InstalledEnv is set once InstallExec put the program in PATH; a test
// that starts a test binary passes it on with PATH.
const InstalledEnv = "CAIRN_TEST_SANDBOX_EXEC_INSTALLED"

// Main is TestMain for packages that need nothing else before their tests:
// it installs cairn-sandbox-exec, runs the tests and exits with their status.
func Main(run func() int) {
	remove, err := InstallExec()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := run()
	remove()
	os.Exit(code)
}

// BaseEnv names the managed base for tests (cairn-dev test sets it, and a
// test rerun as another user gets it passed on).
const BaseEnv = "CAIRN_SANDBOX_BASE"

// Base is the managed base for drivers under test: BaseEnv, else the one
// `make tools` assembles in the repository (.tools/sandbox-base), found
// from the working directory, which `go test` sets to the package's. Empty outside a
// checkout, which leaves a namespaced driver refusing sandboxes.
func Base() string {
	if b := os.Getenv(BaseEnv); b != "" {
		return b
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".tools", "sandbox-base")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
