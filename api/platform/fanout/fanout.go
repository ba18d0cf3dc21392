package fanout

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

const (
	// bufferSize is the size of one queued copy: large enough that the
	// channel hand-off costs nothing next to hashing the bytes.
	bufferSize = 64 << 10
	// queueDepth bounds how far the writer may run ahead of the consumer,
	// and so the memory one Branch holds (512 KiB).
	queueDepth = 8
)

var buffers = sync.Pool{New: func() any { return new([bufferSize]byte) }}

// ErrClosed is returned by a Write after the branch was closed.
var ErrClosed = errors.New("fanout: write to a closed branch")

// Branch is an io.Writer whose bytes a consumer reads, in order, on its
// own goroutine. A Write copies the bytes and returns as soon as they are
// queued; it waits only while the queue is full. If the consumer returns
// before the end, the rest of the stream is discarded so the writer never
// blocks; if it fails, later writes fail with its error wrapped, which
// stops a writer such as io.Copy early. Small writes are gathered into
// full buffers, so the consumer sees bytes in 64 KiB steps and the rest at
// Close. Write and Close are for one goroutine.
type Branch struct {
	queue  chan []byte
	free   chan *[bufferSize]byte
	held   int               // buffers taken from the pool, at most queueDepth
	fill   *[bufferSize]byte // the buffer being filled; nil or holding filled > 0 bytes
	filled int
	done   chan struct{}
	failed atomic.Pointer[error] // the consumer's error, if it returned one
	end    error                 // what the consumer reads after the last byte, set before queue is closed
	closed bool
}

// Start runs consume on a reader of everything later written to the
// returned Branch.
func Start(consume func(r io.Reader) error) *Branch {
	b := &Branch{
		queue: make(chan []byte, queueDepth),
		free:  make(chan *[bufferSize]byte, queueDepth),
		done:  make(chan struct{}),
	}
	go b.run(consume)
	return b
}

func (b *Branch) run(consume func(r io.Reader) error) {
	r := &reader{b: b}
	if err := consume(r); err != nil {
		b.failed.Store(&err)
	}
	// Whatever the consumer left is discarded, so the writer is never
	// stuck on a full queue.
	_, _ = io.Copy(io.Discard, r)
	close(b.done)
}

// Write queues a copy of p.
func (b *Branch) Write(p []byte) (int, error) {
	if b.closed {
		return 0, ErrClosed
	}
	if err := b.failed.Load(); err != nil {
		// Wrapped: a consumer's bare io.EOF must not read as the clean
		// end of the writer's own source to io.Copy.
		return 0, fmt.Errorf("fanout: consumer failed: %w", *err)
	}
	n := len(p)
	for len(p) > 0 {
		if b.fill == nil {
			b.fill, b.filled = b.buffer(), 0
		}
		k := copy(b.fill[b.filled:], p)
		b.filled += k
		p = p[k:]
		if b.filled == bufferSize {
			b.flush()
		}
	}
	return n, nil
}

// flush queues the buffer being filled.
func (b *Branch) flush() {
	if b.fill != nil {
		b.queue <- b.fill[:b.filled]
		b.fill = nil
	}
}

// buffer returns an empty buffer: a returned one when there is one, a new
// one while fewer than queueDepth are held, else the next one returned.
func (b *Branch) buffer() *[bufferSize]byte {
	select {
	case buf := <-b.free:
		return buf
	default:
	}
	if b.held < queueDepth {
		b.held++
		return buffers.Get().(*[bufferSize]byte)
	}
	return <-b.free
}

// Close ends the stream, waits for the consumer and returns its error.
func (b *Branch) Close() error { return b.CloseWithError(nil) }

// CloseWithError ends the stream so that the consumer's next read after
// the queued bytes fails with err (io.EOF when nil), waits for the
// consumer and returns its error. Only the first close has effect.
func (b *Branch) CloseWithError(err error) error {
	if !b.closed {
		b.closed = true
		if err == nil {
			err = io.EOF
		}
		b.end = err
		b.flush()
		close(b.queue)
		<-b.done
		for range b.held {
			buffers.Put(<-b.free)
		}
	}
	if err := b.failed.Load(); err != nil {
		return *err
	}
	return nil
}

// reader is the consumer's side of a Branch: cur is what is left unread
// of the buffer base.
type reader struct {
	b    *Branch
	base *[bufferSize]byte
	cur  []byte
}

// next makes cur the next queued buffer, giving the finished one back. It
// returns the stream's end once the queue is closed and empty.
func (r *reader) next() error {
	if r.base != nil {
		r.b.free <- r.base
		r.base, r.cur = nil, nil
	}
	buf, ok := <-r.b.queue
	if !ok {
		return r.b.end
	}
	r.base, r.cur = (*[bufferSize]byte)(buf[:bufferSize]), buf
	return nil
}

func (r *reader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if err := r.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// WriteTo hands the queued buffers to w without another copy (io.Copy
// uses it).
func (r *reader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if len(r.cur) > 0 {
			n, err := w.Write(r.cur)
			total += int64(n)
			r.cur = r.cur[n:]
			if err != nil {
				return total, err
			}
		}
		if err := r.next(); err == io.EOF {
			return total, nil
		} else if err != nil {
			return total, err
		}
	}
}
