package blob

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
	"io"
)

// ErrIntegrity means a stored object's plaintext is not the one its record
// describes: shorter, longer, or with another SHA-256.
var ErrIntegrity = errors.New("stored object does not match its record")

// Verified returns a reader of the plaintext r that its record describes
// as exactly size bytes with SHA-256 sum. It passes every byte but the
// last straight through and holds that one back until r has ended where
// the record says and its digest matches; anything else (a short or long
// object, another digest, a frame that did not authenticate) fails the
// read with ErrIntegrity instead. A response that declared size as its
// length therefore never ends as a complete-looking body of an altered
// object: it breaks off short. It holds one byte beyond the caller's
// buffer, whatever the size. Closing it closes r.
func Verified(r io.ReadCloser, size int64, sum []byte) io.ReadCloser {
	v := &verifiedReader{src: r, hash: sha256.New(), want: sum, left: size}
	if size < 0 || len(sum) != sha256.Size {
		v.err = fmt.Errorf("%w: record names no plausible size and digest", ErrIntegrity)
	}
	return v
}

type verifiedReader struct {
	src  io.ReadCloser
	hash hash.Hash
	want []byte
	// left is how many bytes of the recorded size are still to be read
	// from src.
	left int64
	// held is the object's last byte once it verified, until released;
	// nil before.
	held []byte
	err  error
}

// heldBack is how many final bytes wait for the verdict.
const heldBack = 1

func (v *verifiedReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if open := v.left - heldBack; open > 0 {
		n, err := v.src.Read(p[:min(int64(len(p)), open)])
		v.hash.Write(p[:n])
		v.left -= int64(n)
		switch {
		case err != nil && !errors.Is(err, io.EOF):
			return n, v.fail(err)
		case n == 0 && err != nil:
			return 0, v.fail(errors.New("object shorter than recorded"))
		}
		return n, nil
	}
	if v.held == nil {
		if err := v.verifyEnd(); err != nil {
			return 0, v.fail(err)
		}
	}
	if len(v.held) == 0 {
		return 0, io.EOF
	}
	n := copy(p, v.held)
	v.held = v.held[n:]
	return n, nil
}

// verifyEnd reads the last recorded bytes, checks that nothing follows
// them and that the whole object has the recorded digest, and only then
// makes those bytes releasable.
func (v *verifiedReader) verifyEnd() error {
	last := make([]byte, v.left)
	if _, err := io.ReadFull(v.src, last); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("object shorter than recorded")
	} else if err != nil {
		return err
	}
	v.hash.Write(last)
	var extra [1]byte
	switch n, err := io.ReadFull(v.src, extra[:]); {
	case n > 0:
		return errors.New("object longer than recorded")
	case !errors.Is(err, io.EOF):
		return err
	}
	if subtle.ConstantTimeCompare(v.hash.Sum(nil), v.want) != 1 {
		return errors.New("object digest differs from the recorded one")
	}
	v.held, v.left = last, 0
	return nil
}

func (v *verifiedReader) fail(cause error) error {
	if errors.Is(cause, ErrIntegrity) {
		v.err = cause
	} else {
		v.err = fmt.Errorf("%w: %w", ErrIntegrity, cause)
	}
	return v.err
}

func (v *verifiedReader) Close() error { return v.src.Close() }
