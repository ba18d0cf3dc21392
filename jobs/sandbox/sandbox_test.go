package sandbox_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/jobs/sandbox"
	"github.com/cairnhq/cairn/jobs/sandbox/sandboxtest"
)

// leakVar is set in the test process; no sandbox may see it.
const leakVar = "CAIRN_SANDBOX_TEST_WORKER_SECRET"

func TestMain(m *testing.M) {
	if os.Getenv(ownerEnv) != "" {
		runOwner()
	}
	os.Setenv(leakVar, "worker-only-value")
	sandboxtest.Main(m.Run)
}

type mode struct {
	name      string
	isolation sandbox.IsolationMode
}

var (
	plain    = mode{"plain", sandbox.NoIsolation}
	isolated = mode{"bwrap", sandbox.RequireNamespaces}
)

// bothModes runs a subtest per driver mode, skipping bwrap where it is not
// installed.
func bothModes(t *testing.T, f func(t *testing.T, m mode)) {
	t.Helper()
	for _, m := range []mode{plain, isolated} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			if m == isolated {
				requireBwrap(t)
			}
			f(t, m)
		})
	}
}

func requireBwrap(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed")
	}
}

type fixture struct {
	driver *sandbox.Local
	sbx    sandbox.Sandbox
	root   string
}

func setup(t *testing.T, m mode, spec sandbox.Spec, opts sandbox.LocalOptions) fixture {
	t.Helper()
	root := t.TempDir()
	opts.Isolation = m.isolation
	if opts.Base == "" {
		opts.Base = sandboxtest.Base()
	}
	d, err := sandbox.NewLocal(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st := d.Status(); !st.Ready {
		t.Fatalf("driver not ready: %s: %s", st.Reason, st.Detail)
	}
	if want := m == isolated; d.Isolated() != want {
		t.Fatalf("Isolated() = %v, want %v", d.Isolated(), want)
	}
	if spec.Name == "" {
		spec.Name = "run_test-plan-1"
	}
	sbx, err := d.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sbx.Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return fixture{driver: d, sbx: sbx, root: root}
}

// commandRunner is a Sandbox or a Session.
type commandRunner interface {
	Run(ctx context.Context, c sandbox.Command) (int, error)
}

// run runs a command to completion and fails the test on a Run error.
func run(t *testing.T, sbx commandRunner, c sandbox.Command) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	code, err := sbx.Run(context.Background(), c)
	if err != nil {
		t.Fatalf("Run(%q): %v (stderr %q)", c.Args, err, errOut.String())
	}
	return code, out.String(), errOut.String()
}

func sh(script string) sandbox.Command { return sandbox.Command{Args: []string{"sh", "-c", script}} }

func TestEnvironmentIsOnlyWhatTheSpecGives(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{Env: map[string]string{
			"TF_IN_AUTOMATION": "1",
			"SHARED":           "spec",
			"TF_VAR_my-var":    "not a shell identifier",
		}}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		code, out, stderr := run(t, f.sbx, sandbox.Command{
			Args: []string{"env"},
			Env:  map[string]string{"SHARED": "command", "ONLY_COMMAND": "yes"},
		})
		if code != 0 {
			t.Fatalf("env exited %d: %s", code, stderr)
		}
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			k, v, _ := strings.Cut(line, "=")
			got[k] = v
		}
		dir := filepath.Dir(f.sbx.WorkDir())
		want := map[string]string{
			"PATH":             filepath.Join(dir, "bin") + ":/usr/bin:/bin",
			"HOME":             filepath.Join(dir, "home"),
			"TMPDIR":           filepath.Join(dir, "tmp"),
			"PWD":              f.sbx.WorkDir(),
			"TF_IN_AUTOMATION": "1",
			"SHARED":           "command",
			"ONLY_COMMAND":     "yes",
			"TF_VAR_my-var":    "not a shell identifier",
			"CAIRN_SANDBOX_ID": f.sbx.ID(),
		}
		if len(got) != len(want) {
			t.Errorf("environment has %d variables, want %d: %v", len(got), len(want), got)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %q, want %q", k, got[k], v)
			}
		}
		if _, ok := got[leakVar]; ok {
			t.Errorf("worker variable %s leaked into the sandbox", leakVar)
		}
	})
}

