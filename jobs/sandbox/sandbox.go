package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Defaults applied to zero Limits fields (after the driver's own defaults).
// MaxFileBytes leaves room for state and plan files of 100 MB and more; the
// memory and process ceilings leave room for tofu and several providers,
// multi-threaded Go programs whose threads count as tasks and whose address
// space is a few times their resident memory.
const (
	DefaultWallClock      = 30 * time.Minute
	DefaultMaxOpenFiles   = 4096
	DefaultMaxFileBytes   = 1 << 30
	DefaultMaxCPUSeconds  = 3600
	DefaultMaxMemoryBytes = 4 << 30
	DefaultMaxProcesses   = 1024
)

// Limits bound a sandbox's commands. Zero fields take defaults. The rlimits
// are set as both soft and hard limit on every process of a command's tree
// (rlimits are per process); the memory and process ceilings hold for the
// sandbox as a whole where the driver can, and the Profile says how.
type Limits struct {
	// WallClock is the deadline of a whole Run, process tree included.
	WallClock time.Duration
	// MaxOpenFiles is RLIMIT_NOFILE.
	MaxOpenFiles uint64
	// MaxProcesses bounds the tasks (processes and threads) of a sandbox:
	// cgroup v2 pids.max where the host delegates it, otherwise RLIMIT_NPROC
	// where the kernel counts it for this sandbox alone (its own user
	// namespace, or a user ID of its own when the worker is root). Without
	// namespaces it is not enforced (Linux would count the worker too).
	MaxProcesses uint64
	// MaxMemoryBytes is the memory ceiling: cgroup v2 memory.max for the
	// whole sandbox where the host delegates it, otherwise RLIMIT_AS, an
	// address-space limit on each process.
	MaxMemoryBytes uint64
	// MaxFileBytes is RLIMIT_FSIZE: the largest file a process may write.
	MaxFileBytes uint64
	// MaxCPUSeconds is RLIMIT_CPU.
	MaxCPUSeconds uint64
	// MaxDataBytes is a tighter memory ceiling per process, applied as
	// RLIMIT_DATA only when set, in place of the address-space ceiling
	// (under a cgroup, beside memory.max): it bounds the
	// private writable memory a process maps (heap, anonymous mappings,
	// thread stacks), which is what a runaway allocation grows. RLIMIT_AS
	// counts address space merely reserved too, and a Go program (tofu,
	// Cairn's own) reserves over a gigabyte of it before allocating
	// anything, so a ceiling below that needs this one.
	MaxDataBytes uint64
}

// withDefaults fills zero fields from d, then from the package defaults.
func (l Limits) withDefaults(d Limits) Limits {
	fill := func(v *uint64, driver, pkg uint64) {
		if *v == 0 {
			*v = driver
		}
		if *v == 0 {
			*v = pkg
		}
	}
	if l.WallClock == 0 {
		l.WallClock = d.WallClock
	}
	if l.WallClock == 0 {
		l.WallClock = DefaultWallClock
	}
	fill(&l.MaxOpenFiles, d.MaxOpenFiles, DefaultMaxOpenFiles)
	fill(&l.MaxFileBytes, d.MaxFileBytes, DefaultMaxFileBytes)
	fill(&l.MaxCPUSeconds, d.MaxCPUSeconds, DefaultMaxCPUSeconds)
	fill(&l.MaxMemoryBytes, d.MaxMemoryBytes, DefaultMaxMemoryBytes)
	fill(&l.MaxProcesses, d.MaxProcesses, DefaultMaxProcesses)
	return l
}

// The smallest ceilings a Spec may ask for.
const (
	MinMemoryBytes = 64 << 20
	MinProcesses   = 16
)

func (l Limits) validate() error {
	if l.WallClock < 0 {
		return fmt.Errorf("%w: Limits.WallClock %s must not be negative", ErrInvalidSpec, l.WallClock)
	}
	// Tofu and the shell need a handful of descriptors before doing any work.
	if l.MaxOpenFiles != 0 && l.MaxOpenFiles < 16 {
		return fmt.Errorf("%w: Limits.MaxOpenFiles %d must be at least 16", ErrInvalidSpec, l.MaxOpenFiles)
	}
	// A Go program (tofu, a provider) reserves tens of MiB of address space
	// and a handful of threads before it does any work.
	if l.MaxMemoryBytes != 0 && l.MaxMemoryBytes < MinMemoryBytes {
		return fmt.Errorf("%w: Limits.MaxMemoryBytes %d must be at least %d", ErrInvalidSpec, l.MaxMemoryBytes, MinMemoryBytes)
	}
	if l.MaxProcesses != 0 && l.MaxProcesses < MinProcesses {
		return fmt.Errorf("%w: Limits.MaxProcesses %d must be at least %d", ErrInvalidSpec, l.MaxProcesses, MinProcesses)
	}
	return nil
}

// Spec describes a sandbox to create.
type Spec struct {
	// Name labels the sandbox in logs, for example "run_xxx-plan-1": 1 to 64
	// characters of [A-Za-z0-9._-], starting with a letter or digit.
	Name string
	// Env is the only environment the commands see besides PATH, HOME,
	// TMPDIR, PWD and CAIRN_SANDBOX_ID, which the driver sets and Env may not
	// override.
	Env map[string]string
	// Limits bound the commands; zero fields take the driver's defaults.
	Limits Limits
	// ReadOnlyFiles maps a relative path inside the sandbox's files directory
	// to an absolute host path, for example a CA certificate the runner needs.
	// Sandbox.FilePath gives the path commands see. The file is copied at
	// Create (world-readable: a root worker's commands run as another user)
	// and, under namespaces, bound read-only.
	ReadOnlyFiles map[string]string
	// ReadOnlyDirs are absolute host directories commands see at the same
	// path and can only read, for example an operator's provider mirror.
	// Under namespaces each is bound read-only; nothing else of the host
	// becomes visible. They must be world-readable for a root worker.
	ReadOnlyDirs []string
}

// Driver creates sandboxes.
type Driver interface {
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// Name identifies the driver, "local" for Local.
	Name() string
	// Isolated reports whether commands run in their own Linux namespaces.
	Isolated() bool
	// Status reports what sandboxes get on this host, or why none can be
	// created.
	Status() Status
}

// Sandbox is one phase attempt's place to run commands. A Sandbox is safe for
// concurrent use.
type Sandbox interface {
	// ID is unique per sandbox: "sbx_" and 26 random base32 characters.
	ID() string
	// WorkDir is the host path of the writable work directory, where the
	// configuration gets extracted. Commands see it at the same path.
	WorkDir() string
	// FilePath is the path, the same on the host and inside, of the
	// Spec.ReadOnlyFiles entry key.
	FilePath(key string) string
	// Open opens a regular file in the work directory for reading; name is
	// relative to WorkDir. Commands may have left links and special files
	// there: a link as name, anything but a regular file, or a path that
	// leaves the work directory is refused (ErrUnsafePath), never followed
	// with the worker's rights.
	Open(name string) (*os.File, error)
	// Create makes name in the work directory afresh for writing, whatever
	// a command left there, with the same refusals as Open.
	Create(name string) (*os.File, error)
	// InstallTool makes a verified tool runnable by its name through PATH.
	InstallTool(ctx context.Context, tool VerifiedTool) error
	// Run runs one command to completion. A command that ran and exited
	// returns its exit status with a nil error (128+n when signal n killed
	// it, as a shell reports it); a command stopped by ctx, Limits.WallClock
	// or Destroy returns -1 and an error wrapping ErrCanceled or ErrTimedOut.
	Run(ctx context.Context, cmd Command) (exitCode int, err error)
	// Session returns a Session whose commands share one entry into the
	// sandbox, made by its Enter or its first Run: a phase's commands pay
	// for the namespaces once. Tools must be installed before the entry.
	Session() Session
	// Destroy terminates any running command, then removes the sandbox
	// directory. It is idempotent.
	Destroy(ctx context.Context) error
	// Profile is what this sandbox applies: isolation, namespaces and the
	// ceilings with the mechanism that enforces each.
	Profile() Profile
}

// Command is one command to run in a sandbox.
type Command struct {
	// Args[0] is a tool name installed with InstallTool or a program in
	// /usr/bin or /bin, looked up through the sandbox's PATH; a name with a
	// slash is a path.
	Args []string
	// Dir is relative to WorkDir and must stay inside it; empty means WorkDir.
	Dir string
	// Env is extra environment for this command only; it overrides Spec.Env
	// and, like it, may not set PATH, HOME, TMPDIR or PWD.
	Env map[string]string
	// Stdout and Stderr receive the command's output; nil discards it.
	Stdout io.Writer
	Stderr io.Writer
	// StopSignal is the signal the command's processes get first when it is
	// stopped (ctx ends or Limits.WallClock runs out; Destroy kills at
	// once); zero means SIGTERM. Tofu takes SIGINT as a terminal's Ctrl-C:
	// its provider plugins ignore it while tofu stops and saves its state.
	StopSignal syscall.Signal
	// StopGrace is how long the processes get after StopSignal before
	// SIGKILL; zero means the driver's KillGrace.
	StopGrace time.Duration
}

func (s Spec) validate() error {
	if !validName(s.Name, 64) {
		return fmt.Errorf("%w: Name %q must be 1 to 64 characters of [A-Za-z0-9._-] starting with a letter or digit", ErrInvalidSpec, s.Name)
	}
	if err := validateEnv("Env", s.Env); err != nil {
		return err
	}
	if err := s.Limits.validate(); err != nil {
		return err
	}
	for _, d := range s.ReadOnlyDirs {
		if !filepath.IsAbs(d) || d != filepath.Clean(d) || d == "/" {
			return fmt.Errorf("%w: ReadOnlyDirs entry %q must be a clean absolute path below /", ErrInvalidSpec, d)
		}
	}
	for key, host := range s.ReadOnlyFiles {
		if !filepath.IsLocal(key) || key != filepath.Clean(key) {
			return fmt.Errorf("%w: ReadOnlyFiles key %q must be a clean relative path", ErrInvalidSpec, key)
		}
		if !filepath.IsAbs(host) {
			return fmt.Errorf("%w: ReadOnlyFiles[%q] host path %q must be absolute", ErrInvalidSpec, key, host)
		}
	}
	return nil
}

func (c Command) validate() error {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return fmt.Errorf("%w: Command.Args must name a program", ErrInvalidSpec)
	}
	for i, a := range c.Args {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("%w: Command.Args[%d] contains a NUL byte", ErrInvalidSpec, i)
		}
	}
	if c.StopGrace < 0 {
		return fmt.Errorf("%w: Command.StopGrace %s must not be negative", ErrInvalidSpec, c.StopGrace)
	}
	if c.StopSignal == syscall.SIGKILL || c.StopSignal == syscall.SIGSTOP || c.StopSignal < 0 {
		return fmt.Errorf("%w: Command.StopSignal %d must be a signal a process can handle", ErrInvalidSpec, c.StopSignal)
	}
	if c.Dir != "" && !filepath.IsLocal(c.Dir) {
		return fmt.Errorf("%w: Command.Dir %q must be a relative path inside the work directory", ErrInvalidSpec, c.Dir)
	}
	return validateEnv("Command.Env", c.Env)
}

