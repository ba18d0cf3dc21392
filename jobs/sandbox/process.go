package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// execute starts argv and waits for it, terminating the process group when
// ctx ends.
func (s *localSandbox) execute(ctx context.Context, argv []string, dir string, c Command) (int, error) {
	// bwrap's --die-with-parent is PR_SET_PDEATHSIG, which fires when the
	// thread that forked exits, and Go ends a thread whose locked goroutine
	// exits. Holding this thread for the whole run keeps that from happening.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	cmd := &exec.Cmd{
		Path:        argv[0],
		Args:        argv,
		Env:         s.environ(dir, c.Env),
		Dir:         dir,
		Stdout:      c.Stdout,
		Stderr:      c.Stderr,
		SysProcAttr: s.leaderAttr(),
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
		s.terminate(pgid, exited, c, errors.Is(cause, ErrDestroyed))
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

// leaderAttr starts a command's leader (bwrap, or cairn-sandbox-exec
// without namespaces) in a new session, a new process group with no
// controlling terminal, and in the sandbox's cgroup at clone, before any
// instruction runs.
func (s *localSandbox) leaderAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setsid: true}
	if s.cgroup != nil {
		attr.UseCgroupFD, attr.CgroupFD = true, int(s.cgroup.fd.Fd())
	}
	return attr
}

// terminate stops the process group led by pgid and returns once the leader
// has exited. Unless now, the tree first gets the command's StopSignal
// (SIGTERM by default) and its StopGrace (KillGrace by default) to stop.
func (s *localSandbox) terminate(pgid int, exited <-chan struct{}, c Command, now bool) {
	if !now {
		sig := cmp.Or(c.StopSignal, unix.SIGTERM)
		if s.bwrap != "" {
			// The leader is bwrap, which dies of SIGTERM and then SIGKILLs
			// the namespace before tofu could stop cleanly; spare it, unless
			// it is alone and still setting the namespace up.
			if signalGroupExcept(pgid, pgid, sig) == 0 {
				_ = unix.Kill(pgid, sig)
			}
		} else {
			_ = unix.Kill(-pgid, sig)
		}
		grace := time.NewTimer(cmp.Or(c.StopGrace, s.driver.killGrace))
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

// exitStatus reports death by signal n as 128+n, as shells and bwrap do, so
// both modes report the same code.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
