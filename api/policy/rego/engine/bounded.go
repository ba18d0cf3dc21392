package engine

import (
	"errors"
	"fmt"
	"io"
)

// errBound marks a read or write that crossed its byte bound.
var errBound = errors.New("byte bound exceeded")

// boundedWriter passes writes through until limit bytes have been written
// and refuses the write that would cross it. It keeps the destination's own
// error apart from its bound so callers can tell a policy that produced too
// much from storage that failed.
type boundedWriter struct {
	w       io.Writer
	n       int64
	limit   int64
	destErr error
}

func (b *boundedWriter) Write(p []byte) (int, error) {
	if b.n+int64(len(p)) > b.limit {
		return 0, errBound
	}
	n, err := b.w.Write(p)
	b.n += int64(n)
	if err != nil {
		b.destErr = err
	}
	return n, err
}

// WriteString refuses a string past the bound before converting it, so a
// huge string is not copied only to be refused.
func (b *boundedWriter) WriteString(s string) (int, error) {
	if b.n+int64(len(s)) > b.limit {
		return 0, errBound
	}
	return b.Write([]byte(s))
}

// boundedReader reads at most limit bytes and fails on the first byte past
// it, unlike io.LimitReader, whose silent EOF would turn an oversize input
// into a truncated one.
type boundedReader struct {
	r     io.Reader
	left  int64
	limit int64
}

func newBoundedReader(r io.Reader, limit int64) *boundedReader {
	return &boundedReader{r: r, left: limit, limit: limit}
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// Probe for one more byte: only data past the bound is an error.
		var one [1]byte
		n, err := b.r.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%w: more than %d bytes", errBound, b.limit)
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
