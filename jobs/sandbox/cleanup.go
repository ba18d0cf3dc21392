package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Crash cleanup. A sandbox directory holds plaintext inputs (variables, the
// run token, state), so what a dead worker left behind must go, and nothing
// a live worker still uses may. Several workers may share one root, so
// liveness is a fact the kernel keeps, not a record: the worker process that
// creates a sandbox directory holds an flock on it for as long as it exists,
// and the kernel drops that lock when the process dies, however it dies. A
// directory whose lock can be taken belongs to nobody. A directory appears
// under its final name already locked: it is made under a temporary name
// (newPrefix), locked, then renamed.
//
// Processes: under namespaces, bwrap's --die-with-parent kills the sandbox's
// PID namespace when the worker dies, and with it every process inside.
// Without namespaces nothing does, so Sweep finds the processes of dead
// sandboxes by the CAIRN_SANDBOX_ID every command's environment carries and
// kills them through pidfds, checking the marker after pinning each process,
// so a recycled PID is never signalled.

const (
	newPrefix = ".new-"
	// uidsDir holds the user-ID claims of every root worker on the host:
	// a user ID is a host resource, so two workers with different data
	// directories must not hand out the same one (they would share its
	// process budget).
	uidsDir = "/run/cairn/sandbox-uids"
	// staleNew is how old an unlocked half-made directory must be before a
	// sweep removes it (its maker locks it microseconds after making it).
	staleNew = time.Minute
	// markerEnv names the sandbox in every command's environment.
	markerEnv = "CAIRN_SANDBOX_ID"
)

// tryLock opens dir and takes an exclusive flock on it without waiting.
// ok is false when another open file description holds it.
func tryLock(path string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, false, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, true, nil
}

// makeLockedDir creates dir, locked by the returned file, so that it never
// exists unlocked under its final name.
func makeLockedDir(dir string, perm os.FileMode) (*os.File, error) {
	tmp := filepath.Join(filepath.Dir(dir), newPrefix+filepath.Base(dir))
	if err := os.Mkdir(tmp, perm); err != nil {
		return nil, err
	}
	lock, ok, err := tryLock(tmp)
	if err == nil && !ok {
		err = fmt.Errorf("%s is locked by another process", tmp)
	}
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		if lock != nil {
			_ = lock.Close()
		}
		_ = os.Remove(tmp)
		return nil, err
	}
	return lock, nil
}

// uidPool hands out the user IDs a root worker's sandboxes run as: one per
// live sandbox, claimed by an flock on a slot file, so RLIMIT_NPROC counts
// each sandbox alone and the slot frees itself when its holder dies.
type uidPool struct {
	dir  string
	base uint32
	size uint32
}

func newUIDPool(dir string, base, size uint32) (*uidPool, error) {
	if base == 0 || uint64(base)+uint64(size) > 1<<32-2 {
		return nil, fmt.Errorf("sandbox user IDs %d to %d are out of range", base, uint64(base)+uint64(size)-1)
	}
	// A user or group of the host in the range would share its sandboxes'
	// user ID: it could read their files through their processes and
	// signal them, and they would share its process budget.
	for _, db := range userDatabases {
		if name, id, ok, err := idInRange(db, base, size); err != nil {
			return nil, err
		} else if ok {
			return nil, fmt.Errorf("%s names %s with ID %d, inside the sandbox user IDs %d to %d: choose another CAIRN_SANDBOX_UID_BASE",
				db, name, id, base, uint64(base)+uint64(size)-1)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	return &uidPool{dir: dir, base: base, size: size}, nil
}

// claim returns the lowest free user ID and the lock that holds it. An ID
// that a process of the host runs as, though its slot is free, is skipped:
// a user missing from the user database (a directory service, another
// container's mapping) or a root worker with another data directory uses
// it, and a sandbox must share its user ID with nobody.
func (p *uidPool) claim() (uint32, *os.File, error) {
	for n := uint32(0); n < p.size; n++ {
		// Named by the user ID itself, so pools with other bases that
		// share the directory still claim each ID once.
		path := filepath.Join(p.dir, strconv.FormatUint(uint64(p.base+n), 10))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return 0, nil, fmt.Errorf("claiming a sandbox user ID: %w", err)
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil && !processRunsAs(p.base+n) {
			return p.base + n, f, nil
		}
		_ = f.Close()
		if err != nil && !errors.Is(err, unix.EWOULDBLOCK) {
			return 0, nil, fmt.Errorf("claiming a sandbox user ID: %w", err)
		}
	}
	return 0, nil, fmt.Errorf("all %d sandbox user IDs from %d are in use", p.size, p.base)
}

// userDatabases are the files whose users and groups a sandbox user ID
// must not be.
var userDatabases = []string{"/etc/passwd", "/etc/group"}

// idInRange finds an entry of a passwd- or group-format file whose ID (the
// third field) lies in [base, base+size). A missing file has none.
func idInRange(path string, base, size uint32) (name string, id uint64, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("reading %s: %w", path, err)
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) < 3 {
			continue
		}
		v, err := strconv.ParseUint(f[2], 10, 32)
		if err == nil && v >= uint64(base) && v < uint64(base)+uint64(size) {
			return f[0], v, true, nil
		}
	}
	return "", 0, false, nil
}

