package sessionwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// MaxFrame bounds a frame. A Request carries a command's arguments and
// environment, which exec refuses well below this (a quarter of the stack
// limit in all), so a larger length is a broken peer, not a large command.
const MaxFrame = 16 << 20

// Frame kinds, the payload's first byte.
const (
	kindRequest = 'R'
	kindSignal  = 'S'
	kindExit    = 'E'
	kindReady   = 'Y'
)

// Request is one command for the supervisor. Argv[0] is a path; Env is the
// whole environment; the command's standard output and error are the two
// descriptors sent with it, and its standard input is /dev/null.
type Request struct {
	Dir  string
	Argv []string
	Env  []string
}

// Reply is what became of a Request: the command's exit status, 128+n when
// signal n killed it, as a shell reports it, and 127 when it never started
// (the supervisor says why on the command's standard error).
type Reply struct {
	Status int
}

// Message is a decoded frame: exactly one field is set.
type Message struct {
	Request *Request
	Signal  unix.Signal
	Reply   *Reply
	// Ready is the supervisor's first frame: the sandbox is set up and it
	// reads requests. A session that ends before it ran no command.
	Ready bool
}

var errMalformed = errors.New("malformed session frame")

// WriteRequest sends r with stdout and stderr attached.
func WriteRequest(fd int, r Request, stdout, stderr int) error {
	var b encoder
	b.byte(kindRequest)
	b.str(r.Dir)
	b.strs(r.Argv)
	b.strs(r.Env)
	return writeFrame(fd, b.buf, unix.UnixRights(stdout, stderr))
}

// WriteSignal asks the supervisor to send sig to every process of the
// running command.
func WriteSignal(fd int, sig unix.Signal) error {
	var b encoder
	b.byte(kindSignal)
	b.u32(uint32(sig))
	return writeFrame(fd, b.buf, nil)
}

// WriteReady tells the driver the supervisor is up, once, before it reads
// any request.
func WriteReady(fd int) error {
	return writeFrame(fd, []byte{kindReady}, nil)
}

// WriteReply answers a Request.
func WriteReply(fd int, r Reply) error {
	var b encoder
	b.byte(kindExit)
	b.u32(uint32(int32(r.Status)))
	return writeFrame(fd, b.buf, nil)
}

func writeFrame(fd int, payload, rights []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("session frame of %d bytes exceeds %d", len(payload), MaxFrame)
	}
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(payload)), uint32(len(payload)))
	frame = append(frame, payload...)
	// The rights go with the first bytes; the rest follows as plain
	// writes (a stream socket may take a large frame in parts).
	n, err := unix.SendmsgN(fd, frame, rights, nil, 0)
	for err == nil && n < len(frame) {
		var m int
		m, err = unix.Write(fd, frame[n:])
		n += m
	}
	if err != nil {
		return fmt.Errorf("writing session frame: %w", err)
	}
	return nil
}

// Read reads the next frame from fd, a blocking socket. It returns the
// descriptors that came with it (a Request's two; the caller owns them) and
// io.EOF when the peer closed the socket between frames.
func Read(fd int) (Message, []int, error) {
	var head [4]byte
	var fds []int
	got := 0
	oob := make([]byte, unix.CmsgSpace(4*4))
	for got < len(head) {
		n, oobn, _, _, err := unix.Recvmsg(fd, head[got:], oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			closeAll(fds)
			return Message{}, nil, fmt.Errorf("reading session frame: %w", err)
		}
		more, err := rights(oob[:oobn])
		fds = append(fds, more...)
		if err != nil {
			closeAll(fds)
			return Message{}, nil, err
		}
		if n == 0 {
			closeAll(fds)
			if got == 0 {
				return Message{}, nil, io.EOF
			}
			return Message{}, nil, io.ErrUnexpectedEOF
		}
		got += n
	}
	size := binary.BigEndian.Uint32(head[:])
	if size == 0 || size > MaxFrame {
		closeAll(fds)
		return Message{}, nil, fmt.Errorf("%w: length %d", errMalformed, size)
	}
	payload := make([]byte, size)
	if _, err := io.ReadFull(fdReader(fd), payload); err != nil {
		closeAll(fds)
		return Message{}, nil, fmt.Errorf("reading session frame: %w", err)
	}
	m, err := decode(payload)
	if err == nil && (m.Request != nil) != (len(fds) == 2) {
		err = fmt.Errorf("%w: %d descriptors with a %q frame", errMalformed, len(fds), payload[0])
	}
	if err != nil {
		closeAll(fds)
		return Message{}, nil, err
	}
	return m, fds, nil
}

func rights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("reading session frame's descriptors: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("reading session frame's descriptors: %w", err)
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}

type fdReader int

func (r fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), p)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, io.ErrUnexpectedEOF
		}
		return n, nil
	}
}

func decode(p []byte) (Message, error) {
	d := decoder{buf: p[1:]}
	var m Message
	switch p[0] {
	case kindRequest:
		r := &Request{Dir: d.str(), Argv: d.strs(), Env: d.strs()}
		if len(r.Argv) == 0 {
			d.err = errMalformed
		}
		m.Request = r
	case kindSignal:
		m.Signal = unix.Signal(d.u32())
	case kindExit:
		m.Reply = &Reply{Status: int(int32(d.u32()))}
	case kindReady:
		m.Ready = true
	default:
		return Message{}, fmt.Errorf("%w: kind %q", errMalformed, p[0])
	}
	if d.err == nil && len(d.buf) != 0 {
		d.err = errMalformed
	}
	if d.err != nil {
		return Message{}, fmt.Errorf("%w: %q frame", errMalformed, p[0])
	}
	return m, nil
}

type encoder struct{ buf []byte }

func (e *encoder) byte(b byte)  { e.buf = append(e.buf, b) }
func (e *encoder) u32(v uint32) { e.buf = binary.BigEndian.AppendUint32(e.buf, v) }
func (e *encoder) str(s string) { e.u32(uint32(len(s))); e.buf = append(e.buf, s...) }
func (e *encoder) strs(ss []string) {
	e.u32(uint32(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

// decoder reads what encoder wrote; the first error sticks and every
// later read returns zero values.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) u32() uint32 {
	if d.err != nil || len(d.buf) < 4 {
		d.err = errMalformed
		return 0
	}
	v := binary.BigEndian.Uint32(d.buf)
	d.buf = d.buf[4:]
	return v
}

func (d *decoder) str() string {
	n := d.u32()
	if d.err != nil || uint64(n) > uint64(len(d.buf)) {
		d.err = errMalformed
		return ""
	}
	s := string(d.buf[:n])
	d.buf = d.buf[n:]
	return s
}

func (d *decoder) strs() []string {
	n := d.u32()
	// Each string takes at least its four-byte length.
	if d.err != nil || uint64(n)*4 > uint64(len(d.buf)) {
		d.err = errMalformed
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.str()
	}
	return out
}
