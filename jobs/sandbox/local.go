package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// BwrapMode says whether the local driver runs commands under bwrap.
type BwrapMode int

const (
	// BwrapAuto uses bwrap when it is found and works, and runs commands
	// without namespaces otherwise.
	BwrapAuto BwrapMode = iota
	// BwrapAlways makes Create fail with ErrIsolationUnavailable when bwrap
	// is missing or does not work.
	BwrapAlways
	// BwrapNever runs commands without namespaces.
	BwrapNever
)

func (m BwrapMode) String() string {
	switch m {
	case BwrapAuto:
		return "auto"
	case BwrapAlways:
		return "always"
	case BwrapNever:
		return "never"
	}
	return "BwrapMode(" + strconv.Itoa(int(m)) + ")"
}

// DefaultKillGrace is how long a canceled command gets between SIGTERM and
// SIGKILL: long enough for tofu to stop cleanly and release its state lock.
const DefaultKillGrace = 5 * time.Second

// LocalOptions configure NewLocal.
type LocalOptions struct {
	UseBwrap BwrapMode
	// BwrapPath overrides looking bwrap up in PATH.
	BwrapPath string
	// KillGrace is the time between SIGTERM and SIGKILL; zero means
	// DefaultKillGrace.
	KillGrace time.Duration
	Logger    *slog.Logger
}

// Local is the local sandbox driver: a directory per sandbox under one root,
// commands in their own session and process group with rlimits, and Linux
// namespaces through bwrap where it works.
//
// Resource limits are applied by prlimit(1) from util-linux: the worker
// starts `prlimit --nofile=… -- <command>` (or `-- bwrap … <command>`), and
// prlimit sets the limits on itself and execs, so no instruction of the
// command runs before its limits are in place and every process it starts
// inherits them. Go's SysProcAttr has no rlimit field, setrlimit in the
// worker would limit the worker, and prlimit(2) on an already started child
// races with it; a shell as start gate would drop environment variables whose
// names are not shell identifiers (TF_VAR_my-var). The cost is one extra exec
// per command.
//
// Without bwrap the process group is the only containment: a process that
// moves to another session escapes Run's cleanup, and the tree can read
// whatever the worker's user can. With bwrap the tree also lives in its own
// PID namespace, so killing bwrap kills every process in it.
type Local struct {
	root      string
	prlimit   string
	bwrap     string // bwrap binary in use; empty without namespaces
	sysBinds  []string
	isoErr    error // set when BwrapAlways could not get bwrap working
	killGrace time.Duration
	logger    *slog.Logger
}

var _ Driver = (*Local)(nil)

// NewLocal returns a local driver that keeps its sandboxes under root, which
// it creates with mode 0700. With BwrapAuto or BwrapAlways it runs bwrap once
// to check that namespaces work here.
func NewLocal(root string, opts LocalOptions) (*Local, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("sandbox root %q must be an absolute path", root)
	}
	if opts.KillGrace < 0 {
		return nil, fmt.Errorf("KillGrace %s must not be negative", opts.KillGrace)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("creating sandbox root: %w", err)
	}
	if err := os.Chmod(root, 0o700); err != nil {
		return nil, fmt.Errorf("restricting sandbox root: %w", err)
	}
	// Resolved once so that bind mounts, Dir checks and logs all use the
	// same spelling of every path.
	resolved, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("resolving sandbox root: %w", err)
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		return nil, fmt.Errorf("sandboxes need prlimit (util-linux) to apply resource limits: %w", err)
	}
	l := &Local{
		root:      resolved,
		prlimit:   prlimit,
		killGrace: cmp.Or(opts.KillGrace, DefaultKillGrace),
		logger:    opts.Logger,
	}
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	switch opts.UseBwrap {
	case BwrapNever:
	case BwrapAuto, BwrapAlways:
		l.sysBinds = systemBinds()
		path, err := findBwrap(opts.BwrapPath)
		if err == nil {
			err = l.probeBwrap(path)
		}
		switch {
		case err == nil:
			l.bwrap = path
		case opts.UseBwrap == BwrapAlways:
			l.isoErr = fmt.Errorf("%w: %w", ErrIsolationUnavailable, err)
			l.logger.Error("bwrap unusable, sandbox creation will fail", "error", err)
		default:
			l.logger.Warn("bwrap unusable, sandboxes run without namespaces", "error", err)
		}
	default:
		return nil, fmt.Errorf("UseBwrap %s is not a BwrapMode", opts.UseBwrap)
	}
	return l, nil
}

