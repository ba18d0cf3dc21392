package sandbox_test

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/jobs/sandbox"
	"github.com/cairnhq/cairn/jobs/sandbox/sandboxtest"
)

// These tests check what a sandbox can see and use by looking from inside
// it, never by reading the flags the driver passes.

// TestNamespacesAreTheSandboxsOwn compares the namespaces a command is in
// with the test process's: PID, mount, IPC and UTS differ; the network is
// shared on purpose.
func TestNamespacesAreTheSandboxsOwn(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	f := setup(t, isolated, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base()})
	kinds := []string{"pid", "mnt", "ipc", "uts", "net"}
	script := ""
	for _, k := range kinds {
		script += "readlink /proc/self/ns/" + k + "; "
	}
	code, out, stderr := run(t, f.sbx, sh(script))
	if code != 0 {
		t.Fatalf("reading namespaces exited %d: %s", code, stderr)
	}
	inside := strings.Fields(out)
	if len(inside) != len(kinds) {
		t.Fatalf("namespaces inside: %q", out)
	}
	for i, k := range kinds {
		host, err := os.Readlink("/proc/self/ns/" + k)
		if err != nil {
			t.Fatal(err)
		}
		if shared := inside[i] == host; shared != (k == "net") {
			t.Errorf("%s namespace inside %s, host %s (shared %v)", k, inside[i], host, shared)
		}
	}
	p := f.sbx.Profile()
	for _, want := range []string{"pid", "mount", "ipc", "uts"} {
		if !contains(p.Namespaces, want) {
			t.Errorf("profile namespaces %v lack %s", p.Namespaces, want)
		}
	}
	if p.Isolation != sandbox.IsolationNamespaces || p.Network != "shared" {
		t.Errorf("profile %+v", p)
	}
}

// TestProcShowsOnlyTheSandboxsProcesses runs a process on the host with a
// secret in its environment, then reads every /proc/*/environ and lists
// /proc from inside. Without namespaces the same script finds the secret,
// which shows the check can fail.
func TestProcShowsOnlyTheSandboxsProcesses(t *testing.T) {
	t.Parallel()
	mk := marker()
	secret := "neighbour-secret-" + mk
	neighbour := exec.Command("sleep", mk)
	neighbour.Env = []string{"WORKER_SECRET=" + secret}
	if err := neighbour.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = neighbour.Process.Kill(); _ = neighbour.Wait() })
	waitForProcesses(t, mk, 1)
	script := `for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f"; echo; done 2>/dev/null; echo pids:; ls /proc | grep -E '^[0-9]+$'`
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		_, out, _ := run(t, f.sbx, sh(script))
		i := strings.LastIndex(out, "pids:")
		seen, pidList := out[:i], out[i+len("pids:"):]
		sawSecret := strings.Contains(seen, secret)
		pids := strings.Fields(pidList)
		if m == plain {
			if !sawSecret || !strings.Contains(seen, "sleep "+mk) {
				t.Fatal("control: without namespaces the sandbox should see the neighbour and its environment")
			}
			return
		}
		if sawSecret {
			t.Fatal("the sandbox read another process's environment")
		}
		if strings.Contains(seen, "sleep "+mk) {
			t.Error("the sandbox sees the neighbour process")
		}
		// bwrap's init, the shell, ls and grep at most.
		if len(pids) == 0 || len(pids) > 4 {
			t.Errorf("/proc inside lists %d processes: %v", len(pids), pids)
		}
	})
}

