// Command cairn-sandbox-exec is the last step before a sandboxed program
// runs: it sets the sandbox's resource limits on itself, drops a root
// worker's command to the sandbox's own user with no capabilities, forbids
// gaining privileges through setuid programs, and execs the program. It
// replaces a prlimit(1) and setpriv(1) pair, two program starts where one
// does, and is started by the worker's sandbox driver (jobs/sandbox), under
// bwrap when the sandbox has namespaces. It is small and static on purpose:
// it runs once per sandboxed command.
//
//	cairn-sandbox-exec [-user ID] [-rlimit NAME=VALUE]... -- PROGRAM [ARG]...
//	cairn-sandbox-exec -user ID [-rlimit NAME=VALUE]... -serve
//
// NAME is one of nofile, fsize, cpu, core, as, data, nproc; each is set as
// both soft and hard limit. The exec form needs nofile (the driver always
// sets it): its raw exec does not put back the soft open-file limit the Go
// runtime raised at start, so the program gets the one given. Any failure
// exits 127 before PROGRAM starts.
//
// With -serve it supervises a session (serve.go): as the init of the
// sandbox's PID namespace it runs the commands the driver sends over
// descriptor 3, one at a time, each under those limits and as that user,
// and kills whatever a command left running before it answers.
package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// exitSetupFailed is the status of a command that never started, as a
// shell reports a program it could not run.
const exitSetupFailed = 127

// rlimitNames are the limits the sandbox driver sets.
var rlimitNames = map[string]int{
	"nofile": unix.RLIMIT_NOFILE, "fsize": unix.RLIMIT_FSIZE, "cpu": unix.RLIMIT_CPU, "core": unix.RLIMIT_CORE,
	"as": unix.RLIMIT_AS, "data": unix.RLIMIT_DATA, "nproc": unix.RLIMIT_NPROC,
}

type rlimit struct {
	resource int
	value    uint64
}

type invocation struct {
	// user is the user and group ID to become; -1 keeps the caller's.
	user int
	// serve supervises a session instead of running argv.
	serve bool
	// rlimits are set in this order.
	rlimits []rlimit
	argv    []string
}

func main() {
	// Capability sets, the bounding set and no_new_privs belong to a
	// thread, and exec carries over the calling thread's: everything below
	// runs on this one.
	runtime.LockOSThread()
	// Until exec this process may be root and holds the command's
	// environment: it must never dump core, whatever the limits or
	// GOTRACEBACK say. Exec makes the program dumpable again, under its
	// own RLIMIT_CORE.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "cairn-sandbox-exec: making the process undumpable:", err)
		os.Exit(exitSetupFailed)
	}
	inv, err := parse(os.Args[1:])
	switch {
	case err == nil && inv.serve:
		err = serve(inv)
		if err == nil {
			os.Exit(0)
		}
	case err == nil:
		err = enter(inv)
	}
	fmt.Fprintln(os.Stderr, "cairn-sandbox-exec:", err)
	os.Exit(exitSetupFailed)
}

func parse(args []string) (invocation, error) {
	inv := invocation{user: -1}
	for len(args) > 0 {
		arg := args[0]
		args = args[1:]
		if arg == "-serve" {
			if len(args) != 0 || inv.user == -1 {
				return inv, errors.New("-serve comes last, after -user")
			}
			inv.serve = true
			return inv, nil
		}
		if arg == "--" {
			if len(args) == 0 {
				return inv, errors.New("no program after --")
			}
			if !slices.ContainsFunc(inv.rlimits, func(l rlimit) bool { return l.resource == unix.RLIMIT_NOFILE }) {
				return inv, errors.New("-rlimit nofile=N is required before --")
			}
			inv.argv = args
			return inv, nil
		}
		if len(args) == 0 {
			return inv, fmt.Errorf("%s needs a value", arg)
		}
		value := args[0]
		args = args[1:]
		switch arg {
		case "-user":
			// Any user ID the kernel takes but root and (uid_t)-1, which
			// setresuid reads as "leave unchanged".
			id, err := strconv.ParseUint(value, 10, 32)
			if err != nil || id == 0 || id == math.MaxUint32 {
				return inv, fmt.Errorf("-user %q is not a nonzero user ID", value)
			}
			inv.user = int(id)
		case "-rlimit":
			name, v, ok := strings.Cut(value, "=")
			resource, known := rlimitNames[name]
			n, err := strconv.ParseUint(v, 10, 64)
			if !ok || !known || err != nil {
				return inv, fmt.Errorf("-rlimit %q is not NAME=VALUE with a known NAME", value)
			}
			lim := rlimit{resource, n}
			if resource == unix.RLIMIT_CORE {
				// No core file from the moment any limit is set.
				inv.rlimits = append([]rlimit{lim}, inv.rlimits...)
			} else {
				inv.rlimits = append(inv.rlimits, lim)
			}
		default:
			return inv, fmt.Errorf("unknown argument %q", arg)
		}
	}
	return inv, errors.New("no -- before the program")
}