// Name returns "local".
func (l *Local) Name() string { return "local" }

// Isolated reports whether commands run under bwrap.
func (l *Local) Isolated() bool { return l.bwrap != "" }

func findBwrap(path string) (string, error) {
	if path == "" {
		return exec.LookPath("bwrap")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", path)
	}
	return path, nil
}

// probeBwrap runs `true` with the same namespaces and system binds commands
// get, since bwrap may be installed where user namespaces are disabled.
func (l *Local) probeBwrap(path string) error {
	truePath, err := lookPath("true", []string{"/usr/bin", "/bin"})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := append(l.bwrapBaseArgs(), "--", truePath)
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("probing %s: %w: %s", path, err, bytes.TrimSpace(out))
	}
	return nil
}

// bwrapBaseArgs are the bwrap arguments every command shares. The network
// namespace is shared on purpose (SPEC §1 rule 10). --new-session is not
// used: it would move the command out of the process group Run signals, and
// Run's Setsid already leaves the tree without a controlling terminal, which
// is what --new-session guards against. --cap-drop ALL matters when the
// worker runs as root, where bwrap would otherwise keep its capabilities.
func (l *Local) bwrapBaseArgs() []string {
	args := []string{"--unshare-all", "--share-net", "--die-with-parent", "--cap-drop", "ALL"}
	args = append(args, l.sysBinds...)
	return append(args, "--proc", "/proc", "--dev", "/dev")
}

// System paths commands see read-only under bwrap: programs and libraries,
// CA certificates, name resolution, and the user database.
var (
	systemDirs  = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}
	systemFiles = []string{
		"/etc/ssl", "/etc/ca-certificates", "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf",
		"/etc/host.conf", "/etc/gai.conf", "/etc/passwd", "/etc/group", "/etc/localtime", "/etc/alternatives",
	}
)

func systemBinds() []string {
	var args []string
	for _, p := range systemDirs {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			// Merged-/usr systems link /bin to usr/bin; keep it a link.
			if target, err := os.Readlink(p); err == nil {
				args = append(args, "--symlink", target, p)
			}
		default:
			args = append(args, "--ro-bind", p, p)
		}
	}
	for _, p := range systemFiles {
		if _, err := os.Stat(p); err == nil {
			args = append(args, "--ro-bind", p, p)
		}
	}
	return args
}

