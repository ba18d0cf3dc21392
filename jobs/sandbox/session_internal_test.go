package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSessionNeverUsesItsSocketAfterClosingIt: a Destroy between commands
// (a force-cancel's) ends the session while its Run is idle; the socket's
// number may then go to another descriptor of the worker, and the
// session's Close must not shut that one down (nor a later Run write a
// request, credentials and all, into it).
func TestSessionNeverUsesItsSocketAfterClosingIt(t *testing.T) {
	t.Parallel()
	d := sessionDriver(t)
	sbx, err := d.Create(context.Background(), Spec{Name: "close-after-destroy"})
	if err != nil {
		t.Fatal(err)
	}
	ss := sbx.Session().(*bwrapSession)
	if code, err := ss.Run(context.Background(), Command{Args: []string{"true"}}); code != 0 || err != nil {
		t.Fatal(code, err)
	}
	fd := ss.control
	if err := sbx.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-ss.readerDone
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		t.Fatalf("the socket was closed while the session's owner could still use it: %v", err)
	}
	if _, err := ss.Run(context.Background(), Command{Args: []string{"true"}}); err == nil {
		t.Fatal("a destroyed sandbox's session ran a command")
	}
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Fatalf("Close left the socket open: %v", err)
	}
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTailBufferKeepsTheLastBytes writes more than its limit in chunks of
// every size: what it holds is exactly the end of what was written.
func TestTailBufferKeepsTheLastBytes(t *testing.T) {
	t.Parallel()
	var all strings.Builder
	b := &TailBuffer{Limit: 100}
	for i := range 500 {
		chunk := strings.Repeat(string(rune('a'+i%26)), i%37)
		all.WriteString(chunk)
		_, _ = b.Write([]byte(chunk))
		want := all.String()
		want = want[max(len(want)-100, 0):]
		if got := b.String(); got != want {
			t.Fatalf("after %d writes: %q, want %q", i+1, got, want)
		}
		if len(b.buf) > 200 {
			t.Fatalf("holds %d bytes, more than twice its limit", len(b.buf))
		}
	}
}

// TestSessionThatNeverCameUpRanNothing: a session whose bwrap ends before
// the supervisor is up (here a stand-in that fails as bwrap does when a
// mount cannot be made) fails its first command with ErrNotEntered and
// what bwrap said, so the runner knows the command never started; a
// session that was up and then died does not.
func TestSessionThatNeverCameUpRanNothing(t *testing.T) {
	t.Parallel()
	d := sessionDriver(t)

	failing, err := d.Create(context.Background(), Spec{Name: "never-up"})
	if err != nil {
		t.Fatal(err)
	}
	defer failing.Destroy(context.Background())
	standIn := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(standIn, []byte("#!/bin/sh\necho 'bwrap: Can not mount tmpfs on /newroot/tmp' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ss := failing.Session().(*bwrapSession)
	ss.s.bwrap = standIn
	if err := ss.Enter(); err != nil {
		t.Fatalf("Enter reports only what fails to start: %v", err)
	}
	_, err = ss.Run(context.Background(), Command{Args: []string{"true"}})
	if !errors.Is(err, ErrNotEntered) || !strings.Contains(err.Error(), "Can not mount") {
		t.Fatalf("the first command of a session that never came up: %v, want ErrNotEntered with bwrap's words", err)
	}
	if _, err := ss.Run(context.Background(), Command{Args: []string{"true"}}); !errors.Is(err, ErrNotEntered) {
		t.Fatalf("the next command: %v, want ErrNotEntered", err)
	}

	up, err := d.Create(context.Background(), Spec{Name: "up-then-gone"})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Destroy(context.Background())
	live := up.Session().(*bwrapSession)
	if code, err := live.Run(context.Background(), Command{Args: []string{"true"}}); code != 0 || err != nil {
		t.Fatal(code, err)
	}
	live.killGroup()
	if _, err := live.Run(context.Background(), Command{Args: []string{"true"}}); err == nil || errors.Is(err, ErrNotEntered) {
		t.Fatalf("a command after the session that was up died: %v, want an error that is not ErrNotEntered", err)
	}
}

// sessionDriver is a local driver whose sandboxes run their commands in a
// session, which needs bwrap and a root worker.
func sessionDriver(t *testing.T) *Local {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("sessions share an entry only for a root worker")
	}
	base := os.Getenv("CAIRN_SANDBOX_BASE")
	if base == "" {
		base, _ = filepath.Abs(filepath.Join("..", "..", ".tools", "sandbox-base"))
	}
	d, err := NewLocal(t.TempDir(), LocalOptions{Base: base, KillGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
