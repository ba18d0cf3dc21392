package sandbox

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// namespaceArgs are the bwrap arguments that make the namespaces and drop
// privileges. The network namespace is shared on purpose (SPEC §1 rule 10).
// --new-session is not used: it would move the command out of the process
// group Run signals, and Run's Setsid already leaves the tree without a
// controlling terminal, which is what --new-session guards against.
func (l *Local) namespaceArgs() []string {
	if l.uids != nil {
		// A root worker: bwrap creates the namespaces with root's own
		// rights, without a user namespace, which would map the command to
		// user ID 0 (never counted by RLIMIT_NPROC). The command keeps only
		// what bwrap needs to enter the sandbox user's working directory
		// (DAC_READ_SEARCH) and cairn-sandbox-exec to switch to that user,
		// which drops those with everything else.
		return []string{"--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
			"--cap-drop", "ALL", "--cap-add", "CAP_DAC_READ_SEARCH", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
			"--cap-add", "CAP_SETPCAP"}
	}
	// The user namespace is required, not tried: the process ceiling is
	// counted per user namespace.
	return []string{"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--cap-drop", "ALL"}
}

// namespaces names the namespaces commands get of their own, for the
// profile.
func (l *Local) namespaces() []string {
	ns := []string{"mount", "pid", "ipc", "uts"}
	if l.uids == nil {
		ns = append([]string{"user"}, ns...)
	}
	if _, err := os.Stat("/proc/self/ns/cgroup"); err == nil {
		ns = append(ns, "cgroup")
	}
	return ns
}

// systemDirs are the system paths of the base (and of hosts): a sandbox
// directory's ancestors inside one are not made, since the base's own
// read-only bind holds them.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// tmpSize bounds the sandbox's /tmp, a tmpfs: memory no rlimit counts.
// TMPDIR points at the sandbox's tmp directory on disk, which well-behaved
// programs (tofu, providers) use instead.
const tmpSize = 128 << 20

// shmSize bounds /dev/shm, a tmpfs too, for programs that use POSIX shared
// memory.
const shmSize = 16 << 20

// bwrapArgs wraps argv in bwrap, with extra options after those of the
// namespaces (a session's). Nothing of the host is visible but its
// name resolution files; the system paths are the managed base's, the sandbox's work, home and tmp directories, its
// tools (each bound read-only from the tool cache, which stays out of
// sight), its read-only files and a fresh /proc of its own PID namespace.
// They keep their host paths inside, so paths in logs and plans read the
// same on both sides; the sandbox directory and its parents exist inside
// only as directories on bwrap's own tmpfs, made traversable (a root
// worker's commands run as another user) but not listable. /tmp is a small tmpfs of its own, made before them in case the
// sandbox root lies under /tmp. The environment reaches the command through
// bwrap's own environment, not --setenv, which would put secrets in argv
// where other users can read them.
func (s *localSandbox) bwrapArgs(dir string, argv []string, extra ...string) []string {
	args := append(s.driver.namespaceArgs(), extra...)
	args = append(args, s.driver.sysBinds...)
	// bwrap's /dev is a tmpfs without a size, writable by a non-root
	// worker's commands (they own it in their user namespace): memory no
	// rlimit counts. It is made read-only, with a small /dev/shm of its own.
	args = append(args, "--proc", "/proc", "--dev", "/dev",
		"--perms", "1777", "--size", strconv.Itoa(shmSize), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
		"--perms", "1777", "--size", strconv.Itoa(tmpSize), "--tmpfs", "/tmp")
	// bwrap makes the directories a mount point needs accessible to root
	// only; a root worker's commands run as another user, so the ones
	// leading to the binds are made first, traversable but not listable.
	dirs := append(ancestors(s.dir), s.dir, s.bin)
	for _, f := range slices.Sorted(maps.Keys(s.files)) {
		for p := filepath.Dir(f); p != s.dir && !slices.Contains(dirs, p); p = filepath.Dir(p) {
			dirs = append(dirs, p)
		}
	}
	for _, d := range s.roDirs {
		for _, p := range ancestors(d) {
			if !slices.Contains(dirs, p) {
				dirs = append(dirs, p)
			}
		}
	}
	slices.Sort(dirs)
	for _, p := range dirs {
		args = append(args, "--perms", "0711", "--dir", p)
	}
	// Only the writable directories are bound, never the sandbox
	// directory itself: bwrap resolves a bind's source on the host with the
	// worker's rights, so a command that could rename files/ or bin/ and
	// put a link there would have the next command bind whatever the link
	// names (another sandbox, the data directory) into its view.
	for _, d := range []string{s.work, s.home, s.tmp} {
		args = append(args, "--bind", d, d)
	}
	s.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(s.tools)) {
		args = append(args, "--ro-bind", s.tools[name], filepath.Join(s.bin, name))
	}
	s.mu.Unlock()
	for _, f := range slices.Sorted(maps.Keys(s.files)) {
		args = append(args, "--ro-bind", f, f)
	}
	for _, d := range s.roDirs {
		args = append(args, "--ro-bind", d, d)
	}
	args = append(args, "--perms", "0711", "--dir", filepath.Dir(filepath.Dir(execInside)),
		"--perms", "0711", "--dir", filepath.Dir(execInside), "--ro-bind", s.driver.execPath, execInside)
	// Everything outside the sandbox directory and /tmp is read-only,
	// including the root tmpfs bwrap builds the mounts on.
	args = append(args, "--remount-ro", "/", "--chdir", dir, "--")
	return append(args, argv...)
}

// ancestors lists the directories above dir that bwrap must make, outermost
// first: not / and /tmp, which exist, and nothing inside a system path,
// which is bound read-only as it is.
func ancestors(dir string) []string {
	var out []string
	for p := filepath.Dir(dir); p != "/" && p != "/tmp"; p = filepath.Dir(p) {
		out = append(out, p)
	}
	slices.Reverse(out)
	for i, p := range out {
		for _, sys := range systemDirs {
			if p == sys || strings.HasPrefix(p, sys+"/") {
				return out[:i]
			}
		}
	}
	return out
}
