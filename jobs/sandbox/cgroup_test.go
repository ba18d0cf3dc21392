package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseCgroup2(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cgroup, mountinfo string
		path, mount       string
		ok                bool
	}{
		"hybrid host": {
			cgroup:    "9:name=systemd:/\n4:memory:/process_api/45aa\n0::/\n",
			mountinfo: "24 30 0:21 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n31 30 0:28 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw\n",
			path:      "/", mount: "/sys/fs/cgroup/unified", ok: true,
		},
		"systemd unit": {
			cgroup:    "0::/system.slice/cairn-worker.service\n",
			mountinfo: "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n",
			path:      "/system.slice/cairn-worker.service", mount: "/sys/fs/cgroup", ok: true,
		},
		"escaped mount point": {
			cgroup:    "0::/a\n",
			mountinfo: `40 24 0:30 / /mnt/my\040cgroups rw - cgroup2 none rw` + "\n",
			path:      "/a", mount: "/mnt/my cgroups", ok: true,
		},
		"v1 only": {
			cgroup:    "4:memory:/x\n",
			mountinfo: "24 30 0:21 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
		},
	} {
		path, okPath := parseCgroup2Path([]byte(tc.cgroup))
		mount, okMount := parseCgroup2Mount([]byte(tc.mountinfo))
		if okPath != tc.ok || okMount != tc.ok || path != tc.path || mount != tc.mount {
			t.Errorf("%s: path %q %v, mount %q %v; want %q, %q, %v", name, path, okPath, mount, okMount, tc.path, tc.mount, tc.ok)
		}
	}
}

// fakeCgroup makes a directory that looks like a cgroup v2 directory to the
// code that writes to it (plain files, no kernel behind them).
func fakeCgroup(t *testing.T, dir, controllers string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, body := range map[string]string{"cgroup.controllers": controllers, "cgroup.subtree_control": "", "cgroup.procs": ""} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestDelegateOwnCgroupLayout checks what the driver writes when the
// worker's own cgroup is delegated: the worker moves into a leaf, memory and
// pids are enabled for the children, and sandboxes get their ceilings.
func TestDelegateOwnCgroupLayout(t *testing.T) {
	t.Parallel()
	own := t.TempDir()
	fakeCgroup(t, own, "cpu memory pids")
	// The kernel creates these in a new cgroup; the fake needs them first.
	fakeCgroup(t, filepath.Join(own, cgroupWorkerLeaf), "")
	fakeCgroup(t, filepath.Join(own, cgroupSandboxesDir), "memory pids")
	p, err := delegateOwnCgroup(own, 4242)
	if err != nil {
		t.Fatal(err)
	}
	if p.dir != filepath.Join(own, cgroupSandboxesDir) {
		t.Errorf("parent %s", p.dir)
	}
	if got := readTrim(t, filepath.Join(own, cgroupWorkerLeaf, "cgroup.procs")); got != "4242" {
		t.Errorf("worker leaf holds %q, want the worker's PID", got)
	}
	for _, dir := range []string{own, p.dir} {
		if got := readTrim(t, filepath.Join(dir, "cgroup.subtree_control")); got != "+memory +pids" {
			t.Errorf("%s subtree_control %q", dir, got)
		}
	}
	c, err := p.create("sbx_test", Limits{MaxMemoryBytes: 2 << 30, MaxProcesses: 300})
	if err != nil {
		t.Fatal(err)
	}
	defer c.fd.Close()
	for file, want := range map[string]string{"memory.max": strconv.Itoa(2 << 30), "memory.swap.max": "0", "pids.max": "300"} {
		if got := readTrim(t, filepath.Join(p.dir, "sbx_test", file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
}

func TestDelegateOwnCgroupRefusesWithoutControllers(t *testing.T) {
	t.Parallel()
	own := t.TempDir()
	fakeCgroup(t, own, "cpu hugetlb")
	if _, err := delegateOwnCgroup(own, 4242); err == nil || !strings.Contains(err.Error(), "memory and pids") {
		t.Fatalf("delegating without memory and pids: %v", err)
	}
	if _, err := os.Stat(filepath.Join(own, cgroupWorkerLeaf)); err == nil {
		t.Error("the worker was moved although nothing could be delegated")
	}
}

// TestCgroupDetectionOnThisHost compares what the driver decides with what
// the host offers: cgroup v2 ceilings only where the worker's own cgroup v2
// delegates memory and pids.
func TestCgroupDetectionOnThisHost(t *testing.T) {
	t.Parallel()
	own, err := ownCgroup2Dir()
	var delegated bool
	if err == nil {
		have, _ := controllers(own, "cgroup.controllers")
		delegated = strings.Contains(" "+strings.Join(have, " ")+" ", " memory ") && strings.Contains(" "+strings.Join(have, " ")+" ", " pids ")
	}
	if delegated {
		t.Skip("this host delegates cgroup v2 to the test; detection would move the test process")
	}
	p, why, err := findCgroupParent("auto")
	if err != nil || p != nil || why == "" {
		t.Errorf("auto on a host without delegated cgroup v2: %v, %q, %v", p, why, err)
	}
	if p, why, err := findCgroupParent("off"); p != nil || err != nil || !strings.Contains(why, "off") {
		t.Errorf("off: %v, %q, %v", p, why, err)
	}
	if _, _, err := findCgroupParent(t.TempDir()); err == nil {
		t.Error("an explicit parent that is not cgroup v2 was accepted")
	}
	if _, _, err := findCgroupParent("relative"); err == nil {
		t.Error("a relative parent was accepted")
	}
	t.Logf("cgroup ceilings unavailable here: %s", why)
}
