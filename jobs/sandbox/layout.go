package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// A sandbox directory, <root>/<id>:
//
//	work/   the configuration and everything the commands write
//	home/   HOME
//	tmp/    TMPDIR, and /tmp under namespaces
//	bin/    tools (PATH's first entry)
//	files/  copies of Spec.ReadOnlyFiles
//
// With a root worker the commands run as the sandbox's own user ID: work,
// home and tmp belong to it, and Run hands it whatever the worker wrote
// there since the last command; the directory itself, bin and files stay
// root's, traversable but not listable or writable.
type localSandbox struct {
	driver  *Local
	bwrap   string
	id      string
	name    string
	dir     string
	work    string
	home    string
	tmp     string
	bin     string
	env     map[string]string
	limits  Limits
	profile Profile
	files   map[string]string // copies bound read-only onto themselves under bwrap
	roDirs  []string          // host directories bound read-only onto themselves under bwrap

	// lock holds the directory for this process (see cleanup.go).
	lock *os.File
	// uid is the sandbox's own user ID (root worker), held by uidLock;
	// zero when commands run as the worker's user.
	uid     uint32
	uidLock *os.File
	cgroup  *sandboxCgroup

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
func (s *localSandbox) Profile() Profile {
	p := s.profile
	p.Namespaces = slices.Clone(p.Namespaces)
	return p
}

func (s *localSandbox) FilePath(key string) string { return filepath.Join(s.dir, "files", key) }

// setUp claims the sandbox's user ID and cgroup and lays the directory out.
func (s *localSandbox) setUp(readOnly map[string]string) error {
	private, shared := os.FileMode(0o700), os.FileMode(0o700)
	if pool := s.driver.uids; pool != nil {
		uid, lock, err := pool.claim()
		if err != nil {
			return err
		}
		s.uid, s.uidLock = uid, lock
		// The sandbox user only passes through what root keeps.
		shared = 0o711
		if err := os.Chmod(s.dir, shared); err != nil {
			return err
		}
	}
	if s.driver.cgroup != nil {
		cg, err := s.driver.cgroup.create(s.id, s.limits)
		if err != nil {
			return err
		}
		s.cgroup = cg
	}
	for _, sub := range []string{"work", "home", "tmp"} {
		if err := os.Mkdir(filepath.Join(s.dir, sub), private); err != nil {
			return err
		}
	}
	for _, sub := range []string{"bin", "files"} {
		if err := os.Mkdir(filepath.Join(s.dir, sub), shared); err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(s.dir, sub), shared); err != nil {
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
		if err := os.MkdirAll(filepath.Dir(dst), shared); err != nil {
			return err
		}
		if err := copyFile(host, dst, 0o444); err != nil {
			return fmt.Errorf("placing ReadOnlyFiles[%q]: %w", key, err)
		}
		s.files[dst] = host
	}
	return s.handOver()
}

// handOver gives the sandbox user everything under work, home and tmp that
// it does not own yet: what the worker wrote there (the configuration, the
// variables, a saved plan). os.Root keeps the walk inside each directory
// whatever links the previous command left.
func (s *localSandbox) handOver() error {
	if s.uid == 0 {
		return nil
	}
	uid := int(s.uid)
	for _, dir := range []string{s.work, s.home, s.tmp} {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return fmt.Errorf("handing %s to the sandbox user: %w", dir, err)
		}
		err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == uid {
				return nil
			}
			return root.Lchown(p, uid, uid)
		})
		_ = root.Close()
		if err != nil {
			return fmt.Errorf("handing %s to the sandbox user: %w", dir, err)
		}
	}
	return nil
}