func TestRunReportsExitStatusAndWorkingDirectory(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		if err := os.MkdirAll(filepath.Join(f.sbx.WorkDir(), "envs", "prod"), 0o700); err != nil {
			t.Fatal(err)
		}
		c := sh("pwd; exit 3")
		c.Dir = "envs/prod"
		code, out, _ := run(t, f.sbx, c)
		if code != 3 {
			t.Errorf("exit code %d, want 3", code)
		}
		if want := filepath.Join(f.sbx.WorkDir(), "envs", "prod"); strings.TrimSpace(out) != want {
			t.Errorf("pwd = %q, want %q", strings.TrimSpace(out), want)
		}
		// Killed by a signal reads like a shell reports it.
		if code, _, _ := run(t, f.sbx, sh("kill -9 $$")); code != 137 {
			t.Errorf("self-killed command exit code %d, want 137", code)
		}
	})
}

func TestRunRejectsEscapingDirsAndUnknownPrograms(t *testing.T) {
	t.Parallel()
	f := setup(t, plain, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base()})
	if err := os.Symlink("../home", filepath.Join(f.sbx.WorkDir(), "out")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []sandbox.Command{
		{Args: []string{"true"}, Dir: "../home"},
		{Args: []string{"true"}, Dir: "/"},
		{Args: []string{"true"}, Dir: "out"},
		{Args: []string{"true"}, Dir: "missing"},
		{Args: []string{"true"}, Env: map[string]string{"PATH": "/sbin"}},
		{Args: []string{"true"}, Env: map[string]string{"LD_LIBRARY_PATH": "/tmp"}},
		{Args: []string{""}},
		{},
	} {
		if _, err := f.sbx.Run(context.Background(), c); !errors.Is(err, sandbox.ErrInvalidSpec) {
			t.Errorf("Run(%+v) error %v, want ErrInvalidSpec", c, err)
		}
	}
	if _, err := f.sbx.Run(context.Background(), sandbox.Command{Args: []string{"no-such-tool"}}); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Run(no-such-tool) error %v, want exec.ErrNotFound", err)
	}
}

func TestCreateValidatesSpec(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d, err := sandbox.NewLocal(root, sandbox.LocalOptions{Base: sandboxtest.Base(), Isolation: sandbox.NoIsolation})
	if err != nil {
		t.Fatal(err)
	}
	hostFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(hostFile, []byte("cert"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, spec := range map[string]sandbox.Spec{
		"empty name":             {},
		"name with slash":        {Name: "../x"},
		"name with space":        {Name: "a b"},
		"leading dash":           {Name: "-x"},
		"name too long":          {Name: strings.Repeat("a", 65)},
		"PATH override":          {Name: "ok", Env: map[string]string{"PATH": "/tmp"}},
		"HOME override":          {Name: "ok", Env: map[string]string{"HOME": "/root"}},
		"key with =":             {Name: "ok", Env: map[string]string{"A=B": "c"}},
		"NUL value":              {Name: "ok", Env: map[string]string{"A": "b\x00c"}},
		"negative wallclock":     {Name: "ok", Limits: sandbox.Limits{WallClock: -time.Second}},
		"tiny nofile":            {Name: "ok", Limits: sandbox.Limits{MaxOpenFiles: 3}},
		"tiny memory":            {Name: "ok", Limits: sandbox.Limits{MaxMemoryBytes: 1 << 20}},
		"tiny process limit":     {Name: "ok", Limits: sandbox.Limits{MaxProcesses: 2}},
		"reserved marker":        {Name: "ok", Env: map[string]string{"CAIRN_SANDBOX_ID": "sbx_other"}},
		"LD_PRELOAD":             {Name: "ok", Env: map[string]string{"LD_PRELOAD": "/work/evil.so"}},
		"GLIBC_TUNABLES":         {Name: "ok", Env: map[string]string{"GLIBC_TUNABLES": "glibc.malloc.check=3"}},
		"escaping file key":      {Name: "ok", ReadOnlyFiles: map[string]string{"../ca.pem": hostFile}},
		"absolute file key":      {Name: "ok", ReadOnlyFiles: map[string]string{"/etc/ca.pem": hostFile}},
		"relative host file":     {Name: "ok", ReadOnlyFiles: map[string]string{"ca.pem": "ca.pem"}},
		"relative read-only dir": {Name: "ok", ReadOnlyDirs: []string{"mirror"}},
		"root as read-only dir":  {Name: "ok", ReadOnlyDirs: []string{"/"}},
		"unclean read-only dir":  {Name: "ok", ReadOnlyDirs: []string{"/srv/../etc"}},
		"missing host file":      {Name: "ok", ReadOnlyFiles: map[string]string{"ca.pem": hostFile + ".missing"}},
		"directory as file":      {Name: "ok", ReadOnlyFiles: map[string]string{"ca.pem": filepath.Dir(hostFile)}},
	} {
		if _, err := d.Create(context.Background(), spec); !errors.Is(err, sandbox.ErrInvalidSpec) {
			t.Errorf("%s: Create error %v, want ErrInvalidSpec", name, err)
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("failed creates left %d entries in the root", len(entries))
	}
}

func TestCreateMakesPrivateUniqueDirectories(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		other, err := f.driver.Create(context.Background(), sandbox.Spec{Name: "run_test-plan-2"})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Destroy(context.Background())
		idPattern := regexp.MustCompile(`^sbx_[a-z2-7]{26}$`)
		if fi, err := os.Stat(f.root); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("sandbox root: %v, %v; want mode 700", fi, err)
		}
		for _, s := range []sandbox.Sandbox{f.sbx, other} {
			if !idPattern.MatchString(s.ID()) {
				t.Errorf("ID %q does not match %s", s.ID(), idPattern)
			}
			if want := filepath.Join(f.root, s.ID(), "work"); s.WorkDir() != want {
				t.Errorf("WorkDir %q, want %q", s.WorkDir(), want)
			}
			// Nobody but the owner lists or writes them (a root worker's
			// sandbox user may pass through its directory).
			for _, p := range []string{filepath.Join(f.root, s.ID()), filepath.Join(f.root, s.ID(), "work")} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm()&0o066 != 0 {
					t.Errorf("%s has mode %o, readable or writable by others", p, fi.Mode().Perm())
				}
			}
		}
		if f.sbx.ID() == other.ID() {
			t.Errorf("two sandboxes share ID %s", f.sbx.ID())
		}
	})
}

