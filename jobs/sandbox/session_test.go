package sandbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/jobs/sandbox"
)

func newSession(t *testing.T, sbx sandbox.Sandbox) sandbox.Session {
	t.Helper()
	ss := sbx.Session()
	t.Cleanup(func() {
		if err := ss.Close(); err != nil {
			t.Error(err)
		}
	})
	return ss
}

// TestSessionCommandsShareOneEntryAndNothingElse: a session's commands
// run in one set of namespaces (where Run makes new ones each time), each
// with its own output, exit status and environment, under the same user
// and limits as Run's; only files carry over.
func TestSessionCommandsShareOneEntryAndNothingElse(t *testing.T) {
	t.Parallel()
	alsoAsNobody(t)
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{Env: map[string]string{"SPEC_VAR": "spec"}}, sandbox.LocalOptions{})
		ss := newSession(t, f.sbx)
		probe := `readlink /proc/self/ns/pid; id -u; ulimit -n; echo "$SPEC_VAR/$ONLY_FIRST"`
		// Everything a command's confinement consists of, to compare with
		// Run's: ids, groups, capability sets, no_new_privs, every limit.
		confinement := sh(`id; grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status; ulimit -a`)
		first := sh(probe + `; echo kept > file; echo to-stderr >&2; exit 3`)
		first.Env = map[string]string{"ONLY_FIRST": "first"}
		code, out1, err1 := run(t, ss, first)
		if code != 3 || err1 != "to-stderr\n" {
			t.Fatalf("first command: code %d, stderr %q", code, err1)
		}
		code, out2, _ := run(t, ss, sh(probe+`; cat file`))
		if code != 0 {
			t.Fatalf("second command: code %d", code)
		}
		l1, l2 := strings.Split(out1, "\n"), strings.Split(out2, "\n")
		if len(l1) < 4 || len(l2) < 5 {
			t.Fatalf("outputs %q and %q", out1, out2)
		}
		if l1[3] != "spec/first" || l2[3] != "spec/" || l2[4] != "kept" {
			t.Errorf("environment or files: %q then %q", out1, out2)
		}
		_, inSession, _ := run(t, ss, confinement)
		_, alone, _ := run(t, f.sbx, confinement)
		if inSession != alone {
			t.Errorf("a session's command is confined as\n%s\nand Run's as\n%s", inSession, alone)
		}
		_, plain, _ := run(t, f.sbx, sh(probe))
		p := strings.Split(plain, "\n")
		// The same user and open-file limit as a command of Run.
		if l1[1] != p[1] || l2[1] != p[1] || l1[2] != p[2] || l2[2] != p[2] {
			t.Errorf("user and limits: session %q/%q, Run %q", l1[1:3], l2[1:3], p[1:3])
		}
		// Only a root worker's sessions share an entry: a non-root
		// worker's commands are the only user a supervisor could be.
		shared := m == isolated && os.Geteuid() == 0
		if shared && (l1[0] != l2[0] || l1[0] == p[0]) {
			t.Errorf("PID namespaces: session %s and %s, Run %s; want one shared by the session alone", l1[0], l2[0], p[0])
		}
		if m == isolated && !shared && l1[0] == l2[0] {
			t.Errorf("a non-root worker's session commands shared PID namespace %s", l1[0])
		}
	})
}

// TestSessionEnteredBeforeItsFilesAreWritten: the runner enters a session
// while it writes the configuration, so the first command runs in that
// entry and sees what was written after it, handed to the sandbox user as
// under Run. An entry into a destroyed sandbox fails, and so does every
// Run after it.
func TestSessionEnteredBeforeItsFilesAreWritten(t *testing.T) {
	t.Parallel()
	alsoAsNobody(t)
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{})
		ss := newSession(t, f.sbx)
		if err := ss.Enter(); err != nil {
			t.Fatalf("Enter: %v", err)
		}
		if err := ss.Enter(); err != nil {
			t.Fatalf("a second Enter: %v", err)
		}
		if err := os.WriteFile(filepath.Join(f.sbx.WorkDir(), "written-after"), []byte("late\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out1, errOut := run(t, ss, sh(`readlink /proc/self/ns/pid; cat written-after && echo appended >> written-after`))
		if code != 0 {
			t.Fatalf("the first command after Enter: code %d, stderr %q", code, errOut)
		}
		_, out2, _ := run(t, ss, sh(`readlink /proc/self/ns/pid; cat written-after`))
		l1, l2 := strings.Split(out1, "\n"), strings.Split(out2, "\n")
		if len(l1) < 2 || len(l2) < 3 || l1[1] != "late" || l2[2] != "appended" {
			t.Fatalf("a file written after Enter: %q then %q", out1, out2)
		}
		shared := m == isolated && os.Geteuid() == 0
		if shared && l1[0] != l2[0] {
			t.Errorf("PID namespaces %s then %s: the commands did not share the early entry", l1[0], l2[0])
		}

		late := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{})
		gone := newSession(t, late.sbx)
		if err := late.sbx.Destroy(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := gone.Enter(); shared && !errors.Is(err, sandbox.ErrDestroyed) {
			t.Errorf("Enter into a destroyed sandbox: %v, want ErrDestroyed", err)
		}
		if _, err := gone.Run(context.Background(), sh("true")); err == nil {
			t.Error("a session of a destroyed sandbox ran a command")
		}
	})
}

