package sandbox

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
)

// Defaults applied to zero Limits fields. MaxFileBytes leaves room for state
// and plan files of 100 MB and more.
const (
	DefaultWallClock     = 30 * time.Minute
	DefaultMaxOpenFiles  = 4096
	DefaultMaxFileBytes  = 1 << 30
	DefaultMaxCPUSeconds = 3600
)

// Limits bound one command. Zero fields take the defaults above. Each rlimit
// is set as both soft and hard limit and applies to every process of the
// command's tree separately (rlimits are per process), not to the tree as a
// whole.
type Limits struct {
	// WallClock is the deadline of a whole Run, process tree included.
	WallClock time.Duration
	// MaxOpenFiles is RLIMIT_NOFILE.
	MaxOpenFiles uint64
	// MaxProcesses is RLIMIT_NPROC and is applied only when set: Linux counts
	// it per real user ID, so it would count the worker and every other
	// sandbox of the same user too, and root ignores it. Namespaces (bwrap)
	// are what keep one run's processes from another's; zero leaves it unset.
	MaxProcesses uint64
	// MaxFileBytes is RLIMIT_FSIZE: the largest file a process may write.
	MaxFileBytes uint64
	// MaxCPUSeconds is RLIMIT_CPU.
	MaxCPUSeconds uint64
	// MaxMemoryBytes is a memory ceiling per process, applied as
	// RLIMIT_DATA and only when set: it bounds the private writable memory
	// a process maps (heap, anonymous mappings, thread stacks), which is
	// what a runaway allocation grows. RLIMIT_AS would count address space
	// merely reserved too, and a Go program (tofu, Cairn's own) reserves
	// well over a gigabyte of it before allocating anything.
	MaxMemoryBytes uint64
}

func (l Limits) withDefaults() Limits {
	if l.WallClock == 0 {
		l.WallClock = DefaultWallClock
	}
	if l.MaxOpenFiles == 0 {
		l.MaxOpenFiles = DefaultMaxOpenFiles
	}
	if l.MaxFileBytes == 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxCPUSeconds == 0 {
		l.MaxCPUSeconds = DefaultMaxCPUSeconds
	}
	return l
}

func (l Limits) validate() error {
	if l.WallClock < 0 {
		return fmt.Errorf("%w: Limits.WallClock %s must not be negative", ErrInvalidSpec, l.WallClock)
	}
	// Tofu and the shell need a handful of descriptors before doing any work.
	if l.MaxOpenFiles != 0 && l.MaxOpenFiles < 16 {
		return fmt.Errorf("%w: Limits.MaxOpenFiles %d must be at least 16", ErrInvalidSpec, l.MaxOpenFiles)
	}
	return nil
}

// Spec describes a sandbox to create.
type Spec struct {
	// Name labels the sandbox in logs, for example "run_xxx-plan-1": 1 to 64
	// characters of [A-Za-z0-9._-], starting with a letter or digit.
	Name string
	// Env is the only environment the commands see besides PATH, HOME,
	// TMPDIR and PWD, which the driver sets and Env may not override.
	Env map[string]string
	// Limits bound each command; zero fields take defaults.
	Limits Limits
	// ReadOnlyFiles maps a relative path inside the sandbox's files directory
	// to an absolute host path, for example a CA certificate the runner needs.
	// Sandbox.FilePath gives the path commands see. Under bwrap the host file
	// is bound read-only; without it the file is copied at Create.
	ReadOnlyFiles map[string]string
}

// Driver creates sandboxes.
type Driver interface {
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// Name identifies the driver, "local" for Local.
	Name() string
	// Isolated reports whether commands run in their own Linux namespaces.
	Isolated() bool
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
	// InstallTool makes a verified tool runnable by its name through PATH.
	InstallTool(ctx context.Context, tool VerifiedTool) error
	// Run runs one command to completion. A command that ran and exited
	// returns its exit status with a nil error (128+n when signal n killed
	// it, as a shell reports it); a command stopped by ctx, Limits.WallClock
	// or Destroy returns -1 and an error wrapping ErrCanceled or ErrTimedOut.
	Run(ctx context.Context, cmd Command) (exitCode int, err error)
	// Destroy terminates any running command, then removes the sandbox
	// directory. It is idempotent.
	Destroy(ctx context.Context) error
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
	if c.Dir != "" && !filepath.IsLocal(c.Dir) {
		return fmt.Errorf("%w: Command.Dir %q must be a relative path inside the work directory", ErrInvalidSpec, c.Dir)
	}
	return validateEnv("Command.Env", c.Env)
}

// reservedEnv are set by the driver; letting a spec override them would make
// the sandbox layout depend on caller input.
var reservedEnv = map[string]bool{"PATH": true, "HOME": true, "TMPDIR": true, "PWD": true}

func validateEnv(field string, env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%w: %s key %q must be non-empty without '=' or NUL", ErrInvalidSpec, field, k)
		}
		if reservedEnv[k] {
			return fmt.Errorf("%w: %s may not set %s, the driver sets it", ErrInvalidSpec, field, k)
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