// enter applies the invocation to this process and execs its program; it
// returns only on failure. An address-space ceiling may lie below what the
// Go runtime has already mapped, and then an allocation that grows the heap
// kills this process (status 2, "out of memory"), as may a thread the
// scheduler starts. So everything exec needs is built first, garbage
// collection is off, the goroutine gets a fresh time slice (a preemption
// could start a thread), and from the first limit on execUnderLimits makes
// only raw system calls.
func enter(inv invocation) error {
	// The driver resolved the program in the sandbox's PATH already.
	if !strings.Contains(inv.argv[0], "/") {
		return fmt.Errorf("program %q is not a path", inv.argv[0])
	}
	program, err := syscall.BytePtrFromString(inv.argv[0])
	if err != nil {
		return fmt.Errorf("program %q: %w", inv.argv[0], err)
	}
	argv, err := syscall.SlicePtrFromStrings(inv.argv)
	if err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	env, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	// SetGCPercent(-1) also waits for a collection in progress to end.
	debug.SetGCPercent(-1)
	runtime.Gosched()
	execUnderLimits(inv, program, argv, env)
	return nil // not reached
}

// execUnderLimits sets the limits, drops a root worker's command to the
// sandbox's user, sets no_new_privs and execs. Nothing in it allocates or
// lets the scheduler run: the calls are raw, and a failure is reported by
// failRaw. syscall.Exec would build the arguments again, on the heap; it
// also holds off thread creation during exec, which matters only for a
// set-user-ID program's privileges, and no_new_privs forbids those anyway.
func execUnderLimits(inv invocation, program *byte, argv, env []*byte) {
	for _, lim := range inv.rlimits {
		// A raw system call (and an atomic store, which tells the runtime
		// not to put its own open-file limit back in a child).
		if err := syscall.Setrlimit(lim.resource, &syscall.Rlimit{Cur: lim.value, Max: lim.value}); err != nil {
			failRaw("setting an rlimit", err)
		}
	}
	if inv.user >= 0 {
		becomeUser(inv.user)
	}
	if err := rawSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		failRaw("setting no_new_privs", err)
	}
	// The conversions are in the call itself, which keeps what they point
	// at alive through it.
	_, _, errno := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(program)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&env[0])))
	runtime.KeepAlive(argv)
	runtime.KeepAlive(env)
	failRaw("executing the program", errno)
}

// becomeUser switches to id as user and group with no supplementary groups
// and empties every capability set, the bounding set first, which needs
// CAP_SETPCAP and so must go while the process is still privileged. It
// runs under the command's limits (see execUnderLimits).
func becomeUser(id int) {
	for c := 0; ; c++ {
		err := rawSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0)
		if err == unix.EINVAL {
			break // past the kernel's last capability
		}
		if err != nil {
			failRaw("dropping a capability from the bounding set", err)
		}
	}
	// Credentials belong to a thread too, and exec runs the program with
	// the calling thread's. Go's own wrappers change every thread of the
	// process by signalling each, which costs more than the rest of this
	// program; no other thread runs anything but the Go runtime, and exec
	// ends them all.
	if err := rawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); err != nil {
		failRaw("clearing supplementary groups", err)
	}
	if err := rawSyscall(unix.SYS_SETRESGID, uintptr(id), uintptr(id), uintptr(id)); err != nil {
		failRaw("switching group", err)
	}
	if err := rawSyscall(unix.SYS_SETRESUID, uintptr(id), uintptr(id), uintptr(id)); err != nil {
		failRaw("switching user", err)
	}
	// The user switch emptied the permitted, effective and ambient sets;
	// the inheritable set survives it and is emptied here.
	if err := rawSyscall(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		failRaw("clearing ambient capabilities", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if _, _, errno := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&none[0])), 0); errno != 0 {
		failRaw("clearing capabilities", errno)
	}
}

// failRaw reports a failure under the command's limits on standard error
// and exits 127, as main does, without allocating: the message is built
// on the stack from constant strings (a known errno's text is one).
func failRaw(step string, err error) {
	var msg [256]byte
	n := copy(msg[:], "cairn-sandbox-exec: ")
	n += copy(msg[n:], step)
	n += copy(msg[n:], ": ")
	if errno, ok := err.(syscall.Errno); ok {
		n += copy(msg[n:], errno.Error())
	}
	n += copy(msg[n:], "\n")
	_, _, _ = unix.RawSyscall(unix.SYS_WRITE, 2, uintptr(unsafe.Pointer(&msg[0])), uintptr(n))
	_, _, _ = unix.RawSyscall(unix.SYS_EXIT_GROUP, exitSetupFailed, 0, 0)
}

// rawSyscall makes a system call the scheduler never hears of (see enter);
// its error is the bare errno.
func rawSyscall(trap, a1, a2, a3 uintptr) error {
	if _, _, errno := unix.RawSyscall(trap, a1, a2, a3); errno != 0 {
		return errno
	}
	return nil
}