// Create makes a fresh sandbox directory under the driver's root.
func (l *Local) Create(ctx context.Context, spec Spec) (Sandbox, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if l.isoErr != nil {
		return nil, l.isoErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("creating sandbox: %w", err)
	}
	id := newID()
	dir := filepath.Join(l.root, id)
	s := &localSandbox{
		driver: l,
		bwrap:  l.bwrap,
		id:     id,
		name:   spec.Name,
		dir:    dir,
		work:   filepath.Join(dir, "work"),
		home:   filepath.Join(dir, "home"),
		tmp:    filepath.Join(dir, "tmp"),
		bin:    filepath.Join(dir, "bin"),
		env:    maps.Clone(spec.Env),
		limits: spec.Limits.withDefaults(),
		files:  map[string]string{},
		tools:  map[string]string{},
		runs:   map[*activeRun]struct{}{},
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating sandbox %s: %w", id, err)
	}
	if err := s.layOut(spec.ReadOnlyFiles); err != nil {
		_ = removeTree(dir)
		return nil, fmt.Errorf("creating sandbox %s: %w", id, err)
	}
	l.logger.InfoContext(ctx, "sandbox created", "sandbox_id", id, "sandbox_name", spec.Name, "isolated", l.Isolated())
	return s, nil
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newID returns "sbx_" and 26 base32 characters of 128 random bits.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	return "sbx_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}

type localSandbox struct {
	driver *Local
	bwrap  string
	id     string
	name   string
	dir    string
	work   string
	home   string
	tmp    string
	bin    string
	env    map[string]string
	limits Limits
	files  map[string]string // sandbox path → host path, bound read-only under bwrap

	mu        sync.Mutex
	tools     map[string]string // name → verified copy
	runs      map[*activeRun]struct{}
	destroyed bool
}

var _ Sandbox = (*localSandbox)(nil)

// activeRun lets Destroy stop a Run and wait for it.
type activeRun struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

func (s *localSandbox) ID() string      { return s.id }
func (s *localSandbox) WorkDir() string { return s.work }

func (s *localSandbox) FilePath(key string) string { return filepath.Join(s.dir, "files", key) }

func (s *localSandbox) layOut(readOnly map[string]string) error {
	for _, sub := range []string{"work", "home", "tmp", "bin", "files"} {
		if err := os.Mkdir(filepath.Join(s.dir, sub), 0o700); err != nil {
			return err
		}
	}
	for _, key := range slices.Sorted(maps.Keys(readOnly)) {
		host, dst := readOnly[key], s.FilePath(key)
		fi, err := os.Stat(host)
		if err != nil {
			return fmt.Errorf("%w: ReadOnlyFiles[%q]: %w", ErrInvalidSpec, key, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: ReadOnlyFiles[%q]: %s is not a regular file", ErrInvalidSpec, key, host)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		if s.bwrap != "" {
			// A mount point for the read-only bind each Run adds.
			err = writeFile(dst, nil, 0o400)
			s.files[dst] = host
		} else {
			err = copyFile(host, dst, 0o444)
		}
		if err != nil {
			return fmt.Errorf("placing ReadOnlyFiles[%q]: %w", key, err)
		}
	}
	return nil
}

func writeFile(path string, r io.Reader, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if r != nil {
		if _, err := io.Copy(f, r); err != nil {
			_ = f.Close()
			return err
		}
	}
	return f.Close()
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeFile(dst, in, perm)
}

// InstallTool puts the verified copy on the sandbox's PATH as bin/<name>
// without copying it. Under bwrap each Run binds it read-only over a
// placeholder, so the sandbox cannot alter the shared cache file. Without
// bwrap it is hard-linked (symlinked across file systems); the tree could
// then write to the cache file, like to anything else the worker's user owns.
func (s *localSandbox) InstallTool(ctx context.Context, tool VerifiedTool) error {
	if !validName(tool.Name, 64) {
		return fmt.Errorf("%w: tool name %q", ErrInvalidSpec, tool.Name)
	}
	if !filepath.IsAbs(tool.Path) {
		return fmt.Errorf("%w: tool %s path %q must be absolute", ErrInvalidSpec, tool.Name, tool.Path)
	}
	fi, err := os.Stat(tool.Path)
	if err != nil {
		return fmt.Errorf("installing %s: %w", tool.Name, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: tool %s path %s is not a regular file", ErrInvalidSpec, tool.Name, tool.Path)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return fmt.Errorf("installing %s: %w", tool.Name, ErrDestroyed)
	}
	if prev, ok := s.tools[tool.Name]; ok {
		if prev == tool.Path {
			return nil
		}
		return fmt.Errorf("%w: tool %s is already installed from %s", ErrInvalidSpec, tool.Name, prev)
	}
	dst := filepath.Join(s.bin, tool.Name)
	if s.bwrap != "" {
		err = writeFile(dst, nil, 0o555)
	} else if err = os.Link(tool.Path, dst); errors.Is(err, syscall.EXDEV) {
		err = os.Symlink(tool.Path, dst)
	}
	if err != nil {
		return fmt.Errorf("installing %s: %w", tool.Name, err)
	}
	s.tools[tool.Name] = tool.Path
	s.driver.logger.DebugContext(ctx, "sandbox tool installed", "sandbox_id", s.id,
		"tool", tool.Name, "tool_version", tool.Version, "sha256", tool.SHA256)
	return nil
}

// Run runs a command; see Sandbox.Run and Local for how it is contained.
func (s *localSandbox) Run(ctx context.Context, c Command) (int, error) {
	if err := c.validate(); err != nil {
		return -1, err
	}
	ctx, done, err := s.register(ctx)
	if err != nil {
		return -1, fmt.Errorf("running %s: %w", c.Args[0], err)
	}
	defer done()
	dir, err := s.commandDir(c.Dir)
	if err != nil {
		return -1, err
	}
	prog, err := s.resolve(c.Args[0])
	if err != nil {
		return -1, err
	}
	argv := append([]string{prog}, c.Args[1:]...)
	if s.bwrap != "" {
		argv = append([]string{s.bwrap}, s.bwrapArgs(dir, argv)...)
	}
	argv, err = s.limited(argv)
	if err != nil {
		return -1, fmt.Errorf("running %s: %w", c.Args[0], err)
	}
	ctx, stop := context.WithTimeoutCause(ctx, s.limits.WallClock, ErrTimedOut)
	defer stop()
	return s.execute(ctx, argv, dir, c)
}

// register records a Run so Destroy can stop it; done unregisters it.
func (s *localSandbox) register(ctx context.Context) (context.Context, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return nil, nil, ErrDestroyed
	}
	ctx, cancel := context.WithCancelCause(ctx)
	r := &activeRun{cancel: cancel, done: make(chan struct{})}
	s.runs[r] = struct{}{}
	return ctx, func() {
		cancel(nil)
		s.mu.Lock()
		delete(s.runs, r)
		s.mu.Unlock()
		close(r.done)
	}, nil
}

// commandDir resolves Command.Dir. Extracted configuration may contain
// symlinks, so the check is on the resolved path.
func (s *localSandbox) commandDir(rel string) (string, error) {
	dir, err := filepath.EvalSymlinks(filepath.Join(s.work, rel))
	if err != nil {
		return "", fmt.Errorf("%w: Command.Dir %q: %w", ErrInvalidSpec, rel, err)
	}
	if dir != s.work && !strings.HasPrefix(dir, s.work+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: Command.Dir %q leaves the work directory", ErrInvalidSpec, rel)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w: Command.Dir %q is not a directory", ErrInvalidSpec, rel)
	}
	return dir, nil
}

func (s *localSandbox) pathList() []string { return []string{s.bin, "/usr/bin", "/bin"} }

// resolve looks a bare program name up in the sandbox's PATH. The sandbox
// sees these directories at their host paths, so the host answer is the one
// a lookup inside would give, and a missing tool fails before anything starts.
func (s *localSandbox) resolve(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	return lookPath(name, s.pathList())
}

func lookPath(name string, dirs []string) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q in %s: %w", name, strings.Join(dirs, ":"), exec.ErrNotFound)
}

