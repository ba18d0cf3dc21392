package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cairnhq/cairn/jobs/sandbox/sessionwire"
)

// controlFD is the session's socket, the descriptor the driver passes.
const controlFD = 3

// serve runs the commands of one session until the driver closes the
// socket. It returns nil then, and an error if the session cannot go on.
//
// It runs as the PID namespace's init (bwrap --as-pid-1) and stays root,
// keeping the capabilities the driver's bwrap leaves it (CAP_KILL among
// them), so that a command cannot reach it: not by signals (another user,
// and init ignores what it does not handle), ptrace or /proc (another user,
// and undumpable), nor by changing its limits or priority, which the next
// command inherits. Each command gets what the exec form gives one: the
// limits are set on the supervisor, once, and inherited; everything a
// command could gain privileges through is emptied on the supervisor too
// (bounding, ambient and inheritable sets; no_new_privs), which keeps its
// own effective capabilities; and the forked command becomes the sandbox's
// user, with no groups, before it execs, which empties the rest.
//
// Between commands nothing may carry over but files: once a command has
// exited, everything else in the namespace is killed (kill(-1) from init
// reaches every other process in it) and reaped (init inherits every
// orphan) before the answer goes back. Outside such a namespace kill(-1)
// would reach the worker's own processes, so serve refuses to start there.
func serve(inv invocation) error {
	if os.Getpid() != 1 {
		return errors.New("-serve needs to be the init of a PID namespace of its own, as bwrap --unshare-pid --as-pid-1 makes it")
	}
	if inv.user < 0 {
		return errors.New("-serve needs -user: commands never run as the supervisor's root")
	}
	for _, lim := range inv.rlimits {
		if err := syscall.Setrlimit(lim.resource, &syscall.Rlimit{Cur: lim.value, Max: lim.value}); err != nil {
			return fmt.Errorf("setting rlimit %d: %w", lim.resource, err)
		}
	}
	if err := dropForCommands(); err != nil {
		return err
	}
	credential := &syscall.Credential{Uid: uint32(inv.user), Gid: uint32(inv.user), Groups: []uint32{}}
	// Init gets only the signals it handles; these are caught so that none
	// sent from outside by mistake ends the session.
	signal.Notify(make(chan os.Signal, 1), unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT)
	unix.CloseOnExec(controlFD)
	devNull, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening /dev/null: %w", err)
	}
	// Everything that could keep the session from running a command is
	// behind it now; the driver tells a sandbox that never came up from a
	// command that failed by this frame.
	if err := sessionwire.WriteReady(controlFD); err != nil {
		return err
	}
	s := &supervisor{requests: make(chan received)}
	go s.read()
	for r := range s.requests {
		if r.err != nil {
			if errors.Is(r.err, io.EOF) {
				return nil
			}
			return r.err
		}
		status := s.run(*r.msg.Request, credential, devNull, r.fds[0], r.fds[1])
		if err := sessionwire.WriteReply(controlFD, sessionwire.Reply{Status: status}); err != nil {
			return err
		}
	}
	return nil
}

type received struct {
	msg sessionwire.Message
	fds []int
	err error
}

// supervisor runs one command at a time.
type supervisor struct {
	requests chan received
	// mu guards running, whether a command's processes are there to
	// signal, and stop, the driver's stop signal: one that came before
	// the command existed is sent as soon as it does. A stop ends the
	// session, so it is never taken back.
	mu      sync.Mutex
	running bool
	stop    unix.Signal
}

// read passes requests on and acts on signals itself, since they arrive
// while the other goroutine waits for the command.
func (s *supervisor) read() {
	defer close(s.requests)
	for {
		msg, fds, err := sessionwire.Read(controlFD)
		switch {
		case err != nil:
			s.requests <- received{err: err}
			return
		case msg.Signal != 0:
			s.mu.Lock()
			s.stop = msg.Signal
			if s.running {
				// Every process in the namespace but this one.
				_ = unix.Kill(-1, msg.Signal)
			}
			s.mu.Unlock()
		case msg.Request != nil:
			s.requests <- received{msg: msg, fds: fds}
		default:
			s.requests <- received{err: errors.New("a session frame that is neither a request nor a signal")}
			return
		}
	}
}

// run starts a request's command, waits for it and clears the sandbox of
// everything it left, and returns its exit status.
func (s *supervisor) run(req sessionwire.Request, cred *syscall.Credential, stdin, stdout, stderr int) int {
	defer func() {
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}()
	// A process group of its own, so that what the command signals as its
	// group is its own tree. The user switch in the child, before exec,
	// empties its permitted, effective and ambient sets.
	pid, err := syscall.ForkExec(req.Argv[0], req.Argv, &syscall.ProcAttr{
		Dir: req.Dir, Env: req.Env, Files: []uintptr{uintptr(stdin), uintptr(stdout), uintptr(stderr)},
		Sys: &syscall.SysProcAttr{Setpgid: true, Credential: cred},
	})
	if err != nil {
		_, _ = unix.Write(stderr, fmt.Appendf(nil, "cairn-sandbox-exec: starting %s: %v\n", req.Argv[0], err))
	} else {
		s.mu.Lock()
		s.running = true
		if s.stop != 0 {
			_ = unix.Kill(-1, s.stop)
		}
		s.mu.Unlock()
	}
	// Only the command may hold its output open: the driver reads until
	// the last writer is gone.
	_ = unix.Close(stdout)
	_ = unix.Close(stderr)
	if err != nil {
		return exitSetupFailed
	}
	status := exitSetupFailed
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			break
		}
		if got == pid {
			status = exitStatus(ws)
			break
		}
	}
	clearSandbox()
	return status
}

// dropForCommands empties, on every thread of the supervisor (a command
// is forked from whichever runs it), what a command could gain
// capabilities through: the bounding set (which needs CAP_SETPCAP, so it
// goes first), the ambient and inheritable sets, and sets no_new_privs.
// The supervisor's own permitted and effective sets stay: it needs them to
// make each command the sandbox's user and to clear the namespace.
func dropForCommands() error {
	all := func(trap uintptr, args ...uintptr) error {
		var a [6]uintptr
		copy(a[:], args)
		if _, _, errno := syscall.AllThreadsSyscall6(trap, a[0], a[1], a[2], a[3], a[4], a[5]); errno != 0 {
			return errno
		}
		return nil
	}
	for c := 0; ; c++ {
		err := all(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c))
		if errors.Is(err, unix.EINVAL) {
			break // past the kernel's last capability
		}
		if err != nil {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if err := all(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL); err != nil {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	caps[0].Inheritable, caps[1].Inheritable = 0, 0
	if err := all(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&caps[0]))); err != nil {
		return fmt.Errorf("clearing inheritable capabilities: %w", err)
	}
	if err := all(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	return nil
}

// clearSandbox kills every process in the namespace but this one, its
// init, and reaps them all. Killing again before each wait catches a
// process forked while the previous kill went round.
func clearSandbox() {
	for {
		_ = unix.Kill(-1, unix.SIGKILL)
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR), got > 0:
		case err != nil:
			return // ECHILD: nothing is left
		default:
			// Killed, not yet exited.
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// exitStatus reports death by signal n as 128+n, as shells do.
func exitStatus(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