// reservedEnv are set by the driver; letting a spec override them would make
// the sandbox layout depend on caller input.
var reservedEnv = map[string]bool{"PATH": true, "HOME": true, "TMPDIR": true, "PWD": true, markerEnv: true}

// loaderEnv are variables the dynamic loader and C library act on. The
// environment reaches bwrap, which runs as root for a root worker, before
// the command: LD_PRELOAD there would run the caller's code with root's
// rights outside the sandbox. glibc ignores these only in set-user-ID
// programs, which bwrap is not, so the driver refuses them.
var loaderEnv = map[string]bool{
	"GCONV_PATH": true, "GETCONF_DIR": true, "GLIBC_TUNABLES": true, "HOSTALIASES": true, "LOCALDOMAIN": true,
	"LOCPATH": true, "MALLOC_CHECK_": true, "MALLOC_TRACE": true, "NIS_PATH": true, "NLSPATH": true,
	"RESOLV_HOST_CONF": true, "RES_OPTIONS": true, "TZDIR": true,
}

func validateEnv(field string, env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%w: %s key %q must be non-empty without '=' or NUL", ErrInvalidSpec, field, k)
		}
		if reservedEnv[k] {
			return fmt.Errorf("%w: %s may not set %s, the driver sets it", ErrInvalidSpec, field, k)
		}
		if loaderEnv[k] || strings.HasPrefix(k, "LD_") || strings.HasPrefix(k, "MALLOC_") {
			return fmt.Errorf("%w: %s may not set %s, which the dynamic loader acts on", ErrInvalidSpec, field, k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("%w: %s[%s] contains a NUL byte", ErrInvalidSpec, field, k)
		}
	}
	return nil
}

// validName accepts 1 to max characters of [A-Za-z0-9._-] starting with a
// letter or digit, so a name is always one safe path element.
func validName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}
