package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Cgroup v2 ceilings. Where the host delegates a cgroup v2 subtree with the
// memory and pids controllers to the worker, each sandbox gets a cgroup of
// its own under one parent, with memory.max and pids.max: one ceiling for
// the whole process tree, which rlimits cannot give. Commands are placed in
// it at clone (SysProcAttr.UseCgroupFD), so no instruction of theirs runs
// outside it.
//
// The parent is found once, when the driver starts:
//   - "off": cgroups are not used;
//   - an absolute path: that cgroup v2 directory, prepared by the operator
//     (for example a systemd unit's delegated subtree) with no processes of
//     its own; an error if it does not work;
//   - "auto" (or empty): the worker's own cgroup if it is delegated. cgroup
//     v2 lets a cgroup with processes enable controllers for its children
//     only if it is the root, so the worker first moves itself into a leaf
//     "cairn-worker" beside the sandboxes' parent "cairn-sandboxes". If any
//     step fails the driver falls back to rlimits and says why.

// Names in the worker's own cgroup; sandbox cgroups are named by sandbox ID.
const (
	cgroupSandboxesDir = "cairn-sandboxes"
	cgroupWorkerLeaf   = "cairn-worker"
)

// cgroupParent is the cgroup v2 directory the driver creates sandbox
// cgroups in; memory and pids are enabled for its children.
type cgroupParent struct{ dir string }

// sandboxCgroup is one sandbox's cgroup, open for SysProcAttr.CgroupFD.
type sandboxCgroup struct {
	dir string
	fd  *os.File
}

// findCgroupParent applies the setting described above. It returns a nil
// parent and the reason when cgroups are not used; err only for an explicit
// path that does not work.
func findCgroupParent(setting string) (*cgroupParent, string, error) {
	switch setting {
	case "off":
		return nil, "cgroup ceilings turned off (CAIRN_SANDBOX_CGROUP=off)", nil
	case "", "auto":
		own, err := ownCgroup2Dir()
		if err != nil {
			return nil, err.Error(), nil
		}
		// Another worker process of the same service already made the
		// layout and started this one inside its leaf.
		if filepath.Base(own) == cgroupWorkerLeaf {
			own = filepath.Dir(own)
		}
		p, err := delegateOwnCgroup(own, os.Getpid())
		if err != nil {
			return nil, err.Error(), nil
		}
		return p, "", nil
	}
	if !filepath.IsAbs(setting) {
		return nil, "", fmt.Errorf("cgroup parent %q must be an absolute path, auto or off", setting)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(setting, &st); err != nil {
		return nil, "", fmt.Errorf("cgroup parent %s: %w", setting, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return nil, "", fmt.Errorf("cgroup parent %s is not on a cgroup v2 file system", setting)
	}
	if err := enableChildControllers(setting); err != nil {
		return nil, "", fmt.Errorf("cgroup parent %s: %w", setting, err)
	}
	return &cgroupParent{dir: setting}, "", nil
}

// ownCgroup2Dir is the directory of the worker's own cgroup v2.
func ownCgroup2Dir() (string, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("reading /proc/self/cgroup: %w", err)
	}
	path, ok := parseCgroup2Path(self)
	if !ok {
		return "", errors.New("the worker is in no cgroup v2 hierarchy")
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	}
	mount, ok := parseCgroup2Mount(mounts)
	if !ok {
		return "", errors.New("no cgroup v2 file system is mounted")
	}
	return filepath.Join(mount, path), nil
}

// parseCgroup2Path returns the unified hierarchy's path from the contents
// of /proc/<pid>/cgroup, whose cgroup v2 line reads "0::<path>".
func parseCgroup2Path(b []byte) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if path, ok := strings.CutPrefix(sc.Text(), "0::"); ok && strings.HasPrefix(path, "/") {
			return path, true
		}
	}
	return "", false
}

// parseCgroup2Mount returns the first cgroup2 mount point in the contents
// of /proc/<pid>/mountinfo ("… <mount point> <options> … - cgroup2 …").
func parseCgroup2Mount(b []byte) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		if fstype, _, _ := strings.Cut(post, " "); fstype != "cgroup2" {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		return unescapeMountPath(f[4]), true
	}
	return "", false
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