// environ is the whole environment of a command: nothing of the worker's.
// PWD is set because bwrap sets it anyway; setting it in both modes keeps
// them alike.
func (s *localSandbox) environ(dir string, extra map[string]string) []string {
	env := maps.Clone(s.env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, extra)
	env["PATH"] = strings.Join(s.pathList(), ":")
	env["HOME"] = s.home
	env["TMPDIR"] = s.tmp
	env["PWD"] = dir
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// bwrapArgs wraps argv in bwrap. The sandbox directory keeps its host path
// inside, so paths in logs and plans read the same on both sides. /tmp is
// bound before it in case the sandbox root lies under /tmp. The environment
// reaches the command through bwrap's own environment, not --setenv, which
// would put secrets in argv where other users can read them.
func (s *localSandbox) bwrapArgs(dir string, argv []string) []string {
	args := s.driver.bwrapBaseArgs()
	args = append(args, "--bind", s.tmp, "/tmp", "--bind", s.dir, s.dir)
	s.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(s.tools)) {
		args = append(args, "--ro-bind", s.tools[name], filepath.Join(s.bin, name))
	}
	s.mu.Unlock()
	for _, dst := range slices.Sorted(maps.Keys(s.files)) {
		args = append(args, "--ro-bind", s.files[dst], dst)
	}
	// Everything outside the sandbox directory and /tmp is read-only,
	// including the root tmpfs bwrap builds the mounts on.
	args = append(args, "--remount-ro", "/", "--chdir", dir, "--")
	return append(args, argv...)
}