// marker returns a sleep duration unique to one test, so its processes can be
// found in /proc whatever PID namespace they live in.
func marker() string { return strconv.Itoa(1_000_000 + rand.IntN(8_000_000)) }

// processesWith returns the PIDs whose command line contains "sleep <m>".
func processesWith(t testing.TB, m string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) == 2 && filepath.Base(args[0]) == "sleep" && args[1] == m {
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitForProcesses(t *testing.T, m string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(processesWith(t, m)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %d processes sleeping %s", n, m)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// requireGone fails unless every "sleep <m>" process disappears shortly
// (a SIGKILLed process takes a moment to leave /proc).
func requireGone(t *testing.T, m string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		pids := processesWith(t, m)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of the command tree survived", pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runAsync starts Run in the background and returns its result channel.
func runAsync(ctx context.Context, sbx sandbox.Sandbox, c sandbox.Command) <-chan error {
	done := make(chan error, 1)
	go func() {
		code, err := sbx.Run(ctx, c)
		if err == nil || code != -1 {
			err = fmt.Errorf("Run returned code %d, error %v; want -1 and an error", code, err)
		}
		done <- err
	}()
	return done
}

func TestCancelKillsTheWholeProcessTree(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base(), KillGrace: 200 * time.Millisecond})
		mk := marker()
		ctx, cancel := context.WithCancel(context.Background())
		// The inner shell ignores SIGTERM, so the tree survives the grace
		// period and needs the SIGKILL.
		done := runAsync(ctx, f.sbx, sh(fmt.Sprintf(`sleep %s & sh -c 'trap "" TERM; sleep %s & wait' & wait`, mk, mk)))
		waitForProcesses(t, mk, 2)
		start := time.Now()
		cancel()
		err := <-done
		if !errors.Is(err, sandbox.ErrCanceled) {
			t.Fatalf("error %v, want ErrCanceled", err)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v does not carry the context's cause", err)
		}
		if elapsed := time.Since(start); elapsed > 3*time.Second {
			t.Errorf("cancel took %s", elapsed)
		}
		requireGone(t, mk)
	})
}

func TestCancelSendsSIGTERMToTheCommandFirst(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base(), KillGrace: 10 * time.Second})
		mk := marker()
		var out syncBuffer
		ctx, cancel := context.WithCancel(context.Background())
		c := sh(fmt.Sprintf(`trap 'sleep 0.5; echo stopping cleanly; exit 7' TERM; sleep %s & wait`, mk))
		c.Stdout = &out
		done := runAsync(ctx, f.sbx, c)
		waitForProcesses(t, mk, 1)
		start := time.Now()
		cancel()
		if err := <-done; !errors.Is(err, sandbox.ErrCanceled) {
			t.Fatalf("error %v, want ErrCanceled", err)
		}
		if !strings.Contains(out.String(), "stopping cleanly") {
			t.Errorf("the command never saw SIGTERM; output %q", out.String())
		}
		// It stopped on SIGTERM, well before the 10s grace ran out.
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("graceful stop took %s", elapsed)
		}
		requireGone(t, mk)
	})
}

