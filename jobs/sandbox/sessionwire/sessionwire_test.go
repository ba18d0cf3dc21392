package sessionwire

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func socketPair(t *testing.T) (int, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fds[0]); _ = unix.Close(fds[1]) })
	return fds[0], fds[1]
}

// TestFramesCarryWhatWasSent: a request arrives whole with both
// descriptors (working ones: what is written to them comes out of the
// originals' pipes), as do a signal and replies, and a closed peer
// between frames is io.EOF.
func TestFramesCarryWhatWasSent(t *testing.T) {
	t.Parallel()
	a, b := socketPair(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	req := Request{Dir: "/work", Argv: []string{"/bin/tofu", "plan", ""}, Env: []string{"A=1", "BIG=" + string(big)}}
	go func() {
		// Large enough to need several writes on the stream.
		if err := WriteRequest(a, req, int(w.Fd()), int(w.Fd())); err != nil {
			t.Error(err)
		}
		_ = w.Close()
		_ = WriteSignal(a, unix.SIGINT)
		_ = WriteReady(a)
		_ = WriteReply(a, Reply{Status: 130})
		_ = WriteReply(a, Reply{Status: -1})
		_ = unix.Shutdown(a, unix.SHUT_WR)
	}()
	m, fds, err := Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Request == nil || m.Request.Dir != req.Dir || !slices.Equal(m.Request.Argv, req.Argv) || !slices.Equal(m.Request.Env, req.Env) || len(fds) != 2 {
		t.Fatalf("request read as %+v with %d descriptors", m.Request != nil, len(fds))
	}
	for _, fd := range fds {
		if _, err := unix.Write(fd, []byte("x")); err != nil {
			t.Fatal(err)
		}
		_ = unix.Close(fd)
	}
	if got, _ := io.ReadAll(r); string(got) != "xx" {
		t.Fatalf("the passed descriptors wrote %q", got)
	}
	for _, want := range []Message{{Signal: unix.SIGINT}, {Ready: true}, {Reply: &Reply{Status: 130}}, {Reply: &Reply{Status: -1}}} {
		m, fds, err := Read(b)
		if err != nil || len(fds) != 0 || m.Signal != want.Signal || m.Ready != want.Ready ||
			(m.Reply == nil) != (want.Reply == nil) || (m.Reply != nil && *m.Reply != *want.Reply) {
			t.Fatalf("read %+v, %d descriptors, %v; want %+v", m, len(fds), err, want)
		}
	}
	if _, _, err := Read(b); !errors.Is(err, io.EOF) {
		t.Fatalf("after the peer closed: %v, want io.EOF", err)
	}
}

// TestBrokenFramesAreRefused: a length out of bounds, a cut frame, an
// unknown kind, trailing bytes, and a request without its descriptors are
// errors, never a partial message.
func TestBrokenFramesAreRefused(t *testing.T) {
	t.Parallel()
	frame := func(payload []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
	}
	var req encoder
	req.byte(kindRequest)
	req.str("/w")
	req.strs([]string{"/bin/true"})
	req.strs(nil)
	for name, raw := range map[string][]byte{
		"zero length":        binary.BigEndian.AppendUint32(nil, 0),
		"too long":           binary.BigEndian.AppendUint32(nil, MaxFrame+1),
		"cut":                frame([]byte{kindExit, 0, 0})[:6],
		"unknown kind":       frame([]byte{'X', 0, 0, 0, 0}),
		"trailing bytes":     frame([]byte{kindExit, 0, 0, 0, 0, 9}),
		"ready with a body":  frame([]byte{kindReady, 0}),
		"string past end":    frame([]byte{kindRequest, 0, 0, 1, 0}),
		"no descriptors":     frame(req.buf),
		"count past end":     frame([]byte{kindRequest, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}),
		"signal with rights": nil,
	} {
		a, b := socketPair(t)
		if raw == nil {
			if err := writeFrame(a, []byte{kindSignal, 0, 0, 0, 2}, unix.UnixRights(a, a)); err != nil {
				t.Fatal(err)
			}
		} else if _, err := unix.Write(a, raw); err != nil {
			t.Fatal(err)
		}
		_ = unix.Shutdown(a, unix.SHUT_WR)
		if m, fds, err := Read(b); err == nil {
			t.Errorf("%s: read %+v with %d descriptors", name, m, len(fds))
		}
	}
}
