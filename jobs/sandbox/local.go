package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// IsolationMode says whether sandboxes must run in Linux namespaces.
type IsolationMode int

const (
	// RequireNamespaces (the zero value, so the default) runs every command
	// in namespaces of its own through bwrap. Where that does not work,
	// NewLocal still returns a driver, for health output, but Create fails
	// with ErrIsolationUnavailable and nothing runs.
	RequireNamespaces IsolationMode = iota
	// NoIsolation runs commands without namespaces, as the worker's user
	// and with its view of the host: user code can read the worker's
	// environment and files. Only for a single-user machine whose operator
	// chose it explicitly.
	NoIsolation
)

func (m IsolationMode) String() string {
	switch m {
	case RequireNamespaces:
		return IsolationNamespaces
	case NoIsolation:
		return IsolationNone
	}
	return "IsolationMode(" + strconv.Itoa(int(m)) + ")"
}

// DefaultKillGrace is how long a canceled command gets between SIGTERM and
// SIGKILL: long enough for tofu to stop cleanly and release its state lock.
const DefaultKillGrace = 5 * time.Second

// DefaultSandboxUIDBase is the first user ID a root worker's sandboxes run
// as: just above the range systemd gives containers, below 2^31.
const DefaultSandboxUIDBase = 0x70000000

// sandboxUIDCount is how many user IDs from the base a root worker uses,
// one per live sandbox.
const sandboxUIDCount = 65536

// LocalOptions configure NewLocal.
type LocalOptions struct {
	Isolation IsolationMode
	// BwrapPath overrides looking bwrap up in PATH.
	BwrapPath string
	// ExecPath is the cairn-sandbox-exec program; empty means the one
	// beside the running executable, else the one in PATH.
	ExecPath string
	// Cgroup is "auto" (the default), "off" or a cgroup v2 directory; see
	// cgroup.go.
	Cgroup string
	// Base is the managed base directory sandboxes start from (SPEC §1
	// rule 10; see base.go), required with RequireNamespaces: without it,
	// or when it does not match its digest, no sandbox is created.
	Base string
	// BaseDigest, when set, pins the base's digest: a base built
	// differently is refused too.
	BaseDigest string
	// SandboxUIDBase is the first user ID of a root worker's sandboxes;
	// zero means DefaultSandboxUIDBase.
	SandboxUIDBase uint32
	// Defaults fill the zero Limits fields of every Spec.
	Defaults Limits
	// KillGrace is the time between SIGTERM and SIGKILL; zero means
	// DefaultKillGrace.
	KillGrace time.Duration
	Logger    *slog.Logger
}

// Local is the local sandbox driver: a directory per sandbox under one root,
// commands in their own session and process group under resource limits,
// inside Linux namespaces through bwrap.
//
// How a command starts (argv, outermost first):
//
//	worker (non-root):  bwrap … -- cairn-sandbox-exec -rlimit … -- program
//	worker (root):      bwrap … -- cairn-sandbox-exec -user <own uid> -rlimit … -- program
//	without namespaces: cairn-sandbox-exec -rlimit … -- program
//
// cairn-sandbox-exec (jobs/cmd/cairn-sandbox-exec) sets the rlimits on
// itself, sets no_new_privs and execs, so no instruction of the program
// runs before its limits hold and everything it starts inherits them.
// Under bwrap it runs inside the sandbox's user namespace, created before
// the limits, because the kernel counts RLIMIT_NPROC per user namespace
// against the limit of the namespace's creator: set outside, every sandbox
// of the worker's user would share one budget. Processes of user ID 0 are
// never counted, so a root worker's sandboxes run as a user ID of their own
// instead: bwrap sets the namespaces up with root's rights, and
// cairn-sandbox-exec then switches to that user with no groups and no
// capabilities, which RLIMIT_NPROC then counts alone. One small static
// program does what prlimit(1) and setpriv(1) did as two, a program start
// less on every command.
//
// Without namespaces the process group is the only containment: a process
// that moves to another session escapes Run's cleanup, and the tree can read
// whatever the worker's user can. With them the tree also lives in its own
// PID namespace, so killing bwrap kills every process in it.
type Local struct {
	root string
	// execPath is cairn-sandbox-exec on the host.
	execPath string
	// bwrap is the bwrap binary in use; empty without namespaces.
	bwrap string
	// uids is set when commands drop to a sandbox user ID.
	uids *uidPool
	// base is the verified managed base; sysBinds show it.
	base      Base
	sysBinds  []string
	cgroup    *cgroupParent
	status    Status
	defaults  Limits
	killGrace time.Duration
	logger    *slog.Logger
}

