package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEveryPhaseFinishes runs the real bench binary once through every
// phase of the table with one round, short load periods and shrunken seed
// sizes against the throwaway stack, so a phase that hangs, errors or
// overruns its deadline fails `make test` instead of stalling `make bench`.
func TestEveryPhaseFinishes(t *testing.T) {
	t.Parallel()
	if os.Getenv("CAIRN_TEST_DATABASE_URL") == "" {
		t.Fatal("CAIRN_TEST_DATABASE_URL is not set: run the tests with `make test`, which starts a throwaway PostgreSQL cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "cairn-bench")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building cairn-bench: %v\n%s", err, out)
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "-rounds", "1", "-duration", "200ms", "-concurrency", "4", "-size", "0.01",
		"-idle-window", "5s", "-concurrent-runs", "2", "-scale-rounds", "5")
	// From the repository root, as make runs it: the toolchain mirror and
	// the binaries are found from there.
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, &out, &out
	cmd.Env = os.Environ()
	if os.Getenv("CAIRN_BIN_DIR") == "" {
		cmd.Env = append(cmd.Env, "CAIRN_BIN_DIR="+filepath.Join(root, "bin"))
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("cairn-bench failed after %s: %v\n%s", time.Since(start).Round(time.Second), err, out.String())
	}
	for _, p := range phases {
		if !strings.Contains(out.String(), "-- phase "+p.name+" done") {
			t.Errorf("phase %s did not report done", p.name)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out.String())
	}
	t.Logf("every phase finished in %s", time.Since(start).Round(time.Second))
}

// TestPhaseDeadline checks that a phase past its deadline fails the bench
// naming the phase, whether it returns on its context, ignores it until
// the bench gives up, or finishes late with no error.
func TestPhaseDeadline(t *testing.T) {
	abandonAfter = 200 * time.Millisecond
	cases := []struct {
		name string
		run  func(ctx context.Context, b *bench) error
		want string
	}{
		{"honours", func(ctx context.Context, _ *bench) error { <-ctx.Done(); return ctx.Err() }, "phase honours exceeded its deadline"},
		{"ignores", func(context.Context, *bench) error { time.Sleep(time.Hour); return nil }, "phase ignores exceeded its deadline of 100ms and did not stop"},
		{"late", func(context.Context, *bench) error { time.Sleep(150 * time.Millisecond); return nil }, "phase late exceeded its deadline of 100ms (took"},
		{"quick", func(context.Context, *bench) error { return nil }, ""},
	}
	for _, c := range cases {
		err := runPhase(context.Background(), &bench{}, phase{c.name, 100 * time.Millisecond, c.run})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestSelected checks -only: table order, the old name of the state-mode
// phase, and a loud error for a name that is no phase (what a typo in
// `make bench -only` would otherwise turn into an empty bench).
func TestSelected(t *testing.T) {
	got, err := selected("tofu, health")
	if err != nil || len(got) != 2 || got[0].name != "health" || got[1].name != "statemode" {
		t.Fatalf("selected(tofu, health) = %v, %v", got, err)
	}
	if _, err := selected("health,nosuch"); err == nil || !strings.Contains(err.Error(), "no such phase nosuch") {
		t.Fatalf("selected(health,nosuch) = %v", err)
	}
	if all, err := selected(""); err != nil || len(all) != len(phases) {
		t.Fatalf("selected() = %d phases, %v", len(all), err)
	}
}