// controllers reads a cgroup's cgroup.controllers or cgroup.subtree_control.
func controllers(dir, file string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

var neededControllers = []string{"memory", "pids"}

// enableChildControllers makes memory and pids available to dir's children.
func enableChildControllers(dir string) error {
	have, err := controllers(dir, "cgroup.controllers")
	if err != nil {
		return err
	}
	for _, c := range neededControllers {
		if !slices.Contains(have, c) {
			return fmt.Errorf("the %s controller is not delegated (cgroup.controllers: %q)", c, strings.Join(have, " "))
		}
	}
	enabled, err := controllers(dir, "cgroup.subtree_control")
	if err != nil {
		return err
	}
	if !slices.Contains(enabled, "memory") || !slices.Contains(enabled, "pids") {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
			return fmt.Errorf("enabling memory and pids for child cgroups: %w", err)
		}
	}
	return nil
}

// delegateOwnCgroup turns the worker's own cgroup dir into the layout
// dir/cairn-worker (the worker) beside dir/cairn-sandboxes (the parent).
// On failure the worker is moved back where it was.
func delegateOwnCgroup(dir string, pid int) (*cgroupParent, error) {
	have, err := controllers(dir, "cgroup.controllers")
	if err != nil {
		return nil, fmt.Errorf("cgroup v2 at %s: %w", dir, err)
	}
	for _, c := range neededControllers {
		if !slices.Contains(have, c) {
			return nil, fmt.Errorf("cgroup v2 at %s does not delegate the memory and pids controllers (cgroup.controllers: %q)", dir, strings.Join(have, " "))
		}
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return nil, fmt.Errorf("cgroup v2 at %s is not writable by the worker: %w", dir, err)
	}
	leaf := filepath.Join(dir, cgroupWorkerLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("creating %s: %w", leaf, err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return nil, fmt.Errorf("moving the worker into %s: %w", leaf, err)
	}
	parent := filepath.Join(dir, cgroupSandboxesDir)
	err = enableChildControllers(dir)
	if err == nil {
		if err = os.Mkdir(parent, 0o755); errors.Is(err, os.ErrExist) {
			err = nil
		}
	}
	if err == nil {
		err = enableChildControllers(parent)
	}
	if err != nil {
		_ = os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		return nil, fmt.Errorf("cgroup v2 at %s: %w", dir, err)
	}
	return &cgroupParent{dir: parent}, nil
}

// create makes the sandbox's cgroup with its ceilings. Swap is turned off
// where the kernel offers it, so the memory ceiling is not a swap
// allowance.
func (p *cgroupParent) create(id string, l Limits) (*sandboxCgroup, error) {
	dir := filepath.Join(p.dir, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
	}
	c := &sandboxCgroup{dir: dir}
	for _, w := range []struct {
		file, value string
		optional    bool
	}{
		{"memory.max", strconv.FormatUint(l.MaxMemoryBytes, 10), false},
		{"memory.swap.max", "0", true},
		{"pids.max", strconv.FormatUint(l.MaxProcesses, 10), false},
	} {
		err := os.WriteFile(filepath.Join(dir, w.file), []byte(w.value), 0o644)
		if err != nil && !(w.optional && errors.Is(err, os.ErrNotExist)) {
			_ = c.remove()
			return nil, fmt.Errorf("setting %s: %w", w.file, err)
		}
	}
	fd, err := os.Open(dir)
	if err != nil {
		_ = c.remove()
		return nil, fmt.Errorf("opening cgroup %s: %w", dir, err)
	}
	c.fd = fd
	return c, nil
}

// remove kills whatever is left in the cgroup and removes it. A cgroup
// can be removed only once empty, which takes the kernel a moment after
// the kill.
func (c *sandboxCgroup) remove() error {
	if c.fd != nil {
		_ = c.fd.Close()
		c.fd = nil
	}
	return removeCgroup(c.dir)
}

func removeCgroup(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil && errors.Is(err, os.ErrNotExist) {
		// Kernels before 5.14 have no cgroup.kill.
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					killVerified(pid, func(pid int) bool { return inCgroup(pid, dir) })
				}
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("removing cgroup %s: %w", dir, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// inCgroup reports whether pid's cgroup v2 directory ends like dir.
func inCgroup(pid int, dir string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	path, ok := parseCgroup2Path(b)
	return ok && path != "/" && strings.HasSuffix(dir, path)
}