// execute starts argv and waits for it, terminating the process group when
// ctx ends.
func (s *localSandbox) execute(ctx context.Context, argv []string, dir string, c Command) (int, error) {
	// bwrap's --die-with-parent is PR_SET_PDEATHSIG, which fires when the
	// thread that forked exits, and Go ends a thread whose locked goroutine
	// exits. Holding this thread for the whole run keeps that from happening.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	cmd := &exec.Cmd{
		Path:   argv[0],
		Args:   argv,
		Env:    s.environ(dir, c.Env),
		Dir:    dir,
		Stdout: c.Stdout,
		Stderr: c.Stderr,
		// A new session is a new process group with no controlling terminal.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
		// A process that escaped the group may hold the output pipes open.
		WaitDelay: s.driver.killGrace,
	}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("starting %s: %w", c.Args[0], err)
	}
	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() {
		waitExited(pgid)
		close(exited)
	}()
	logger := s.driver.logger.With("sandbox_id", s.id, "program", c.Args[0])
	logger.DebugContext(ctx, "sandbox command started", "pid", pgid)

	var stopErr error
	select {
	case <-exited:
	case <-ctx.Done():
		cause := context.Cause(ctx)
		if errors.Is(cause, ErrTimedOut) {
			stopErr = fmt.Errorf("running %s: %w after %s", c.Args[0], ErrTimedOut, s.limits.WallClock)
		} else {
			stopErr = fmt.Errorf("running %s: %w: %w", c.Args[0], ErrCanceled, cause)
		}
		logger.InfoContext(ctx, "sandbox command terminating", "reason", cause.Error())
		s.terminate(pgid, exited, errors.Is(cause, ErrDestroyed))
	}
	// The leader has exited but is not reaped, so its PID, and with it the
	// group ID, cannot be reused yet: whatever it left behind is ours to kill.
	_ = unix.Kill(-pgid, unix.SIGKILL)
	waitErr := cmd.Wait()
	if stopErr != nil {
		return -1, stopErr
	}
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil, errors.As(waitErr, &exitErr):
	case errors.Is(waitErr, exec.ErrWaitDelay):
		logger.WarnContext(ctx, "sandbox command output cut off: a process outside its group held the pipes")
	default:
		return -1, fmt.Errorf("waiting for %s: %w", c.Args[0], waitErr)
	}
	return exitStatus(cmd.ProcessState), nil
}

// terminate stops the process group led by pgid and returns once the leader
// has exited. Unless now, the tree first gets SIGTERM and KillGrace to stop.
func (s *localSandbox) terminate(pgid int, exited <-chan struct{}, now bool) {
	if !now {
		if s.bwrap != "" {
			// The leader is bwrap, which dies of SIGTERM and then SIGKILLs
			// the namespace before tofu could stop cleanly; spare it, unless
			// it is alone and still setting the namespace up.
			if signalGroupExcept(pgid, pgid, unix.SIGTERM) == 0 {
				_ = unix.Kill(pgid, unix.SIGTERM)
			}
		} else {
			_ = unix.Kill(-pgid, unix.SIGTERM)
		}
		grace := time.NewTimer(s.driver.killGrace)
		defer grace.Stop()
		select {
		case <-exited:
			return
		case <-grace.C:
		}
	}
	_ = unix.Kill(-pgid, unix.SIGKILL)
	<-exited
}

