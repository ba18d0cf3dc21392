package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// policyEngine is the module only the policy program may link: OPA and
// what it drags in are most of a binary's mapped size, and neither the API
// nor the worker runs a policy (cairn-policy does, in a sandbox).
const policyEngine = "github.com/open-policy-agent/opa"

// linksEngine returns the lines of a `go list -deps` or `go version -m`
// listing that name a package or module of the policy engine.
func linksEngine(list string) []string {
	var found []string
	for _, line := range strings.Split(list, "\n") {
		for _, f := range strings.Fields(line) {
			if f == policyEngine || strings.HasPrefix(f, policyEngine+"/") {
				found = append(found, f)
			}
		}
	}
	return found
}

// TestMainProcessesLinkNoPolicyEngine: neither cairn-api's nor
// cairn-worker's dependency graph holds an OPA package, while
// cairn-policy's does (so the check looks for the right name), and the
// same holds of the built binaries when the test runner provides them
// (CAIRN_BIN_DIR).
func TestMainProcessesLinkNoPolicyEngine(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "..")
	deps := func(pkg string) string {
		t.Helper()
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		return string(out)
	}
	for _, pkg := range []string{".", filepath.Join(root, "api", "cmd", "cairn-api")} {
		list := deps("./" + filepath.ToSlash(pkg))
		if !strings.Contains(list, "github.com/cairnhq/cairn/api/policy/rego\n") {
			t.Fatalf("%s no longer depends on api/policy/rego; the check below would prove little:\n%s", pkg, list)
		}
		if found := linksEngine(list); len(found) > 0 {
			t.Errorf("%s depends on the policy engine: %v", pkg, found)
		}
	}
	if found := linksEngine(deps("./" + filepath.ToSlash(filepath.Join("..", "cairn-policy")))); len(found) == 0 {
		t.Fatal("cairn-policy does not link OPA: the check above looks for the wrong name")
	}
	dir := os.Getenv("CAIRN_BIN_DIR")
	if dir == "" {
		return
	}
	for _, name := range []string{"cairn-api", "cairn-worker", "cairn-policy"} {
		bin := filepath.Join(dir, name)
		if _, err := os.Stat(bin); err != nil {
			t.Skipf("no built %s to inspect: %v", name, err)
		}
		out, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
		if err != nil {
			t.Fatalf("go version -m %s: %v\n%s", bin, err, out)
		}
		if !strings.Contains(string(out), "github.com/lib/pq") && name != "cairn-policy" {
			t.Fatalf("go version -m listed no modules:\n%s", out)
		}
		found := linksEngine(string(out))
		switch {
		case name == "cairn-policy" && len(found) == 0:
			t.Errorf("%s links no OPA: the check looks for the wrong name", bin)
		case name != "cairn-policy" && len(found) > 0:
			t.Errorf("%s links the policy engine: %v", bin, found)
		}
	}
}