// processRunsAs reports whether a process of the host runs as uid: the
// owner of /proc/<pid>, its effective user ID (root's for the rare process
// that made itself undumpable). If /proc cannot be read, every ID counts as
// used: no sandbox then gets one.
func processRunsAs(uid uint32) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		if c := e.Name()[0]; c < '0' || c > '9' {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // exited meanwhile
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == uid {
			return true
		}
	}
	return false
}

// SweepResult counts what a Sweep removed.
type SweepResult struct {
	Directories int `json:"directories"`
	Processes   int `json:"processes"`
	Cgroups     int `json:"cgroups"`
}

// Sweep removes what dead owners left under the driver's root: sandbox
// directories no live process holds, the processes still running for them,
// and their cgroups. Live sandboxes, of this worker or any other sharing
// the root, are never touched. Run it when a worker starts and now and then.
func (l *Local) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	entries, err := os.ReadDir(l.root)
	if err != nil {
		return res, fmt.Errorf("sweeping sandboxes: %w", err)
	}
	type dead struct {
		path string
		lock *os.File
	}
	var found []dead
	ids := map[string]bool{}
	defer func() {
		for _, d := range found {
			_ = d.lock.Close()
		}
	}()
	for _, e := range entries {
		name := e.Name()
		id, half := strings.CutPrefix(name, newPrefix)
		if !strings.HasPrefix(id, "sbx_") || !e.IsDir() {
			continue
		}
		if half {
			if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < staleNew {
				continue
			}
		}
		path := filepath.Join(l.root, name)
		lock, ok, err := tryLock(path)
		if err != nil || !ok {
			continue // gone meanwhile, or alive
		}
		found = append(found, dead{path, lock})
		ids[id] = true
	}
	if len(ids) > 0 {
		res.Processes = killMarked(ctx, ids)
	}
	var errs []error
	for _, d := range found {
		id := strings.TrimPrefix(filepath.Base(d.path), newPrefix)
		if l.cgroup != nil {
			if _, err := os.Stat(filepath.Join(l.cgroup.dir, id)); err == nil {
				if err := removeCgroup(filepath.Join(l.cgroup.dir, id)); err != nil {
					errs = append(errs, err)
				} else {
					res.Cgroups++
				}
			}
		}
		if err := removeTree(d.path); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Directories++
	}
	n, err := l.sweepCgroups()
	res.Cgroups += n
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("sweeping sandboxes: %w", err)
	}
	return res, nil
}

// sweepCgroups removes sandbox cgroups whose directory is gone or unlocked.
// Create makes the directory before the cgroup and Destroy removes the
// cgroup first, so a live sandbox's cgroup always has a locked directory.
func (l *Local) sweepCgroups() (int, error) {
	if l.cgroup == nil {
		return 0, nil
	}
	entries, err := os.ReadDir(l.cgroup.dir)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "sbx_") {
			continue
		}
		lock, ok, err := tryLock(filepath.Join(l.root, e.Name()))
		if err == nil && !ok {
			continue
		}
		if err := removeCgroup(filepath.Join(l.cgroup.dir, e.Name())); err != nil {
			errs = append(errs, err)
		} else {
			n++
		}
		if lock != nil {
			_ = lock.Close()
		}
	}
	return n, errors.Join(errs...)
}

// killMarked kills every process whose environment names one of ids, in
// rounds until none is left, since a process may fork while the previous
// round runs. It returns how many processes it killed.
func killMarked(ctx context.Context, ids map[string]bool) int {
	killed := 0
	for round := 0; round < 50 && ctx.Err() == nil; round++ {
		pids := markedProcesses(ids)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if killVerified(pid, func(pid int) bool { return markedBy(pid, ids) }) {
				killed++
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return killed
}

// markedProcesses lists the live processes carrying one of ids' markers.
func markedProcesses(ids map[string]bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if markedBy(pid, ids) && !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// markedBy reports whether pid's initial environment carries a marker of
// one of ids.
func markedBy(pid int, ids map[string]bool) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(markerEnv+"=")); ok && ids[string(v)] {
			return true
		}
	}
	return false
}

// zombie reports whether pid has exited and waits to be reaped; killing it
// again would count it twice.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// killVerified pins pid with a pidfd, checks it is still the process
// verify wants, and SIGKILLs it through the pidfd. If the process died
// before the check, its PID may name another process by then, but the
// pidfd still names the dead one, so the signal goes nowhere.
func killVerified(pid int, verify func(int) bool) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if !verify(pid) {
		return false
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}