var _ Driver = (*Local)(nil)

// NewLocal returns a local driver that keeps its sandboxes under root, which
// it creates with mode 0700. With RequireNamespaces it creates one sandbox
// and runs `true` in it to check the whole command path works here; if it
// does not, the driver is returned anyway and Status says why.
func NewLocal(root string, opts LocalOptions) (*Local, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("sandbox root %q must be an absolute path", root)
	}
	if opts.KillGrace < 0 {
		return nil, fmt.Errorf("KillGrace %s must not be negative", opts.KillGrace)
	}
	if err := opts.Defaults.validate(); err != nil {
		return nil, fmt.Errorf("default limits: %w", err)
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
	execPath, err := findExec(opts.ExecPath)
	if err != nil {
		return nil, err
	}
	l := &Local{
		root:      resolved,
		execPath:  execPath,
		defaults:  opts.Defaults.withDefaults(Limits{}),
		killGrace: cmp.Or(opts.KillGrace, DefaultKillGrace),
		logger:    opts.Logger,
	}
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	cg, why, err := findCgroupParent(opts.Cgroup)
	if err != nil {
		return nil, err
	}
	l.cgroup = cg
	switch opts.Isolation {
	case NoIsolation:
		l.status = Status{Ready: true}
	case RequireNamespaces:
		l.status = l.enableNamespaces(opts)
	default:
		return nil, fmt.Errorf("Isolation %s is not an IsolationMode", opts.Isolation)
	}
	l.status.Cgroup = why
	l.status.Profile = l.profile(l.defaults)
	return l, nil
}

// enableNamespaces finds bwrap (and, for a root worker, the sandbox user
// IDs) and probes the whole command path once.
func (l *Local) enableNamespaces(opts LocalOptions) Status {
	unavailable := func(reason string, err error) Status {
		l.bwrap, l.uids, l.base, l.sysBinds = "", nil, Base{}, nil
		return Status{Reason: reason, Detail: err.Error()}
	}
	path, err := findBwrap(opts.BwrapPath)
	if err != nil {
		return unavailable("bwrap_not_found", err)
	}
	if os.Geteuid() == 0 {
		pool, err := newUIDPool(uidsDir, cmp.Or(opts.SandboxUIDBase, DefaultSandboxUIDBase), sandboxUIDCount)
		if err != nil {
			return unavailable("sandbox_uids_unavailable", err)
		}
		l.uids = pool
	}
	// The base is verified once, here: hashing it for every sandbox would
	// cost each one its start time, and the directory is refused when
	// anyone but root or the worker's user could change it afterwards.
	base, err := OpenBase(opts.Base, opts.BaseDigest)
	if err != nil {
		return unavailable("sandbox_base_unavailable", err)
	}
	binds, err := baseBinds(base)
	if err != nil {
		return unavailable("sandbox_base_unavailable", err)
	}
	l.bwrap, l.base, l.sysBinds = path, base, binds
	l.status = Status{Ready: true}
	if err := l.probe(); err != nil {
		return unavailable("bwrap_unusable", err)
	}
	return Status{Ready: true}
}

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

// probedNamespaces are the namespaces the probe compares with the
// worker's own: every sandbox must have its own of each.
var probedNamespaces = []string{"pid", "mnt", "ipc", "uts"}

// probe runs a command in a sandbox made like any other, since bwrap may be
// installed where namespaces are disabled, and the user switch or the
// limits may not work inside. The command reports its namespaces and user
// ID, which must not be the worker's: a bwrap that runs commands without
// isolating them (a shim, a wrapper) is as unusable as one that fails.
func (l *Local) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sb, err := l.Create(ctx, Spec{Name: "isolation-probe"})
	if err != nil {
		return err
	}
	defer func() { _ = sb.Destroy(context.WithoutCancel(ctx)) }()
	kinds := probedNamespaces
	if l.uids == nil {
		kinds = append([]string{"user"}, kinds...)
	}
	script := ""
	for _, k := range kinds {
		script += "readlink /proc/self/ns/" + k + "; "
	}
	var out, errOut bytes.Buffer
	code, err := sb.Run(ctx, Command{Args: []string{"sh", "-c", script + "id -u"}, Stdout: &out, Stderr: &errOut})
	if err == nil && code != 0 {
		err = fmt.Errorf("exit status %d", code)
	}
	if err != nil {
		return fmt.Errorf("probing %s: %w: %s", l.bwrap, err, bytes.TrimSpace(append(out.Bytes(), errOut.Bytes()...)))
	}
	got := strings.Fields(out.String())
	if len(got) != len(kinds)+1 {
		return fmt.Errorf("probing %s: unexpected output %q", l.bwrap, out.String())
	}
	for i, k := range kinds {
		own, err := os.Readlink("/proc/self/ns/" + k)
		if err != nil {
			return fmt.Errorf("reading the worker's %s namespace: %w", k, err)
		}
		if got[i] == own {
			return fmt.Errorf("probing %s: a sandbox command shares the worker's %s namespace", l.bwrap, k)
		}
	}
	if uid := got[len(kinds)]; l.uids != nil && uid == "0" {
		return fmt.Errorf("probing %s: a sandbox command runs as root", l.bwrap)
	}
	return nil
}