// TestSessionKillsWhatACommandLeaves: a command's background processes,
// detached or not, are gone when its Run returns, and the next command
// sees only itself (and the session's supervisor and init).
func TestSessionKillsWhatACommandLeaves(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	f := setup(t, isolated, sandbox.Spec{}, sandbox.LocalOptions{})
	ss := newSession(t, f.sbx)
	mk := marker()
	code, _, _ := run(t, ss, sh(fmt.Sprintf(`sleep %s & setsid sleep %s & (sleep %s &) ; exit 0`, mk, mk, mk)))
	if code != 0 {
		t.Fatalf("code %d", code)
	}
	if pids := processesWith(t, mk); len(pids) != 0 {
		t.Fatalf("processes %v outlived the command that started them", pids)
	}
	// The processes in the namespace, listed before cat starts: the
	// supervisor, its init, and the shell.
	_, out, _ := run(t, ss, sh(`cat /proc/[0-9]*/comm`))
	got := strings.Fields(out)
	slices.Sort(got)
	if strings.Join(got, " ") != "cairn-sandbox-e sh" {
		t.Errorf("processes in the sandbox %q, want the supervisor and the command alone", got)
	}
}

// TestSessionSupervisorLivesUnderTheSandboxCeilings: the supervisor sets
// the commands' limits on itself, and a Go runtime that cannot map what it
// needs dies; under the default ceilings it runs a long phase's worth of
// commands, and under one too low for it each command enters on its own.
func TestSessionSupervisorLivesUnderTheSandboxCeilings(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	for _, limits := range []sandbox.Limits{{}, {MaxMemoryBytes: 1 << 30}, {MaxMemoryBytes: 64 << 20}} {
		f := setup(t, isolated, sandbox.Spec{Limits: limits}, sandbox.LocalOptions{})
		ss := newSession(t, f.sbx)
		namespaces := map[string]bool{}
		for range 40 {
			code, out, _ := run(t, ss, sh(`readlink /proc/self/ns/pid`))
			if code != 0 {
				t.Fatalf("limits %+v: code %d", limits, code)
			}
			namespaces[out] = true
		}
		if shared := len(namespaces) == 1; shared != (limits.MaxMemoryBytes == 0 && os.Geteuid() == 0) {
			t.Errorf("limits %+v: %d PID namespaces for 40 commands", limits, len(namespaces))
		}
	}
}

// TestSessionStopEndsTheSession: a command stopped by its context gets its
// stop signal and grace as under Run; the session is then over, its
// processes gone, and a later Run says so.
func TestSessionStopEndsTheSession(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	f := setup(t, isolated, sandbox.Spec{}, sandbox.LocalOptions{KillGrace: 100 * time.Millisecond})
	ss := newSession(t, f.sbx)
	run(t, ss, sh("true"))
	mk := marker()
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	c := sh(fmt.Sprintf(`trap 'echo got-term' TERM; trap 'sleep 1; echo saved-on-interrupt; exit 3' INT; sleep %s & wait`, mk))
	c.Stdout, c.StopSignal, c.StopGrace = &out, syscall.SIGINT, 10*time.Second
	done := make(chan error, 1)
	go func() {
		code, err := ss.Run(ctx, c)
		if code != -1 {
			err = fmt.Errorf("code %d, want -1: %w", code, err)
		}
		done <- err
	}()
	waitForProcesses(t, mk, 1)
	cancel()
	if err := <-done; !errors.Is(err, sandbox.ErrCanceled) {
		t.Fatalf("error %v, want ErrCanceled", err)
	}
	if !strings.Contains(out.String(), "saved-on-interrupt") || strings.Contains(out.String(), "got-term") {
		t.Errorf("the command did not stop on SIGINT within its own grace; output %q", out.String())
	}
	requireGone(t, mk)
	if _, err := ss.Run(context.Background(), sh("true")); err == nil {
		t.Error("a stopped session ran another command")
	}
}