// waitExited blocks until pid has exited without reaping it (WNOWAIT), so
// the caller can still signal its group safely.
func waitExited(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// signalGroupExcept sends sig to every process in group pgid but one and
// returns how many it signalled.
func signalGroupExcept(pgid, except int, sig unix.Signal) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == except || processGroup(pid) != pgid {
			continue
		}
		// Pin the process, then check it is still the one just read, so a
		// recycled PID is never signalled.
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if processGroup(pid) == pgid && unix.PidfdSendSignal(fd, sig, nil, 0) == nil {
			n++
		}
		_ = unix.Close(fd)
	}
	return n
}

// processGroup reads a process's group ID from /proc, or returns -1.
func processGroup(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// The command name in parentheses may hold spaces; after it come
	// state, ppid and pgrp.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return -1
	}
	g, err := strconv.Atoi(f[2])
	if err != nil {
		return -1
	}
	return g
}

// limited prefixes argv with prlimit and the sandbox's limits, each set as
// soft and hard limit and capped at the worker's own hard limit, which only a
// privileged worker could raise.
func (s *localSandbox) limited(argv []string) ([]string, error) {
	limits := []struct {
		flag     string
		resource int
		value    uint64
	}{
		{"--nofile", unix.RLIMIT_NOFILE, s.limits.MaxOpenFiles},
		{"--fsize", unix.RLIMIT_FSIZE, s.limits.MaxFileBytes},
		{"--cpu", unix.RLIMIT_CPU, s.limits.MaxCPUSeconds},
		// A core dump would write process memory, run token included, to disk.
		{"--core", unix.RLIMIT_CORE, 0},
		{"--nproc", unix.RLIMIT_NPROC, s.limits.MaxProcesses},
		{"--data", unix.RLIMIT_DATA, s.limits.MaxMemoryBytes},
	}
	out := []string{s.driver.prlimit}
	for _, lim := range limits {
		if (lim.flag == "--nproc" || lim.flag == "--data") && lim.value == 0 {
			continue // see Limits.MaxProcesses and Limits.MaxMemoryBytes
		}
		var own unix.Rlimit
		if err := unix.Getrlimit(lim.resource, &own); err != nil {
			return nil, fmt.Errorf("reading the worker's %s limit: %w", lim.flag, err)
		}
		v := strconv.FormatUint(min(lim.value, own.Max), 10)
		out = append(out, lim.flag+"="+v+":"+v)
	}
	return append(append(out, "--"), argv...), nil
}

// exitStatus reports death by signal n as 128+n, as shells and bwrap do, so
// both modes report the same code.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// Destroy stops running commands at once (SIGKILL: the attempt is being
// abandoned), then removes the sandbox directory.
func (s *localSandbox) Destroy(ctx context.Context) error {
	s.mu.Lock()
	first := !s.destroyed
	s.destroyed = true
	runs := slices.Collect(maps.Keys(s.runs))
	s.mu.Unlock()
	for _, r := range runs {
		r.cancel(ErrDestroyed)
	}
	for _, r := range runs {
		select {
		case <-r.done:
		case <-ctx.Done():
			return fmt.Errorf("destroying sandbox %s: waiting for commands to stop: %w", s.id, ctx.Err())
		}
	}
	if err := removeTree(s.dir); err != nil {
		return fmt.Errorf("destroying sandbox %s: %w", s.id, err)
	}
	if first {
		s.driver.logger.InfoContext(ctx, "sandbox destroyed", "sandbox_id", s.id, "sandbox_name", s.name)
	}
	return nil
}

// removeTree deletes dir. Tofu can leave read-only directories behind
// (provider caches), and unlinking needs write permission on the directory,
// so directories are made writable first. Files keep their modes: some are
// hard links to the shared tool cache.
func removeTree(dir string) error {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
