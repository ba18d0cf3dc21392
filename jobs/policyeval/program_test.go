package policyeval_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/jobs/policyeval"
)

// TestCheckProgram: only an executable file nobody else can replace is
// the policy program; the worker looks for it beside its own executable.
func TestCheckProgram(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", 0o755)
	for name, path := range map[string]string{
		"missing":        filepath.Join(dir, "missing"),
		"not executable": write("plain", 0o644),
		"group-writable": write("group", 0o775),
		"a directory":    dir,
	} {
		if _, err := policyeval.CheckProgram(path); err == nil || !strings.Contains(err.Error(), policyeval.ProgramName) {
			t.Errorf("%s: err %v, want a refusal naming %s", name, err, policyeval.ProgramName)
		}
	}
	if got, err := policyeval.CheckProgram(good); err != nil || got != good {
		t.Fatalf("good program: %q, %v", got, err)
	}
	beside, err := policyeval.ProgramBeside()
	self, _ := os.Executable()
	if err != nil || beside != filepath.Join(filepath.Dir(self), policyeval.ProgramName) {
		t.Fatalf("ProgramBeside() = %q, %v", beside, err)
	}
}
