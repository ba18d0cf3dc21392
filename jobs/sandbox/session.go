package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairnhq/cairn/jobs/sandbox/sessionwire"
)

// Session runs commands one after another in one entry into the sandbox.
// Each Run has Sandbox.Run's contract; in between, files carry over and
// processes do not: whatever a command left running is killed before its
// Run returns. A command stopped by its context, its wall clock or Destroy
// ends the session, and later Runs fail. A Session is for one goroutine.
type Session interface {
	// Enter makes the entry now instead of at the first Run, so the
	// namespaces and the supervisor are set up while the caller prepares
	// the first command; tools installed after it are not in the session.
	// Nothing of the caller's runs until that Run. An entry that cannot
	// be made ends the session, and every later Run says why.
	Enter() error
	Run(ctx context.Context, c Command) (exitCode int, err error)
	// Close ends the session and waits for it to be gone. It is
	// idempotent.
	Close() error
}

// errSessionEnded is what a Run on a session that can no longer run
// anything returns, wrapped with why.
var errSessionEnded = errors.New("sandbox session ended")

// Session starts nothing yet: the entry is made by Enter or the first Run,
// so tools installed until then are in it. A shared entry needs a supervisor the
// commands cannot touch: a user of its own, root, so only a root worker's
// sandboxes (whose commands run as a user ID of their own) get one. A
// non-root worker's commands run as its only user inside the user
// namespace, the one a supervisor would be too, and each Run of such a
// session is a Run of the sandbox, as it is without namespaces. So is each
// Run of a sandbox whose memory ceiling leaves no room for the supervisor.
func (s *localSandbox) Session() Session {
	if s.bwrap == "" || s.uid == 0 || !s.roomForSupervisor() {
		return sandboxSession{s}
	}
	return &bwrapSession{s: s, setupErr: TailBuffer{Limit: 4 << 10}}
}

// Memory the session's supervisor needs under the per-process ceilings it
// sets on itself for its commands to inherit: it is a Go program, which
// maps over a gigabyte of address space before it allocates anything, and
// a Go runtime that cannot map what it needs dies. A ceiling this low
// stops tofu, a Go program too, at least as surely.
const (
	supervisorAddressSpace = 2 << 30
	supervisorData         = 256 << 20
)

func (s *localSandbox) roomForSupervisor() bool {
	as, data := s.limits.MaxMemoryBytes, s.limits.MaxDataBytes
	var own unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_AS, &own) == nil {
		as = min(as, own.Max)
	}
	if unix.Getrlimit(unix.RLIMIT_DATA, &own) == nil && data != 0 {
		data = min(data, own.Max)
	}
	switch {
	case s.profile.Memory.Mechanism == MechanismRlimitAS && as < supervisorAddressSpace:
		return false
	case data != 0 && data < supervisorData:
		return false
	}
	return true
}

// sandboxSession runs each command as Sandbox.Run does.
type sandboxSession struct{ s *localSandbox }

// Enter has nothing to make: each Run enters on its own.
func (p sandboxSession) Enter() error                                    { return nil }
func (p sandboxSession) Run(ctx context.Context, c Command) (int, error) { return p.s.Run(ctx, c) }
func (p sandboxSession) Close() error                                    { return nil }

// bwrapSession is one bwrap whose program, the PID namespace's init, is
// cairn-sandbox-exec -serve with the sandbox's user and limits; commands
// go to it over a socket (sessionwire), each with its own output pipes,
// and its answer comes once the command and its leftovers are gone.
type bwrapSession struct {
	s *localSandbox
	// ended is why no further command can run; set once.
	ended error
	// control is the worker's end of the socket, read by readReplies and
	// closed once both it and the session are done (closeControl).
	control      int
	replies      chan replyOrError
	readerDone   chan struct{}
	closeControl sync.Once
	// bwrap is the session's leader: its PID is the group ID that
	// killGroup signals until reaped says the PID may be reused.
	bwrap   *exec.Cmd
	exited  chan struct{}
	watched chan struct{}
	mu      sync.Mutex
	reaped  bool
	// entered is set when the supervisor says it is up: until then no
	// command of the session has run, whatever ended it.
	entered atomic.Bool
	// setupErr is the end of bwrap's and the supervisor's own output (one
	// pipe for both, so one writer), read once they are gone, for a
	// session that fails before answering.
	setupErr TailBuffer
}