// Open opens a regular file commands left in the work directory; see
// Sandbox.Open. The file is pinned by its descriptor and checked again
// after opening, so what is read is what was checked.
func (s *localSandbox) Open(name string) (*os.File, error) {
	root, err := s.workRoot(name)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrUnsafePath, name, fi.Mode().Type())
	}
	// Non-blocking, so a FIFO put there since the check cannot stall the
	// worker in open; it is refused below.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s in sandbox %s: %w", name, s.id, err)
	}
	opened, err := f.Stat()
	if err == nil && (!opened.Mode().IsRegular() || !os.SameFile(fi, opened)) {
		err = fmt.Errorf("%w: %s changed while it was opened", ErrUnsafePath, name)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// Create makes name afresh in the work directory; see Sandbox.Create.
// Whatever was there is removed first and the file is created exclusively,
// so no link a command planted is ever followed.
func (s *localSandbox) Create(name string) (*os.File, error) {
	root, err := s.workRoot(name)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fi, err := root.Lstat(name)
	switch {
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("%w: %s is a directory", ErrUnsafePath, name)
	case err == nil:
		err = root.Remove(name)
	case errors.Is(err, fs.ErrNotExist):
		err = nil
	}
	if err != nil {
		return nil, err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating %s in sandbox %s: %w", name, s.id, err)
	}
	return f, nil
}

// workRoot opens the work directory as an os.Root, which keeps every step
// of a lookup inside it, after checking that the directories on the way to
// name are directories, not links.
func (s *localSandbox) workRoot(name string) (*os.Root, error) {
	if !filepath.IsLocal(name) || name != filepath.Clean(name) {
		return nil, fmt.Errorf("%w: %q must be a clean relative path", ErrInvalidSpec, name)
	}
	root, err := os.OpenRoot(s.work)
	if err != nil {
		return nil, fmt.Errorf("opening the work directory of sandbox %s: %w", s.id, err)
	}
	parts := strings.Split(name, string(filepath.Separator))
	for i := 1; i < len(parts); i++ {
		dir := filepath.Join(parts[:i]...)
		fi, err := root.Lstat(dir)
		if err == nil && !fi.IsDir() {
			err = fmt.Errorf("%w: %s is not a directory (%s)", ErrUnsafePath, dir, fi.Mode().Type())
		}
		if err != nil {
			root.Close()
			return nil, err
		}
	}
	return root, nil
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
	if err := f.Chmod(perm); err != nil {
		_ = f.Close()
		return err
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
// placeholder, so the sandbox cannot alter the shared cache file and sees
// nothing else of the cache. Without bwrap it is hard-linked (symlinked
// across file systems); the tree could then write to the cache file, like
// to anything else the worker's user owns.
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
	ctx, done, dir, prog, err := s.admit(ctx, c)
	if err != nil {
		return -1, err
	}
	defer done()
	argv, err := s.commandArgv(dir, append([]string{prog}, c.Args[1:]...))
	if err != nil {
		return -1, fmt.Errorf("running %s: %w", c.Args[0], err)
	}
	ctx, stop := context.WithTimeoutCause(ctx, s.limits.WallClock, ErrTimedOut)
	defer stop()
	return s.execute(ctx, argv, dir, c)
}

// admit readies a valid command to run: it registers it (see register),
// resolves its directory and program, and hands the sandbox's files to its
// user. done is nil when err is not.
func (s *localSandbox) admit(ctx context.Context, c Command) (context.Context, func(), string, string, error) {
	ctx, done, err := s.register(ctx)
	if err != nil {
		return nil, nil, "", "", fmt.Errorf("running %s: %w", c.Args[0], err)
	}
	dir, err := s.commandDir(c.Dir)
	var prog string
	if err == nil {
		prog, err = s.resolve(c.Args[0])
	}
	if err == nil {
		if err = s.handOver(); err != nil {
			err = fmt.Errorf("running %s: %w", c.Args[0], err)
		}
	}
	if err != nil {
		done()
		return nil, nil, "", "", err
	}
	return ctx, done, dir, prog, nil
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

// environ is the whole environment of a command: nothing of the worker's.
// PWD is set because bwrap sets it anyway; setting it in both modes keeps
// them alike. The sandbox ID marks every process of the tree for Sweep.
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
	env[markerEnv] = s.id
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
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
	if err := s.release(); err != nil {
		return fmt.Errorf("destroying sandbox %s: %w", s.id, err)
	}
	if first {
		s.driver.logger.InfoContext(ctx, "sandbox destroyed", "sandbox_id", s.id, "sandbox_name", s.name)
	}
	return nil
}

// release removes the cgroup and the directory, then gives up the user ID
// and the directory's lock, in that order: until the lock goes, no sweep
// takes the directory for a dead one's.
func (s *localSandbox) release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cgroup != nil {
		if err := s.cgroup.remove(); err != nil {
			return err
		}
		s.cgroup = nil
	}
	if err := removeTree(s.dir); err != nil {
		return err
	}
	for _, f := range []**os.File{&s.uidLock, &s.lock} {
		if *f != nil {
			_ = (*f).Close()
			*f = nil
		}
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