func TestWallClockLimitTimesOut(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{Limits: sandbox.Limits{WallClock: 300 * time.Millisecond}}, sandbox.LocalOptions{Base: sandboxtest.Base(), KillGrace: time.Second})
		mk := marker()
		start := time.Now()
		code, err := f.sbx.Run(context.Background(), sandbox.Command{Args: []string{"sleep", mk}})
		if !errors.Is(err, sandbox.ErrTimedOut) || code != -1 {
			t.Fatalf("Run = %d, %v; want -1, ErrTimedOut", code, err)
		}
		if errors.Is(err, sandbox.ErrCanceled) {
			t.Errorf("timeout reported as cancellation: %v", err)
		}
		if elapsed := time.Since(start); elapsed < 300*time.Millisecond || elapsed > 3*time.Second {
			t.Errorf("Run took %s with a 300ms wall clock", elapsed)
		}
		requireGone(t, mk)
	})
}

func TestProcessesLeftBehindAreKilled(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		mk := marker()
		start := time.Now()
		code, _, _ := run(t, f.sbx, sh(fmt.Sprintf("sleep %s & echo started", mk)))
		if code != 0 {
			t.Fatalf("exit code %d", code)
		}
		if elapsed := time.Since(start); elapsed > 3*time.Second {
			t.Errorf("Run waited %s for a background process", elapsed)
		}
		requireGone(t, mk)
	})
}