type replyOrError struct {
	reply sessionwire.Reply
	err   error
}

func (b *bwrapSession) Run(ctx context.Context, c Command) (int, error) {
	s := b.s
	if err := c.validate(); err != nil {
		return -1, err
	}
	if b.ended != nil {
		return -1, fmt.Errorf("running %s: %w", c.Args[0], b.ended)
	}
	ctx, done, dir, prog, err := s.admit(ctx, c)
	if err != nil {
		return -1, err
	}
	defer done()
	if err := b.Enter(); err != nil {
		return -1, fmt.Errorf("running %s: %w", c.Args[0], err)
	}
	ctx, stop := context.WithTimeoutCause(ctx, s.limits.WallClock, ErrTimedOut)
	defer stop()
	return b.execute(ctx, dir, append([]string{prog}, c.Args[1:]...), c)
}

// Enter starts the session's bwrap unless it already did. bwrap sets up
// the namespaces and mounts, and the supervisor starts, while the caller
// goes on: the first command's request waits in the socket until the
// supervisor reads it.
func (b *bwrapSession) Enter() error {
	if b.ended != nil {
		return b.ended
	}
	if b.bwrap != nil {
		return nil
	}
	if err := b.start(); err != nil {
		b.ended = fmt.Errorf("%w: %w: %w", errSessionEnded, ErrNotEntered, err)
		return b.ended
	}
	return nil
}

// start makes the sandbox entry: bwrap around the supervisor, with the
// socket's other end as descriptor 3.
func (b *bwrapSession) start() error {
	s := b.s
	limits, err := s.rlimitArgs()
	if err != nil {
		return err
	}
	supervisor := append(append([]string{execInside, "-user", strconv.FormatUint(uint64(s.uid), 10)}, limits...), "-serve")
	// The supervisor is the namespace's init, so nothing outlives a
	// command under an init of the command's making, and it keeps
	// CAP_KILL to clear the namespace of the sandbox user's processes.
	argv := append([]string{s.bwrap}, s.bwrapArgs(s.work, supervisor, "--as-pid-1", "--cap-add", "CAP_KILL")...)
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("making the session socket: %w", err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "session")
	defer theirs.Close()
	lifetime, unregister, err := s.register(context.Background())
	if err != nil {
		_ = unix.Close(pair[0])
		return err
	}
	b.control = pair[0]
	b.replies, b.readerDone = make(chan replyOrError, 1), make(chan struct{})
	b.exited, b.watched = make(chan struct{}), make(chan struct{})
	b.bwrap = &exec.Cmd{
		Path: argv[0], Args: argv, Env: s.environ(s.work, nil), Dir: s.work,
		Stdout: &b.setupErr, Stderr: &b.setupErr, ExtraFiles: []*os.File{theirs},
		SysProcAttr: s.leaderAttr(), WaitDelay: s.driver.killGrace,
	}
	started := make(chan error, 1)
	go func() {
		// bwrap's --die-with-parent fires when the thread that forked it
		// exits: this one is held for the session's whole life.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := b.bwrap.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waitExited(b.bwrap.Process.Pid)
		b.mu.Lock()
		// The leader has exited but is not reaped: its group is still
		// ours to kill, whatever is left in it.
		_ = unix.Kill(-b.bwrap.Process.Pid, unix.SIGKILL)
		b.reaped = true
		b.mu.Unlock()
		_ = b.bwrap.Wait()
		close(b.exited)
	}()
	if err := <-started; err != nil {
		_ = unix.Close(b.control)
		unregister()
		b.bwrap = nil
		return fmt.Errorf("starting the sandbox session: %w", err)
	}
	s.driver.logger.Debug("sandbox session started", "sandbox_id", s.id, "pid", b.bwrap.Process.Pid)
	go b.readReplies()
	go func() {
		// Destroy ends the session at once.
		select {
		case <-lifetime.Done():
			b.killGroup()
		case <-b.exited:
		}
		<-b.exited
		unregister()
		close(b.watched)
	}()
	return nil
}

