package main

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseTakesOnlyWhatTheDriverSends(t *testing.T) {
	t.Parallel()
	inv, err := parse([]string{"-user", "60001", "-rlimit", "nofile=4096", "-rlimit", "as=1024", "-rlimit", "core=0",
		"--", "/bin/tofu", "plan", "--"})
	if err != nil {
		t.Fatal(err)
	}
	// The core limit goes first, wherever it was given.
	want := []rlimit{{unix.RLIMIT_CORE, 0}, {unix.RLIMIT_NOFILE, 4096}, {unix.RLIMIT_AS, 1024}}
	if inv.user != 60001 || !slices.Equal(inv.rlimits, want) || len(inv.argv) != 3 || inv.argv[2] != "--" {
		t.Fatalf("parsed %+v", inv)
	}
	if inv, err := parse([]string{"-rlimit", "nofile=64", "--", "/bin/true"}); err != nil || inv.user != -1 || len(inv.rlimits) != 1 {
		t.Fatalf("no user: %+v %v", inv, err)
	}
	// A worker's sandbox IDs may lie anywhere below 2^32-1.
	if inv, err := parse([]string{"-user", "4294901759", "-rlimit", "nofile=64", "--", "/bin/true"}); err != nil || inv.user != 4294901759 {
		t.Fatalf("a high user ID: %+v %v", inv, err)
	}
	for name, args := range map[string][]string{
		"root":            {"-user", "0", "--", "/bin/true"},
		"negative user":   {"-user", "-5", "--", "/bin/true"},
		"unchanged user":  {"-user", "4294967295", "--", "/bin/true"},
		"too large user":  {"-user", "4294967296", "--", "/bin/true"},
		"unknown limit":   {"-rlimit", "stack=1", "--", "/bin/true"},
		"limit no value":  {"-rlimit", "nofile", "--", "/bin/true"},
		"bad limit value": {"-rlimit", "nofile=-1", "--", "/bin/true"},
		"unknown option":  {"-groups", "1", "--", "/bin/true"},
		"no program":      {"-rlimit", "core=0", "--"},
		"no open files":   {"-user", "5000", "-rlimit", "core=0", "--", "/bin/true"},
		"no separator":    {"/bin/true"},
		"option no value": {"-user"},
	} {
		if inv, err := parse(args); err == nil {
			t.Errorf("%s: %q parsed as %+v", name, args, inv)
		}
	}
}

// TestServeIsLastAndOnlyInItsOwnPIDNamespace: -serve comes last and needs
// a user, and unless it is a PID namespace's init the supervisor refuses
// before it does anything (its kill(-1) would reach the worker's
// processes).
func TestServeIsLastAndOnlyInItsOwnPIDNamespace(t *testing.T) {
	t.Parallel()
	inv, err := parse([]string{"-user", "5000", "-rlimit", "nofile=64", "-serve"})
	if err != nil || !inv.serve || inv.user != 5000 || len(inv.rlimits) != 1 || len(inv.argv) != 0 {
		t.Fatalf("parsed %+v, %v", inv, err)
	}
	// Commands never run as the supervisor's root.
	for _, args := range [][]string{{"-user", "5000", "-serve", "--", "/bin/true"}, {"-rlimit", "core=0", "-serve"}, {"-serve"}} {
		if inv, err := parse(args); err == nil {
			t.Fatalf("%q parsed as %+v", args, inv)
		}
	}
	if err := serve(invocation{user: 5000, serve: true}); err == nil || !strings.Contains(err.Error(), "PID namespace") {
		t.Fatalf("serve in the test's own namespace: %v", err)
	}
}