func TestResourceLimitsApply(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{Limits: sandbox.Limits{MaxOpenFiles: 321, MaxFileBytes: 1 << 20, MaxCPUSeconds: 77}}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		_, out, _ := run(t, f.sbx, sandbox.Command{Args: []string{"cat", "/proc/self/limits"}})
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^Max open files\s+321\s+321\s`),
			regexp.MustCompile(`(?m)^Max file size\s+1048576\s+1048576\s`),
			regexp.MustCompile(`(?m)^Max cpu time\s+77\s+77\s`),
			regexp.MustCompile(`(?m)^Max core file size\s+0\s+0\s`),
		} {
			if !want.MatchString(out) {
				t.Errorf("limits do not match %s:\n%s", want, out)
			}
		}
		// A write past MaxFileBytes fails (SIGXFSZ) and the file stops at the limit.
		code, _, _ := run(t, f.sbx, sh("head -c 2097152 /dev/zero > big"))
		if code == 0 {
			t.Error("writing 2 MiB under a 1 MiB file limit succeeded")
		}
		fi, err := os.Stat(filepath.Join(f.sbx.WorkDir(), "big"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 1<<20 {
			t.Errorf("file grew to %d bytes past the 1 MiB limit", fi.Size())
		}
	})
}

func TestDataLimitApplies(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{Limits: sandbox.Limits{MaxDataBytes: 256 << 20}}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		_, out, _ := run(t, f.sbx, sandbox.Command{Args: []string{"cat", "/proc/self/limits"}})
		if want := regexp.MustCompile(`(?m)^Max data size\s+268435456\s+268435456\s`); !want.MatchString(out) {
			t.Errorf("limits do not match %s:\n%s", want, out)
		}
		// A process that asks for more than the ceiling is refused.
		code, _, _ := run(t, f.sbx, sh(`dd if=/dev/zero of=/dev/null bs=512M count=1 2>/dev/null`))
		if code == 0 {
			t.Error("a 512 MiB buffer under a 256 MiB ceiling was allocated")
		}
		// Without it the data size is not limited.
		g := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		_, out, _ = run(t, g.sbx, sandbox.Command{Args: []string{"cat", "/proc/self/limits"}})
		if want := regexp.MustCompile(`(?m)^Max data size\s+unlimited\s+unlimited\s`); !want.MatchString(out) {
			t.Errorf("limits do not match %s:\n%s", want, out)
		}
	})
}

func TestDefaultFileLimitAllowsLargeStateFiles(t *testing.T) {
	t.Parallel()
	f := setup(t, plain, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base()})
	code, _, stderr := run(t, f.sbx, sh("head -c 104857600 /dev/zero > state && wc -c < state"))
	if code != 0 {
		t.Fatalf("writing 100 MB under the default limits exited %d: %s", code, stderr)
	}
}

func TestBwrapHidesTheHostAndKeepsWritesInside(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	f := setup(t, isolated, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base()})
	neighbour, err := f.driver.Create(context.Background(), sandbox.Spec{Name: "neighbour"})
	if err != nil {
		t.Fatal(err)
	}
	defer neighbour.Destroy(context.Background())
	hostDir := t.TempDir()
	secret := filepath.Join(hostDir, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(neighbour.WorkDir(), "state"), []byte("neighbour"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Positive control: the work directory is writable and shared with the host.
	if code, _, stderr := run(t, f.sbx, sh("echo inside > made-inside")); code != 0 {
		t.Fatalf("writing the work directory exited %d: %s", code, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(f.sbx.WorkDir(), "made-inside")); err != nil || string(b) != "inside\n" {
		t.Fatalf("file written inside: %q, %v", b, err)
	}

	for _, script := range []string{
		"cat " + secret,
		"ls /root",
		"cat " + filepath.Join(neighbour.WorkDir(), "state"),
		"echo x > " + filepath.Join(hostDir, "planted"),
		"echo x > /usr/planted",
		"echo x > /etc/planted",
		"echo x > /planted",
	} {
		code, out, _ := run(t, f.sbx, sh(script))
		if code == 0 {
			t.Errorf("%q succeeded inside the sandbox (output %q)", script, out)
		}
	}
	// The sandbox root's path exists inside (as mount points in the
	// sandbox's own tmp), but writing there never reaches the host's root.
	_, _, _ = run(t, f.sbx, sh("mkdir "+filepath.Join(f.root, "planted")))
	for _, p := range []string{filepath.Join(hostDir, "planted"), "/usr/planted", "/etc/planted", "/planted", filepath.Join(f.root, "planted")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists on the host after the sandbox tried to write it", p)
			_ = os.RemoveAll(p)
		}
	}
	// /tmp is the sandbox's own: writable, on no host path, unseen by its
	// neighbour. TMPDIR is its tmp directory on disk.
	if code, _, stderr := run(t, f.sbx, sh("echo t > /tmp/scratch && cat /tmp/scratch && echo d > $TMPDIR/on-disk")); code != 0 {
		t.Errorf("writing /tmp failed: %s", stderr)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(f.sbx.WorkDir()), "tmp", "on-disk")); err != nil {
		t.Errorf("TMPDIR inside is not the sandbox tmp directory: %v", err)
	}
	if code, out, _ := run(t, neighbour, sh("cat /tmp/scratch")); code == 0 {
		t.Errorf("the neighbour read the sandbox's /tmp: %q", out)
	}
}

func TestReadOnlyFiles(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		host := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(host, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		f := setup(t, m, sandbox.Spec{ReadOnlyFiles: map[string]string{"tls/ca.pem": host}}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		path := f.sbx.FilePath("tls/ca.pem")
		if !strings.HasPrefix(path, filepath.Dir(f.sbx.WorkDir())+"/") {
			t.Errorf("FilePath %q is outside the sandbox directory", path)
		}
		_, out, _ := run(t, f.sbx, sandbox.Command{Args: []string{"cat", path}})
		if out != "-----BEGIN CERTIFICATE-----\n" {
			t.Errorf("file read inside = %q", out)
		}
		code, _, _ := run(t, f.sbx, sh("echo tampered > "+path))
		if m == isolated && code == 0 {
			t.Error("writing a read-only file succeeded under bwrap")
		}
		if b, _ := os.ReadFile(host); string(b) != "-----BEGIN CERTIFICATE-----\n" {
			t.Errorf("host file changed to %q", b)
		}
	})
}

// fakeMirror writes a tool script into a mirror laid out like `make tools`
// and returns the mirror directory and the script's SHA-256.
func fakeMirror(t *testing.T, name, version, sums string) (mirror, sum string) {
	t.Helper()
	mirror = t.TempDir()
	dir := filepath.Join(mirror, name, version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := []byte("#!/bin/sh\necho \"" + name + " " + version + " $*\"\n")
	if err := os.WriteFile(filepath.Join(dir, name), script, 0o755); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(script)
	sum = hex.EncodeToString(h[:])
	if sums == "" {
		sums = sum + "  " + name + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums), 0o644); err != nil {
		t.Fatal(err)
	}
	return mirror, sum
}

func regularFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return files
}

func TestToolCacheRejectsChecksumMismatch(t *testing.T) {
	t.Parallel()
	wrong := strings.Repeat("ab", 32)
	for name, sums := range map[string]string{
		"wrong digest":     wrong + "  faketool\n",
		"no entry":         wrong + "  othertool\n",
		"not a digest":     "abc  faketool\n",
		"conflicting rows": wrong + "  faketool\n" + strings.Repeat("cd", 32) + "  faketool\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mirror, _ := fakeMirror(t, "faketool", "1.0.0", sums)
			cache := t.TempDir()
			_, err := sandbox.NewToolCache(mirror, cache).Verified(context.Background(), "faketool", "1.0.0")
			if !errors.Is(err, sandbox.ErrChecksumMismatch) {
				t.Fatalf("Verified error %v, want ErrChecksumMismatch", err)
			}
			if files := regularFiles(t, cache); len(files) != 0 {
				t.Errorf("mismatch left files in the cache: %v", files)
			}
		})
	}
}

func TestToolCacheRetriesAfterFailure(t *testing.T) {
	t.Parallel()
	mirror, sum := fakeMirror(t, "faketool", "1.0.0", strings.Repeat("ab", 32)+"  faketool\n")
	c := sandbox.NewToolCache(mirror, t.TempDir())
	if _, err := c.Verified(context.Background(), "faketool", "1.0.0"); !errors.Is(err, sandbox.ErrChecksumMismatch) {
		t.Fatalf("error %v, want ErrChecksumMismatch", err)
	}
	if err := os.WriteFile(filepath.Join(mirror, "faketool", "1.0.0", "SHA256SUMS"), []byte(sum+" *faketool\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool, err := c.Verified(context.Background(), "faketool", "1.0.0")
	if err != nil {
		t.Fatalf("after repairing the mirror: %v", err)
	}
	if tool.SHA256 != sum {
		t.Errorf("SHA256 %s, want %s", tool.SHA256, sum)
	}
}

func TestToolCacheValidatesNames(t *testing.T) {
	t.Parallel()
	c := sandbox.NewToolCache(t.TempDir(), t.TempDir())
	for _, nv := range [][2]string{{"../tofu", "1.0.0"}, {"tofu", "../../etc"}, {"", "1"}, {"tofu", ""}} {
		if _, err := c.Verified(context.Background(), nv[0], nv[1]); !errors.Is(err, sandbox.ErrInvalidSpec) {
			t.Errorf("Verified(%q, %q) error %v, want ErrInvalidSpec", nv[0], nv[1], err)
		}
	}
}

func TestToolCacheVerifiesOnceAndMemoizes(t *testing.T) {
	t.Parallel()
	mirror, sum := fakeMirror(t, "faketool", "1.2.3", "")
	cacheDir := t.TempDir()
	c := sandbox.NewToolCache(mirror, cacheDir)
	var wg sync.WaitGroup
	tools := make([]sandbox.VerifiedTool, 8)
	errs := make([]error, 8)
	for i := range tools {
		wg.Go(func() { tools[i], errs[i] = c.Verified(context.Background(), "faketool", "1.2.3") })
	}
	wg.Wait()
	for i := range tools {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if tools[i] != tools[0] {
			t.Errorf("concurrent calls returned %+v and %+v", tools[i], tools[0])
		}
	}
	want := filepath.Join(cacheDir, "faketool", "1.2.3", sum)
	if tools[0].Path != want || tools[0].SHA256 != sum || tools[0].Name != "faketool" || tools[0].Version != "1.2.3" {
		t.Errorf("tool %+v, want path %s", tools[0], want)
	}
	fi, err := os.Stat(want)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o555 {
		t.Errorf("verified copy has mode %o, want 555", fi.Mode().Perm())
	}
	if files := regularFiles(t, cacheDir); len(files) != 1 {
		t.Errorf("cache holds %v, want only the verified copy", files)
	}
	// Breaking the mirror now must not matter: the result is memoized.
	if err := os.WriteFile(filepath.Join(mirror, "faketool", "1.2.3", "faketool"), []byte("changed"), 0o755); err != nil {
		t.Fatal(err)
	}
	again, err := c.Verified(context.Background(), "faketool", "1.2.3")
	if err != nil || again != tools[0] {
		t.Errorf("second Verified = %+v, %v; want the memoized %+v", again, err, tools[0])
	}
	// A new cache (a restarted worker) re-hashes the cached copy and
	// refuses one that was altered.
	if err := os.Chmod(want, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(want, []byte("tampered"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.NewToolCache(mirror, cacheDir).Verified(context.Background(), "faketool", "1.2.3"); !errors.Is(err, sandbox.ErrChecksumMismatch) {
		t.Errorf("restarted cache with tampered copy and changed mirror: %v, want ErrChecksumMismatch", err)
	}
	if _, err := os.Stat(want); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tampered cached copy still present: %v", err)
	}
}

func TestInstalledToolRunsInsideTheSandbox(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		mirror, sum := fakeMirror(t, "faketool", "1.0.0", "")
		tool, err := sandbox.NewToolCache(mirror, t.TempDir()).Verified(context.Background(), "faketool", "1.0.0")
		if err != nil {
			t.Fatal(err)
		}
		f := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		if err := f.sbx.InstallTool(context.Background(), tool); err != nil {
			t.Fatal(err)
		}
		if err := f.sbx.InstallTool(context.Background(), tool); err != nil {
			t.Errorf("installing the same tool again: %v", err)
		}
		code, out, stderr := run(t, f.sbx, sandbox.Command{Args: []string{"faketool", "plan", "-input=false"}})
		if code != 0 || out != "faketool 1.0.0 plan -input=false\n" {
			t.Errorf("faketool exited %d with %q (stderr %q)", code, out, stderr)
		}
		binPath := filepath.Join(filepath.Dir(f.sbx.WorkDir()), "bin", "faketool")
		_, out, _ = run(t, f.sbx, sh("command -v faketool"))
		if strings.TrimSpace(out) != binPath {
			t.Errorf("faketool resolves to %q, want %q", strings.TrimSpace(out), binPath)
		}
		if m == plain {
			// Linked, not copied.
			a, errA := os.Stat(binPath)
			b, errB := os.Stat(tool.Path)
			if errA != nil || errB != nil || !os.SameFile(a, b) {
				t.Errorf("bin/faketool is not the cached file (%v, %v)", errA, errB)
			}
		}
		if m == isolated {
			if code, _, _ := run(t, f.sbx, sh("echo tampered > "+binPath)); code == 0 {
				t.Error("the sandbox could overwrite the installed tool")
			}
		}
		if err := f.sbx.Destroy(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Destroying the sandbox leaves the shared verified copy intact.
		fi, err := os.Stat(tool.Path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o555 {
			t.Errorf("cached tool mode changed to %o", fi.Mode().Perm())
		}
		b, _ := os.ReadFile(tool.Path)
		if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
			t.Error("cached tool content changed")
		}
	})
}

func TestDestroyRemovesEverythingAndIsIdempotent(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		// Read-only directories like the ones provider caches leave.
		if code, _, stderr := run(t, f.sbx, sh("mkdir -p .terraform/providers/x && echo p > .terraform/providers/x/bin && chmod 0500 .terraform/providers/x .terraform/providers && chmod 0400 .terraform/providers/x/bin")); code != 0 {
			t.Fatalf("setup exited %d: %s", code, stderr)
		}
		dir := filepath.Dir(f.sbx.WorkDir())
		for range 2 {
			if err := f.sbx.Destroy(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("sandbox directory still exists: %v", err)
		}
		if _, err := f.sbx.Run(context.Background(), sandbox.Command{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrDestroyed) {
			t.Errorf("Run after Destroy: %v, want ErrDestroyed", err)
		}
	})
}

func TestDestroyStopsRunningCommands(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		// A long grace shows Destroy does not wait for it.
		f := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base(), KillGrace: time.Minute})
		mk := marker()
		done := runAsync(context.Background(), f.sbx, sh(fmt.Sprintf("trap '' TERM; sleep %s & sleep %s", mk, mk)))
		waitForProcesses(t, mk, 2)
		start := time.Now()
		if err := f.sbx.Destroy(context.Background()); err != nil {
			t.Fatal(err)
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("Destroy took %s", elapsed)
		}
		err := <-done
		if !errors.Is(err, sandbox.ErrCanceled) || !errors.Is(err, sandbox.ErrDestroyed) {
			t.Errorf("Run error %v, want ErrCanceled and ErrDestroyed", err)
		}
		requireGone(t, mk)
		if _, err := os.Stat(filepath.Dir(f.sbx.WorkDir())); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("sandbox directory still exists: %v", err)
		}
	})
}

// TestIsolationFailsClosed: with default options a driver that cannot
// create namespaces refuses every sandbox and says why; only the explicit
// opt-out runs without them.
func TestIsolationFailsClosed(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "bwrap")
	broken := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2; exit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A bwrap that runs the command without making namespaces (a shim, a
	// wrapper that drops its options): the command works, isolation does not.
	pretend := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(pretend, []byte("#!/bin/sh\nwhile [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		opts   sandbox.LocalOptions
		reason string
	}{
		"bwrap that does not isolate":     {sandbox.LocalOptions{Base: sandboxtest.Base(), BwrapPath: pretend}, "bwrap_unusable"},
		"default options, bwrap missing":  {sandbox.LocalOptions{Base: sandboxtest.Base(), BwrapPath: missing}, "bwrap_not_found"},
		"required, bwrap missing":         {sandbox.LocalOptions{Base: sandboxtest.Base(), Isolation: sandbox.RequireNamespaces, BwrapPath: missing}, "bwrap_not_found"},
		"default options, bwrap unusable": {sandbox.LocalOptions{Base: sandboxtest.Base(), BwrapPath: broken}, "bwrap_unusable"},
		"default options, not executable": {sandbox.LocalOptions{Base: sandboxtest.Base(), BwrapPath: t.TempDir()}, "bwrap_not_found"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			d, err := sandbox.NewLocal(root, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			st := d.Status()
			if st.Ready || st.Reason != tc.reason || st.Detail == "" {
				t.Errorf("Status %+v, want not ready with reason %s and a detail", st, tc.reason)
			}
			if st.Profile.Isolation != sandbox.IsolationUnavailable || st.Profile.Reason != tc.reason {
				t.Errorf("profile %+v, want isolation unavailable", st.Profile)
			}
			if d.Isolated() {
				t.Error("Isolated() without working namespaces")
			}
			if _, err := d.Create(context.Background(), sandbox.Spec{Name: "x"}); !errors.Is(err, sandbox.ErrIsolationUnavailable) {
				t.Errorf("Create: %v, want ErrIsolationUnavailable", err)
			}
			// Nothing of a refused sandbox (or of the probe) is left behind.
			entries, _ := os.ReadDir(root)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), "sbx_") || strings.HasPrefix(e.Name(), ".new-") {
					t.Errorf("refused create left %s", e.Name())
				}
			}
		})
	}
	t.Run("explicit opt-out", func(t *testing.T) {
		t.Parallel()
		d, err := sandbox.NewLocal(t.TempDir(), sandbox.LocalOptions{Base: sandboxtest.Base(), Isolation: sandbox.NoIsolation, BwrapPath: missing})
		if err != nil {
			t.Fatal(err)
		}
		st := d.Status()
		if !st.Ready || d.Isolated() || d.Name() != "local" || st.Profile.Isolation != sandbox.IsolationNone {
			t.Errorf("opt-out: Status %+v, Isolated %v", st, d.Isolated())
		}
		sbx, err := d.Create(context.Background(), sandbox.Spec{Name: "x"})
		if err != nil {
			t.Fatalf("Create without namespaces, explicitly: %v", err)
		}
		defer sbx.Destroy(context.Background())
		if p := sbx.Profile(); p.Isolation != sandbox.IsolationNone || len(p.Namespaces) != 0 || p.Processes.Mechanism != sandbox.MechanismNone {
			t.Errorf("unisolated sandbox profile %+v", p)
		}
	})
	if _, err := sandbox.NewLocal("relative/root", sandbox.LocalOptions{Base: sandboxtest.Base()}); err == nil {
		t.Error("NewLocal accepted a relative root")
	}
	if _, err := sandbox.NewLocal(t.TempDir(), sandbox.LocalOptions{Base: sandboxtest.Base(), Defaults: sandbox.Limits{MaxMemoryBytes: 1}}); err == nil {
		t.Error("NewLocal accepted a 1-byte memory ceiling")
	}
}

// syncBuffer is a bytes.Buffer safe for the writer goroutine and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// benchDriver is a driver in mode m for a benchmark.
func benchDriver(b *testing.B, m mode) *sandbox.Local {
	b.Helper()
	if m == isolated {
		requireBwrap(b)
	}
	d, err := sandbox.NewLocal(b.TempDir(), sandbox.LocalOptions{Base: sandboxtest.Base(), Isolation: m.isolation})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func BenchmarkCreateRunDestroy(b *testing.B) {
	for _, m := range []mode{plain, isolated} {
		b.Run(m.name, func(b *testing.B) {
			d := benchDriver(b, m)
			ctx := context.Background()
			for b.Loop() {
				sbx, err := d.Create(ctx, sandbox.Spec{Name: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				if code, err := sbx.Run(ctx, sandbox.Command{Args: []string{"true"}}); err != nil || code != 0 {
					b.Fatalf("Run = %d, %v", code, err)
				}
				if err := sbx.Destroy(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRun is one command in a sandbox that already exists: what each
// of a phase's tofu commands pays to start and end (bwrap's namespaces and
// mounts, cairn-sandbox-exec), against running the program directly.
func BenchmarkRun(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, m := range []mode{plain, isolated} {
		b.Run(m.name, func(b *testing.B) {
			ctx := context.Background()
			sbx, err := benchDriver(b, m).Create(ctx, sandbox.Spec{Name: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			defer sbx.Destroy(ctx)
			for b.Loop() {
				if code, err := sbx.Run(ctx, sandbox.Command{Args: []string{"true"}}); err != nil || code != 0 {
					b.Fatalf("Run = %d, %v", code, err)
				}
			}
		})
	}
}
