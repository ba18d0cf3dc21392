package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/jobs/sandbox"
)

// TestCommandChoosesItsStopSignalAndGrace stops a command that saves its
// work on SIGINT and needs longer than the driver's KillGrace to do it: it
// gets SIGINT, not SIGTERM, and its own StopGrace, as an interrupted tofu
// apply does to write its errored state.
func TestCommandChoosesItsStopSignalAndGrace(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{KillGrace: 100 * time.Millisecond})
		mk := marker()
		var out syncBuffer
		ctx, cancel := context.WithCancel(context.Background())
		c := sh(fmt.Sprintf(`trap 'echo got-term' TERM; trap 'sleep 1; echo saved-on-interrupt; exit 3' INT; sleep %s & wait`, mk))
		c.Stdout, c.StopSignal, c.StopGrace = &out, syscall.SIGINT, 10*time.Second
		done := runAsync(ctx, f.sbx, c)
		waitForProcesses(t, mk, 1)
		start := time.Now()
		cancel()
		if err := <-done; !errors.Is(err, sandbox.ErrCanceled) {
			t.Fatalf("error %v, want ErrCanceled", err)
		}
		if !strings.Contains(out.String(), "saved-on-interrupt") || strings.Contains(out.String(), "got-term") {
			t.Errorf("the command did not stop on SIGINT within its own grace; output %q", out.String())
		}
		if elapsed := time.Since(start); elapsed < time.Second || elapsed > 8*time.Second {
			t.Errorf("stop took %s, want the command's second, well inside its 10s grace", elapsed)
		}
		requireGone(t, mk)
	})
}

func TestCommandStopSettingsAreValidated(t *testing.T) {
	t.Parallel()
	f := setup(t, plain, sandbox.Spec{}, sandbox.LocalOptions{})
	for _, c := range []sandbox.Command{
		{Args: []string{"true"}, StopGrace: -time.Second},
		{Args: []string{"true"}, StopSignal: syscall.SIGKILL},
	} {
		if _, err := f.sbx.Run(context.Background(), c); !errors.Is(err, sandbox.ErrInvalidSpec) {
			t.Errorf("Run with StopGrace %s, StopSignal %d: %v, want ErrInvalidSpec", c.StopGrace, c.StopSignal, err)
		}
	}
}