// readReplies hands each frame the supervisor sends to the Run waiting
// for it, until the supervisor is gone.
func (b *bwrapSession) readReplies() {
	defer close(b.readerDone)
	for {
		msg, fds, err := sessionwire.Read(b.control)
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		if err == nil && msg.Ready && !b.entered.Load() {
			b.entered.Store(true)
			continue
		}
		if err == nil && msg.Reply == nil {
			err = errors.New("the session's supervisor sent a frame that is not a reply")
		}
		r := replyOrError{err: err}
		if err != nil {
			// The session's end, kept for the next Run even when none
			// waits now: a supervisor that died between commands must
			// fail the next one, not leave it waiting for its wall clock
			// (the place is taken only by a reply nobody read, after a
			// stop, which already ended the session).
			select {
			case b.replies <- r:
			default:
			}
			return
		}
		r.reply = *msg.Reply
		// A reply nobody waits for (a command stopped as it ended) is
		// dropped once the session is over.
		select {
		case b.replies <- r:
		case <-b.watched:
			return
		}
	}
}

// killGroup kills the session's whole process group while its leader's PID
// still names it.
func (b *bwrapSession) killGroup() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.reaped {
		_ = unix.Kill(-b.bwrap.Process.Pid, unix.SIGKILL)
	}
}

// execute sends one command and waits for its answer; a stop follows
// Command's StopSignal and StopGrace, and ends the session.
func (b *bwrapSession) execute(ctx context.Context, dir string, argv []string, c Command) (int, error) {
	s := b.s
	logger := s.driver.logger.With("sandbox_id", s.id, "program", c.Args[0])
	if ctx.Err() != nil {
		// Stopped before it started: nothing is sent, and like any stop
		// this ends the session.
		b.end(errors.New("a command was stopped"))
		return -1, stopError(ctx, c, s.limits.WallClock)
	}
	outputs, err := startOutputs(c.Stdout, c.Stderr)
	if err != nil {
		return -1, err
	}
	defer outputs.close()
	req := sessionwire.Request{Dir: dir, Argv: argv, Env: s.environ(dir, c.Env)}
	err = sessionwire.WriteRequest(b.control, req, outputs.stdoutFD(), outputs.stderrFD())
	// The supervisor has its own copies now; the worker keeps only the
	// reading ends, so the output ends when the command's tree does.
	outputs.closeWriters()
	if err != nil {
		b.end(err)
		return -1, fmt.Errorf("running %s: %w", c.Args[0], b.ended)
	}
	logger.DebugContext(ctx, "sandbox command started in session")

	var stopErr error
	select {
	case r := <-b.replies:
		if r.err != nil {
			b.end(r.err)
			return -1, fmt.Errorf("running %s: %w", c.Args[0], b.ended)
		}
		// The command and all it started are gone; a pipe still open
		// was passed outside the sandbox, and gets what Run gives it.
		if !outputs.waitFor(s.driver.killGrace) {
			logger.WarnContext(ctx, "sandbox command output cut off: a process outside the sandbox held its pipes")
		}
		return r.reply.Status, nil
	case <-ctx.Done():
		cause := context.Cause(ctx)
		stopErr = stopError(ctx, c, s.limits.WallClock)
		logger.InfoContext(ctx, "sandbox command terminating", "reason", cause.Error())
		if !errors.Is(cause, ErrDestroyed) {
			b.terminate(c)
		}
	}
	// A stopped command ends its session: what is left is killed with it.
	b.end(errors.New("a command was stopped"))
	outputs.waitFor(s.driver.killGrace)
	return -1, stopErr
}

// stopError is what Run returns for a command its ctx stopped.
func stopError(ctx context.Context, c Command, wallClock time.Duration) error {
	cause := context.Cause(ctx)
	if errors.Is(cause, ErrTimedOut) {
		return fmt.Errorf("running %s: %w after %s", c.Args[0], ErrTimedOut, wallClock)
	}
	return fmt.Errorf("running %s: %w: %w", c.Args[0], ErrCanceled, cause)
}