// TestSandboxSeesNoDataDirToolCacheOrNeighbour lays out a data directory
// like a worker's (secrets, blobs, the tool cache, the sandbox root) and
// checks a sandbox reaches none of it but its own directory and its tool,
// and writes nowhere else.
func TestSandboxSeesNoDataDirToolCacheOrNeighbour(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	data := t.TempDir()
	for name, body := range map[string]string{"secrets.env": "AUTH_SECRET=data-dir-secret", "blobs/obj": "sealed"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(data, name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mirror, _ := fakeMirror(t, "faketool", "1.0.0", "")
	cache := sandbox.NewToolCache(mirror, filepath.Join(data, "toolcache"))
	tool, err := cache.Verified(context.Background(), "faketool", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	otherMirror, _ := fakeMirror(t, "othertool", "2.0.0", "")
	other, err := sandbox.NewToolCache(otherMirror, filepath.Join(data, "toolcache")).Verified(context.Background(), "othertool", "2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(data, "sandboxes")
	d, err := sandbox.NewLocal(root, sandbox.LocalOptions{Base: sandboxtest.Base()})
	if err != nil {
		t.Fatal(err)
	}
	if st := d.Status(); !st.Ready {
		t.Fatalf("driver not ready: %+v", st)
	}
	sbx, err := d.Create(context.Background(), sandbox.Spec{Name: "inside"})
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Destroy(context.Background())
	neighbour, err := d.Create(context.Background(), sandbox.Spec{Name: "neighbour"})
	if err != nil {
		t.Fatal(err)
	}
	defer neighbour.Destroy(context.Background())
	if err := os.WriteFile(filepath.Join(neighbour.WorkDir(), "state"), []byte("neighbour state"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sbx.InstallTool(context.Background(), tool); err != nil {
		t.Fatal(err)
	}

	// Positive controls: its own directory and its tool work.
	if code, out, stderr := run(t, sbx, sh("faketool hi && echo own > own && cat own")); code != 0 || !strings.Contains(out, "faketool 1.0.0 hi") {
		t.Fatalf("own tool and directory: %d %q %q", code, out, stderr)
	}

	_, listing, _ := run(t, sbx, sh("ls -a "+data+"; ls -a "+root))
	for _, name := range []string{"secrets.env", "blobs", "toolcache", filepath.Base(filepath.Dir(neighbour.WorkDir()))} {
		if strings.Contains(listing, name) {
			t.Errorf("the sandbox lists %s:\n%s", name, listing)
		}
	}
	for _, script := range []string{
		"cat " + filepath.Join(data, "secrets.env"),
		"cat " + filepath.Join(data, "blobs", "obj"),
		"ls " + filepath.Join(data, "toolcache"),
		"cat " + tool.Path,
		"cat " + other.Path,
		"cat " + filepath.Join(neighbour.WorkDir(), "state"),
		"ls " + filepath.Dir(neighbour.WorkDir()),
		"echo x > " + filepath.Join(neighbour.WorkDir(), "planted"),
		"echo x > " + filepath.Join(filepath.Dir(sbx.WorkDir()), "bin", "faketool"),
	} {
		if code, out, _ := run(t, sbx, sh(script)); code == 0 {
			t.Errorf("%q succeeded inside the sandbox (output %q)", script, out)
		}
	}
	// The data directory's path exists inside only as empty directories of
	// the sandbox's own (writable when they lie in its private /tmp and the
	// worker is not root): whatever it writes there never reaches the host.
	_, _, _ = run(t, sbx, sh("echo x > "+filepath.Join(data, "planted")+"; echo x > "+filepath.Join(root, "planted")))
	for _, p := range []string{filepath.Join(data, "planted"), filepath.Join(root, "planted"), filepath.Join(neighbour.WorkDir(), "planted")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists on the host", p)
		}
	}
	if b, _ := os.ReadFile(tool.Path); !strings.Contains(string(b), "faketool") {
		t.Errorf("the cached tool changed: %q", b)
	}

	// Control: without namespaces the same reads succeed, so the checks
	// above can fail.
	plainDriver, err := sandbox.NewLocal(filepath.Join(t.TempDir(), "sandboxes"), sandbox.LocalOptions{Base: sandboxtest.Base(), Isolation: sandbox.NoIsolation})
	if err != nil {
		t.Fatal(err)
	}
	exposed, err := plainDriver.Create(context.Background(), sandbox.Spec{Name: "control"})
	if err != nil {
		t.Fatal(err)
	}
	defer exposed.Destroy(context.Background())
	if code, out, _ := run(t, exposed, sh("cat "+filepath.Join(data, "secrets.env"))); code != 0 || !strings.Contains(out, "data-dir-secret") {
		t.Errorf("control: an unisolated sandbox should read the data directory (%d %q)", code, out)
	}
}

// TestTmpfsMountsAreBounded writes 64 MiB into each memory-backed file
// system a command can reach: none but /tmp (128 MiB) may take it, since
// tmpfs pages are memory that no rlimit counts. bwrap's own /dev is
// writable by a non-root worker's commands unless made read-only, so the
// test runs as both.
func TestTmpfsMountsAreBounded(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	f := setup(t, isolated, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base()})
	script := `for d in /dev /dev/shm /tmp /; do
  if dd if=/dev/zero of=$d/fill bs=1M count=64 2>/dev/null; then echo "filled $d"; else echo "bounded $d"; fi; rm -f $d/fill
done
echo x > /dev/null && head -c 4 /dev/urandom | wc -c && echo x > /dev/shm/small && echo devices-work`
	_, out, stderr := run(t, f.sbx, sh(script))
	for _, want := range []string{"bounded /dev\n", "bounded /dev/shm\n", "filled /tmp\n", "bounded /\n", "devices-work\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s%s", want, out, stderr)
		}
	}
	alsoAsNobody(t)
}

// forkScript starts up to n sleeping processes, recording how many it got,
// and stops at the first failed fork (dash exits when it cannot fork). It
// is bounded, so a missing limit fails the test instead of the host.
func forkScript(n int, mk string) string {
	return fmt.Sprintf(`i=0; while [ $i -lt %d ]; do sleep %s & i=$((i+1)); echo $i > count; done; echo all-started`, n, mk)
}

// TestForkBombIsStoppedByTheProcessLimit runs two sandboxes that each try
// to start 400 processes under a 64-task limit, at the same time: each is
// stopped near 64 (so neither shares the other's budget), as root too, and
// the worker can still start processes.
func TestForkBombIsStoppedByTheProcessLimit(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	const limit = 64
	d, err := sandbox.NewLocal(t.TempDir(), sandbox.LocalOptions{Base: sandboxtest.Base(), KillGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mk := marker()
	var wg sync.WaitGroup
	counts := make([]int, 2)
	outputs := make([]string, 2)
	for i := range counts {
		sbx, err := d.Create(context.Background(), sandbox.Spec{Name: fmt.Sprintf("bomb-%d", i),
			Limits: sandbox.Limits{MaxProcesses: limit, WallClock: 20 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		defer sbx.Destroy(context.Background())
		if p := sbx.Profile(); p.Processes.Limit != limit || p.Processes.Mechanism == sandbox.MechanismNone {
			t.Fatalf("profile processes %+v", p.Processes)
		}
		wg.Go(func() {
			_, out, stderr := run(t, sbx, sh(forkScript(400, mk)))
			outputs[i] = out + stderr
			b, _ := os.ReadFile(filepath.Join(sbx.WorkDir(), "count"))
			counts[i], _ = strconv.Atoi(strings.TrimSpace(string(b)))
		})
	}
	wg.Wait()
	for i, n := range counts {
		if strings.Contains(outputs[i], "all-started") || n >= limit {
			t.Errorf("sandbox %d started %d processes under a limit of %d: %s", i, n, limit, outputs[i])
		}
		// Both got (nearly) their whole budget: the shells, bwrap's init
		// and setpriv's successor count too.
		if n < limit-8 {
			t.Errorf("sandbox %d started only %d processes: the budget is shared (%s)", i, n, outputs[i])
		}
	}
	if err := exec.Command("true").Run(); err != nil {
		t.Errorf("the worker cannot start a process after the fork bombs: %v", err)
	}
	requireGone(t, mk)
	t.Logf("process ceiling %d by %s: sandboxes stopped at %v", limit, d.Status().Profile.Processes.Mechanism, counts)
}

// hogScript doubles a string 2^n times: about 1.5 × 2^n bytes at its peak.
func hogScript(n int) string {
	return fmt.Sprintf(`awk 'BEGIN { s = "x"; for (i = 0; i < %d; i++) s = s s; print "hog-finished", length(s) }'; echo hog-exit=$?`, n)
}

// TestMemoryCeilingStopsAHog allocates about 384 MiB under a 256 MiB
// ceiling: the hog fails, the sandbox goes on running commands. The same
// hog under 1 GiB finishes, so the ceiling is what stopped it.
func TestMemoryCeilingStopsAHog(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{Limits: sandbox.Limits{MaxMemoryBytes: 256 << 20}}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		p := f.sbx.Profile()
		if p.Memory.Limit != 256<<20 || p.Memory.Mechanism == sandbox.MechanismNone {
			t.Fatalf("profile memory %+v", p.Memory)
		}
		start := time.Now()
		_, out, stderr := run(t, f.sbx, sh(hogScript(28)))
		if strings.Contains(out, "hog-finished") || strings.Contains(out, "hog-exit=0") {
			t.Fatalf("the hog finished under a 256 MiB ceiling: %q %q", out, stderr)
		}
		t.Logf("%s: hog stopped by %s after %s: %s", m.name, p.Memory.Mechanism, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out+" "+stderr))
		if code, out, _ := run(t, f.sbx, sh("echo still-here")); code != 0 || out != "still-here\n" {
			t.Errorf("the sandbox did not survive the hog: %d %q", code, out)
		}
		control := setup(t, m, sandbox.Spec{Limits: sandbox.Limits{MaxMemoryBytes: 1 << 30}}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		if _, out, _ := run(t, control.sbx, sh(hogScript(28))); !strings.Contains(out, "hog-finished") {
			t.Errorf("control: the hog should finish under 1 GiB: %q", out)
		}
	})
}

// TestAnAddressSpaceCeilingBelowTheLauncherStillRunsEveryCommand: under
// RLIMIT_AS the limit is set by cairn-sandbox-exec on itself, a Go program
// that has mapped far more than 64 MiB by then; had it allocated after the
// limit (building exec's arguments from a megabyte of environment did in
// about one start in four) the Go runtime would have died with status 2
// before the command ran.
func TestAnAddressSpaceCeilingBelowTheLauncherStillRunsEveryCommand(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		env := map[string]string{}
		for i := range 10 {
			env[fmt.Sprintf("LARGE_%d", i)] = strings.Repeat("x", 100<<10)
		}
		// Without a cgroup, so that the ceiling is RLIMIT_AS wherever it runs.
		f := setup(t, m, sandbox.Spec{Env: env, Limits: sandbox.Limits{MaxMemoryBytes: 64 << 20}},
			sandbox.LocalOptions{Base: sandboxtest.Base(), Cgroup: "off"})
		if mech := f.sbx.Profile().Memory.Mechanism; mech != sandbox.MechanismRlimitAS {
			t.Skipf("memory ceiling by %s, not RLIMIT_AS", mech)
		}
		for i := range 40 {
			if code, out, stderr := run(t, f.sbx, sh(`echo ${#LARGE_9}`)); code != 0 || out != "102400\n" {
				t.Fatalf("command %d: code %d, stdout %q, stderr %.300q", i, code, out, stderr)
			}
		}
	})
}

// TestProfileMatchesWhatRuns reads the limits and user a command really
// has and compares them with the sandbox's Profile.
func TestProfileMatchesWhatRuns(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{Limits: sandbox.Limits{MaxMemoryBytes: 3 << 30, MaxProcesses: 500}}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		p := f.sbx.Profile()
		_, out, _ := run(t, f.sbx, sh("cat /proc/self/limits; echo uid=$(id -u)"))
		limitLine := func(name string) string {
			m := regexp.MustCompile(`(?m)^` + name + `\s+(\S+)\s+(\S+)`).FindStringSubmatch(out)
			if m == nil || m[1] != m[2] {
				t.Fatalf("limits lack %q:\n%s", name, out)
			}
			return m[1]
		}
		if p.Memory.Mechanism == sandbox.MechanismRlimitAS && limitLine("Max address space") != strconv.FormatUint(p.Memory.Limit, 10) {
			t.Errorf("address space %s, profile %+v", limitLine("Max address space"), p.Memory)
		}
		switch p.Processes.Mechanism {
		case sandbox.MechanismNprocUserNamespace, sandbox.MechanismNprocDedicatedUID:
			if got := limitLine("Max processes"); got != "500" {
				t.Errorf("process limit %s, profile %+v", got, p.Processes)
			}
		case sandbox.MechanismNone:
			if m == isolated {
				t.Errorf("isolated sandbox without a process ceiling: %+v", p)
			}
		}
		uid := regexp.MustCompile(`uid=(\d+)`).FindStringSubmatch(out)
		switch {
		case uid == nil:
			t.Fatalf("no uid in %q", out)
		case p.User == "dedicated_uid" && (uid[1] == "0" || uid[1] == strconv.Itoa(os.Getuid())):
			t.Errorf("a dedicated-uid sandbox runs as %s", uid[1])
		case p.User == "worker" && m == plain && uid[1] != strconv.Itoa(os.Getuid()):
			t.Errorf("an unisolated sandbox runs as %s", uid[1])
		}
		t.Logf("%s profile: %+v", m.name, p)
	})
}

// TestDedicatedUserIDsAreUniquePerLiveSandbox: a root worker's sandboxes
// each run as a user ID no other live sandbox has.
func TestDedicatedUserIDsAreUniquePerLiveSandbox(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("only a root worker gives sandboxes their own user IDs")
	}
	d, err := sandbox.NewLocal(t.TempDir(), sandbox.LocalOptions{Base: sandboxtest.Base()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var live []sandbox.Sandbox
	for i := range 3 {
		sbx, err := d.Create(context.Background(), sandbox.Spec{Name: fmt.Sprintf("u%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, sbx)
		_, out, _ := run(t, sbx, sh("id -u; stat -c %u .; stat -c %u $HOME"))
		f := strings.Fields(out)
		if len(f) != 3 || f[0] != f[1] || f[0] != f[2] {
			t.Errorf("sandbox user and its directories disagree: %q", out)
		}
		if seen[f[0]] {
			t.Errorf("user ID %s given to two live sandboxes", f[0])
		}
		seen[f[0]] = true
	}
	// A destroyed sandbox's ID is free again.
	_ = live[0].Destroy(context.Background())
	sbx, err := d.Create(context.Background(), sandbox.Spec{Name: "again"})
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Destroy(context.Background())
	for _, s := range live[1:] {
		_ = s.Destroy(context.Background())
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// unprivilegedEnv marks a test binary rerun by alsoAsNobody.
const unprivilegedEnv = "CAIRN_SANDBOX_TEST_UNPRIVILEGED"

// alsoAsNobody reruns the calling test as user nobody when the tests run as
// root, since a worker that is not root works differently: its commands
// run as its own user, in a user namespace, and own what bwrap makes. The
// binary is copied where nobody can run it.
func alsoAsNobody(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 || os.Getenv(unprivilegedEnv) != "" {
		return
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv is not installed")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "cairn-sandbox-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "sandbox.test")
	body, err := os.ReadFile(self)
	if err == nil {
		err = os.WriteFile(bin, body, 0o755)
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	// A parallel test's fork may still hold the copy's write descriptor
	// between its fork and exec (Go issue 22315): the exec then fails with
	// ETXTBSY for a moment, so that one failure is tried again.
	for try := 0; ; try++ {
		cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--",
			bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
		cmd.Dir = dir
		cmd.Env = []string{unprivilegedEnv + "=1", "PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir(), "HOME=" + dir,
			sandboxtest.InstalledEnv + "=" + os.Getenv(sandboxtest.InstalledEnv), sandboxtest.BaseEnv + "=" + sandboxtest.Base()}
		out, err = cmd.CombinedOutput()
		if err == nil || try == 10 || !strings.Contains(string(out), "Text file busy") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	switch {
	case err != nil:
		t.Fatalf("as user nobody: %v\n%s", err, out)
	case strings.Contains(string(out), "--- SKIP: "+t.Name()):
		t.Skipf("skipped as user nobody:\n%s", out)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()):
		t.Fatalf("as user nobody, the test did not pass:\n%s", out)
	}
	t.Logf("as user nobody:\n%s", out)
}

// TestSandboxCannotRebindItsOwnDirectory is a command that moves the
// sandbox's files/ aside and puts a link to the sandbox root in place of a
// read-only file: bwrap resolves a bind's source on the host, so if that
// directory were reachable the next command would see every sandbox of the
// worker. Its neighbour's secret stays out of sight, and nothing it
// does changes the sandbox directory on the host.
func TestSandboxCannotRebindItsOwnDirectory(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("the CA"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := setup(t, isolated, sandbox.Spec{ReadOnlyFiles: map[string]string{"ca.pem": ca, "nested/more.pem": ca}}, sandbox.LocalOptions{Base: sandboxtest.Base()})
	neighbour, err := f.driver.Create(context.Background(), sandbox.Spec{Name: "neighbour"})
	if err != nil {
		t.Fatal(err)
	}
	defer neighbour.Destroy(context.Background())
	if err := os.WriteFile(filepath.Join(neighbour.WorkDir(), "tofurc"), []byte("neighbour-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	mirror, _ := fakeMirror(t, "faketool", "1.0.0", "")
	tool, err := sandbox.NewToolCache(mirror, t.TempDir()).Verified(context.Background(), "faketool", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.sbx.InstallTool(context.Background(), tool); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(f.sbx.WorkDir())
	// Positive control: the files, the tool and the writable directories
	// are all there.
	if code, out, stderr := run(t, f.sbx, sh(`cat `+f.sbx.FilePath("ca.pem")+` `+f.sbx.FilePath("nested/more.pem")+
		` && faketool hi && touch $HOME/h $TMPDIR/t own`)); code != 0 || !strings.Contains(out, "the CAthe CA") {
		t.Fatalf("control: %d %q %q", code, out, stderr)
	}
	before := treeOf(t, dir)
	_, _, _ = run(t, f.sbx, sh(`cd `+dir+` && mv files files.moved && mkdir -p files/nested && touch files/nested/more.pem &&
ln -s ../.. files/ca.pem; mv bin bin.moved; echo x > planted`))
	neighbourDir := filepath.Base(filepath.Dir(neighbour.WorkDir()))
	p := f.sbx.FilePath("ca.pem")
	_, listing, _ := run(t, f.sbx, sh(`ls `+p+`/`))
	_, read, _ := run(t, f.sbx, sh(`cat `+p+`/`+neighbourDir+`/work/tofurc`))
	if contains(strings.Fields(listing), neighbourDir) || strings.Contains(read, "neighbour-token") {
		t.Errorf("through %s the sandbox reaches its neighbour:\n%s%s", p, listing, read)
	}
	if after := treeOf(t, dir); after != before {
		t.Errorf("the sandbox directory changed on the host:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	alsoAsNobody(t)
}

// treeOf lists the sandbox directory's entries outside work, home and tmp,
// with their types.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var out strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && (rel == "work" || rel == "home" || rel == "tmp") {
			return filepath.SkipDir
		}
		fmt.Fprintf(&out, "%s %s\n", rel, d.Type())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestSandboxUserIDsAreNobodyElses: a root worker refuses a user ID range
// that names a user of the host (nobody, 65534, here), and skips an ID a
// process of the host runs as though no sandbox holds it (a user missing
// from /etc/passwd, another worker's sandbox under another data directory).
func TestSandboxUserIDsAreNobodyElses(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("only a root worker gives sandboxes their own user IDs")
	}
	d, err := sandbox.NewLocal(t.TempDir(), sandbox.LocalOptions{Base: sandboxtest.Base(), SandboxUIDBase: 60000})
	if err != nil {
		t.Fatal(err)
	}
	if st := d.Status(); st.Ready || st.Reason != "sandbox_uids_unavailable" || !strings.Contains(st.Detail, "nobody") {
		t.Errorf("a range holding user nobody: %+v", st)
	}

	base := uint32(0x60000000 + rand.IntN(1<<20)*4)
	holder := exec.Command("setpriv", "--reuid="+strconv.Itoa(int(base)), "--regid="+strconv.Itoa(int(base)), "--clear-groups",
		"--", "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", holder.Process.Pid))
		if strings.Contains(string(b), "\tsleep\n") || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	d, err = sandbox.NewLocal(t.TempDir(), sandbox.LocalOptions{Base: sandboxtest.Base(), SandboxUIDBase: base})
	if err != nil {
		t.Fatal(err)
	}
	sbx, err := d.Create(context.Background(), sandbox.Spec{Name: "taken"})
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Destroy(context.Background())
	_, out, _ := run(t, sbx, sh("id -u"))
	if got := strings.TrimSpace(out); got == strconv.Itoa(int(base)) || got == "" {
		t.Errorf("the sandbox runs as %q, the user ID of a host process", got)
	}
}

// TestReadOnlyDirIsVisibleAndUnwritable shows an operator directory (a
// provider mirror) to commands at its own path: they read it, and neither
// write nor remove anything in it; its siblings stay out of sight.
func TestReadOnlyDirIsVisibleAndUnwritable(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	mirror := filepath.Join(parent, "mirror")
	if err := os.MkdirAll(filepath.Join(mirror, "registry.opentofu.org"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mirror, "registry.opentofu.org", "pkg"), []byte("package"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "sibling"), []byte("private"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := setup(t, isolated, sandbox.Spec{ReadOnlyDirs: []string{mirror}}, sandbox.LocalOptions{Base: sandboxtest.Base()})
	if code, out, stderr := run(t, f.sbx, sh(`cat `+mirror+`/registry.opentofu.org/pkg`)); code != 0 || out != "package" {
		t.Fatalf("reading the mirror: %d %q %q", code, out, stderr)
	}
	for _, cmd := range []string{`echo x > ` + mirror + `/planted`, `rm ` + mirror + `/registry.opentofu.org/pkg`,
		`echo x > ` + mirror + `/registry.opentofu.org/pkg`, `cat ` + parent + `/sibling`} {
		if code, _, _ := run(t, f.sbx, sh(cmd)); code == 0 {
			t.Errorf("%s succeeded inside the sandbox", cmd)
		}
	}
	if body, err := os.ReadFile(filepath.Join(mirror, "registry.opentofu.org", "pkg")); err != nil || string(body) != "package" {
		t.Fatalf("the mirror changed on the host: %q %v", body, err)
	}
	alsoAsNobody(t)
}

// TestCommandsHoldNoPrivileges: whatever the worker's user, a command keeps
// no capability in any set, cannot gain one through a setuid program, and a
// root worker's command has no supplementary group either.
func TestCommandsHoldNoPrivileges(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{Base: sandboxtest.Base()})
		_, out, _ := run(t, f.sbx, sh("cat /proc/self/status"))
		field := func(name string) string {
			got := regexp.MustCompile(`(?m)^` + name + `:[ \t]*(.*)$`).FindStringSubmatch(out)
			if got == nil {
				t.Fatalf("no %s in\n%s", name, out)
			}
			return strings.TrimSpace(got[1])
		}
		if got := field("NoNewPrivs"); got != "1" {
			t.Errorf("NoNewPrivs %s", got)
		}
		if m != isolated {
			return
		}
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if got := field(set); strings.Trim(got, "0") != "" {
				t.Errorf("%s %s", set, got)
			}
		}
		if os.Geteuid() == 0 {
			if got := field("Groups"); got != "" {
				t.Errorf("supplementary groups %q", got)
			}
			for _, ids := range []string{field("Uid"), field("Gid")} {
				all := strings.Fields(ids)
				if len(all) != 4 || slices.Contains(all, "0") || slices.ContainsFunc(all, func(id string) bool { return id != all[0] }) {
					t.Errorf("user or group IDs %q: not one sandbox ID in every slot", ids)
				}
			}
		}
		alsoAsNobody(t)
	})
}

// TestExecProgramMustBeTheWorkersOwn: a root worker's commands run
// cairn-sandbox-exec with root's rights, so the driver refuses one that
// others could change or replace, and one that is missing, rather than
// start without.
func TestExecProgramMustBeTheWorkersOwn(t *testing.T) {
	t.Parallel()
	installed, err := exec.LookPath(sandbox.ExecProgram)
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(installed)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writable := filepath.Join(dir, "writable")
	if err := os.WriteFile(writable, body, 0o755); err == nil {
		err = os.Chmod(writable, 0o775)
	}
	if err != nil {
		t.Fatal(err)
	}
	openDir := filepath.Join(dir, "open")
	inOpenDir := filepath.Join(openDir, sandbox.ExecProgram)
	if err := os.Mkdir(openDir, 0o755); err == nil {
		err = os.WriteFile(inOpenDir, body, 0o755)
		if err == nil {
			err = os.Chmod(openDir, 0o777)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	// A copy only its owner can change, in a directory only its owner
	// can write, is taken.
	ownDir := filepath.Join(dir, "own")
	own := filepath.Join(ownDir, sandbox.ExecProgram)
	if err := os.Mkdir(ownDir, 0o755); err == nil {
		err = os.WriteFile(own, body, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.NewLocal(t.TempDir(), sandbox.LocalOptions{Base: sandboxtest.Base(), Isolation: sandbox.NoIsolation, ExecPath: own}); err != nil {
		t.Fatalf("NewLocal refused a program only its owner can change: %v", err)
	}
	for name, path := range map[string]string{"group-writable": writable, "in a world-writable directory": inOpenDir,
		"missing": filepath.Join(dir, "missing")} {
		if _, err := sandbox.NewLocal(t.TempDir(), sandbox.LocalOptions{Base: sandboxtest.Base(), Isolation: sandbox.NoIsolation, ExecPath: path}); err == nil {
			t.Errorf("%s: NewLocal accepted %s", name, path)
		}
	}
}