// TestSessionStopBeforeTheCommandStarts: a stop that comes before or just
// as the command starts still stops it (an apply must get its interrupt,
// not run on until it is killed).
func TestSessionStopBeforeTheCommandStarts(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	for _, delay := range []time.Duration{-1, 0, 200 * time.Microsecond, time.Millisecond, 5 * time.Millisecond} {
		f := setup(t, isolated, sandbox.Spec{}, sandbox.LocalOptions{KillGrace: 100 * time.Millisecond})
		ss := newSession(t, f.sbx)
		run(t, ss, sh("true"))
		var out syncBuffer
		// The trap makes the shell stop at once wherever the signal finds
		// it (dash defers an untrapped SIGINT until its foreground child
		// ends), and a background sleep is what wait interrupts.
		c := sh(`trap 'exit 7' INT; echo started; sleep 3 & wait; echo ran-unstopped`)
		c.Stdout, c.StopSignal, c.StopGrace = &out, syscall.SIGINT, 10*time.Second
		ctx, cancel := context.WithCancel(context.Background())
		if delay < 0 {
			cancel()
		} else {
			time.AfterFunc(delay, cancel)
		}
		start := time.Now()
		_, err := ss.Run(ctx, c)
		cancel()
		if !errors.Is(err, sandbox.ErrCanceled) || strings.Contains(out.String(), "ran-unstopped") || time.Since(start) > 2*time.Second {
			t.Errorf("stopped %s after Run began: %v after %s, output %q; want ErrCanceled at once", delay, err, time.Since(start), out.String())
		}
		if delay < 0 && out.String() != "" {
			t.Errorf("a command stopped before Run started anyway: %q", out.String())
		}
	}
}

// TestSessionEndsAtItsWallClockAndAtDestroy: the wall clock and Destroy
// stop a session's command as they stop Run's.
func TestSessionEndsAtItsWallClockAndAtDestroy(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	f := setup(t, isolated, sandbox.Spec{Limits: sandbox.Limits{WallClock: 300 * time.Millisecond}},
		sandbox.LocalOptions{KillGrace: 100 * time.Millisecond})
	ss := newSession(t, f.sbx)
	mk := marker()
	if _, err := ss.Run(context.Background(), sh("sleep "+mk)); !errors.Is(err, sandbox.ErrTimedOut) {
		t.Fatalf("error %v, want ErrTimedOut", err)
	}
	requireGone(t, mk)

	g := setup(t, isolated, sandbox.Spec{}, sandbox.LocalOptions{})
	ss = newSession(t, g.sbx)
	mk = marker()
	done := make(chan error, 1)
	go func() {
		_, err := ss.Run(context.Background(), sh("sleep "+mk))
		done <- err
	}()
	waitForProcesses(t, mk, 1)
	if err := g.sbx.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, sandbox.ErrCanceled) {
		t.Fatalf("error %v, want ErrCanceled", err)
	}
	requireGone(t, mk)
}

// TestSessionSupervisorIsOutOfACommandsReach: the process that starts the
// next command (the namespace's init, root) cannot be limited, reniced,
// traced, stopped, killed or read by a command, which runs as the
// sandbox's own user: nothing a command does to it reaches the next one.
func TestSessionSupervisorIsOutOfACommandsReach(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("sessions share an entry only for a root worker")
	}
	tamper := buildTamper(t)
	f := setup(t, isolated, sandbox.Spec{}, sandbox.LocalOptions{KillGrace: 100 * time.Millisecond})
	if err := f.sbx.InstallTool(context.Background(), tamper); err != nil {
		t.Fatal(err)
	}
	ss := newSession(t, f.sbx)
	probe := sh(`ulimit -n; cut -d' ' -f19 /proc/self/stat`)
	_, before, _ := run(t, ss, probe)
	code, out, errOut := run(t, ss, sandbox.Command{Args: []string{"tamper"}})
	if code != 0 {
		t.Fatalf("tamper: code %d, %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 8 {
		t.Fatalf("tamper reported %q, want its eight attempts", out)
	}
	for _, line := range lines {
		if strings.HasSuffix(line, " ok") {
			t.Errorf("a command reached the supervisor: %s", line)
		}
	}
	code, after, _ := run(t, ss, probe)
	if code != 0 || after != before {
		t.Errorf("the next command got limits and priority %q, want %q as before", after, before)
	}
}

var tamperOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "cairn-tamper-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "tamper")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/tamper")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: %s", err, out)
	}
	return bin, os.Chmod(dir, 0o755)
})

// buildTamper builds testdata/tamper, static, as a tool a sandbox can
// install.
func buildTamper(t *testing.T) sandbox.VerifiedTool {
	t.Helper()
	bin, err := tamperOnce()
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	return sandbox.VerifiedTool{Name: "tamper", Version: "test", Path: bin, SHA256: hex.EncodeToString(sum[:])}
}