// terminate gives the running command its stop signal and grace, and
// returns when it has been answered for or the grace ran out.
func (b *bwrapSession) terminate(c Command) {
	sig := cmp.Or(c.StopSignal, unix.SIGTERM)
	if err := sessionwire.WriteSignal(b.control, sig); err != nil {
		return
	}
	grace := time.NewTimer(cmp.Or(c.StopGrace, b.s.driver.killGrace))
	defer grace.Stop()
	select {
	case <-b.replies:
	case <-b.exited:
	case <-grace.C:
	}
}

// end records why the session can run nothing more (with what bwrap and
// the supervisor said themselves), kills it and waits for it to be gone.
func (b *bwrapSession) end(cause error) {
	b.killGroup()
	b.finish()
	if b.ended == nil {
		if said := strings.TrimSpace(b.setupErr.String()); said != "" {
			cause = fmt.Errorf("%w (%s)", cause, said)
		}
		// The reader is done: whether the supervisor came up is settled.
		if !b.entered.Load() {
			cause = fmt.Errorf("%w: %w", ErrNotEntered, cause)
		}
		b.ended = fmt.Errorf("%w: %w", errSessionEnded, cause)
	}
}

// finish waits for the session's processes and its reader to be done,
// then closes the socket: no write or read uses its number after that.
func (b *bwrapSession) finish() {
	<-b.watched
	<-b.readerDone
	b.closeControl.Do(func() { _ = unix.Close(b.control) })
}

// Close tells the supervisor to finish, which ends bwrap; a session that
// does not end within the driver's KillGrace is killed.
func (b *bwrapSession) Close() error {
	if b.bwrap == nil {
		b.ended = cmp.Or(b.ended, errSessionEnded)
		return nil
	}
	if b.ended == nil {
		b.ended = errSessionEnded
		// Shut down, not closed: readReplies may be reading it.
		_ = unix.Shutdown(b.control, unix.SHUT_WR)
		grace := time.NewTimer(b.s.driver.killGrace)
		defer grace.Stop()
		select {
		case <-b.exited:
		case <-grace.C:
		}
	}
	b.killGroup()
	b.finish()
	return nil
}

// commandOutputs are the pipes of one command's standard output and error
// and the copies from them to the command's writers.
type commandOutputs struct {
	readers [2]*os.File
	writers [2]*os.File
	copied  chan struct{}
}

func startOutputs(stdout, stderr io.Writer) (*commandOutputs, error) {
	o := &commandOutputs{copied: make(chan struct{}, 2)}
	for i, w := range []io.Writer{stdout, stderr} {
		r, wr, err := os.Pipe()
		if err != nil {
			o.closeWriters()
			o.close()
			return nil, fmt.Errorf("making a command's output pipe: %w", err)
		}
		o.readers[i], o.writers[i] = r, wr
		go func() {
			_, _ = io.Copy(cmp.Or[io.Writer](w, io.Discard), r)
			o.copied <- struct{}{}
		}()
	}
	return o, nil
}

func (o *commandOutputs) stdoutFD() int { return int(o.writers[0].Fd()) }
func (o *commandOutputs) stderrFD() int { return int(o.writers[1].Fd()) }

func (o *commandOutputs) closeWriters() {
	for _, w := range o.writers {
		if w != nil {
			_ = w.Close()
		}
	}
}

// waitFor waits up to grace for both copies to reach the end of their
// pipes, and reports whether they did.
func (o *commandOutputs) waitFor(grace time.Duration) bool {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for range 2 {
		select {
		case <-o.copied:
		case <-timer.C:
			return false
		}
	}
	return true
}

// close ends the copies, whatever they were still reading.
func (o *commandOutputs) close() {
	for _, r := range o.readers {
		if r != nil {
			_ = r.Close()
		}
	}
}

// TailBuffer keeps the last Limit bytes written to it. It holds up to
// twice that before it drops the older half: every tofu command's stderr
// passes through one, and moving the whole tail on each small write of a
// chatty command would cost more than the command's own logging. It is for
// one writer at a time.
type TailBuffer struct {
	Limit int
	buf   []byte
}

func (b *TailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.Limit {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.Limit:]...)
	}
	return len(p), nil
}

func (b *TailBuffer) String() string { return string(b.buf[max(len(b.buf)-b.Limit, 0):]) }