// Name returns "local".
func (l *Local) Name() string { return "local" }

// Isolated reports whether commands run under bwrap.
func (l *Local) Isolated() bool { return l.bwrap != "" }

// Status reports what sandboxes get, or why none can be created.
func (l *Local) Status() Status {
	s := l.status
	s.Profile.Namespaces = slices.Clone(s.Profile.Namespaces)
	return s
}

// profile is what a sandbox with limits lim gets from this driver.
func (l *Local) profile(lim Limits) Profile {
	if !l.status.Ready {
		return Profile{Driver: l.Name(), Isolation: IsolationUnavailable, Reason: l.status.Reason,
			Memory: Ceiling{Mechanism: MechanismNone}, Processes: Ceiling{Mechanism: MechanismNone}}
	}
	p := Profile{Driver: l.Name(), Isolation: IsolationNone, User: "worker",
		CPUSeconds: lim.MaxCPUSeconds, OpenFiles: lim.MaxOpenFiles, FileBytes: lim.MaxFileBytes,
		Memory:    Ceiling{Limit: lim.MaxMemoryBytes, Mechanism: MechanismRlimitAS},
		Processes: Ceiling{Mechanism: MechanismNone}}
	if l.bwrap != "" {
		p.Isolation, p.Network, p.Namespaces = IsolationNamespaces, "shared", l.namespaces()
		p.Base, p.BaseDigest = l.base.Version, l.base.Digest
		p.Processes = Ceiling{Limit: lim.MaxProcesses, Mechanism: MechanismNprocUserNamespace}
		if l.uids != nil {
			p.User, p.Processes.Mechanism = "dedicated_uid", MechanismNprocDedicatedUID
		}
	}
	if lim.MaxDataBytes != 0 {
		p.Memory = Ceiling{Limit: lim.MaxDataBytes, Mechanism: MechanismRlimitData}
	}
	if l.cgroup != nil {
		p.Memory = Ceiling{Limit: lim.MaxMemoryBytes, Mechanism: MechanismCgroupMemoryMax}
		p.Processes = Ceiling{Limit: lim.MaxProcesses, Mechanism: MechanismCgroupPidsMax}
	}
	return p
}

// Create makes a fresh sandbox directory under the driver's root.
func (l *Local) Create(ctx context.Context, spec Spec) (Sandbox, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if !l.status.Ready {
		return nil, fmt.Errorf("%w: %s: %s", ErrIsolationUnavailable, l.status.Reason, l.status.Detail)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("creating sandbox: %w", err)
	}
	id := newID()
	dir := filepath.Join(l.root, id)
	limits := spec.Limits.withDefaults(l.defaults)
	s := &localSandbox{
		driver:  l,
		bwrap:   l.bwrap,
		id:      id,
		name:    spec.Name,
		dir:     dir,
		work:    filepath.Join(dir, "work"),
		home:    filepath.Join(dir, "home"),
		tmp:     filepath.Join(dir, "tmp"),
		bin:     filepath.Join(dir, "bin"),
		env:     maps.Clone(spec.Env),
		limits:  limits,
		profile: l.profile(limits),
		files:   map[string]string{},
		roDirs:  slices.Clone(spec.ReadOnlyDirs),
		tools:   map[string]string{},
		runs:    map[*activeRun]struct{}{},
	}
	lock, err := makeLockedDir(dir, 0o700)
	if err != nil {
		return nil, fmt.Errorf("creating sandbox %s: %w", id, err)
	}
	s.lock = lock
	if err := s.setUp(spec.ReadOnlyFiles); err != nil {
		s.release()
		return nil, fmt.Errorf("creating sandbox %s: %w", id, err)
	}
	l.logger.InfoContext(ctx, "sandbox created", "sandbox_id", id, "sandbox_name", spec.Name, "isolation", s.profile.Isolation)
	return s, nil
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newID returns "sbx_" and 26 base32 characters of 128 random bits.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	return "sbx_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
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
