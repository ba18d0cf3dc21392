package blob

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// failingEnd is an object whose bytes all arrive but whose end is an error
// (a last frame that does not authenticate), not io.EOF.
type failingEnd struct{ io.Reader }

func (f failingEnd) Read(p []byte) (int, error) {
	n, err := f.Reader.Read(p)
	if errors.Is(err, io.EOF) {
		return n, errors.New("frame did not authenticate")
	}
	return n, err
}

func TestVerifiedReleasesOnlyWhatItsRecordDescribes(t *testing.T) {
	t.Parallel()
	body := []byte(strings.Repeat("plan json ", 1000))
	sum := sha256.Sum256(body)
	other := sha256.Sum256([]byte("something else"))
	for _, c := range []struct {
		name     string
		src      io.Reader
		size     int64
		sum      []byte
		wantBody []byte // what a reader gets before the end
		ok       bool
	}{
		{"exact", bytes.NewReader(body), int64(len(body)), sum[:], body, true},
		{"exact in one-byte reads", iotest.OneByteReader(bytes.NewReader(body)), int64(len(body)), sum[:], body, true},
		{"empty", bytes.NewReader(nil), 0, func() []byte { s := sha256.Sum256(nil); return s[:] }(), nil, true},
		{"short object", bytes.NewReader(body[:len(body)-10]), int64(len(body)), sum[:], body[:len(body)-10], false},
		{"one byte short", bytes.NewReader(body[:len(body)-1]), int64(len(body)), sum[:], body[:len(body)-1], false},
		{"longer object", bytes.NewReader(append(bytes.Clone(body), '!')), int64(len(body)), sum[:], body[:len(body)-1], false},
		{"another digest", bytes.NewReader(body), int64(len(body)), other[:], body[:len(body)-1], false},
		{"altered byte", bytes.NewReader(append(bytes.Clone(body[:len(body)-1]), 'X')), int64(len(body)), sum[:], body[:len(body)-1], false},
		{"end does not authenticate", failingEnd{bytes.NewReader(body)}, int64(len(body)), sum[:], body[:len(body)-1], false},
		{"no digest recorded", bytes.NewReader(body), int64(len(body)), nil, nil, false},
		{"negative size", bytes.NewReader(body), -1, sum[:], nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := io.ReadAll(Verified(io.NopCloser(c.src), c.size, c.sum))
			if c.ok {
				if err != nil || !bytes.Equal(got, c.wantBody) {
					t.Fatalf("got %d bytes, %v; want all %d", len(got), err, len(c.wantBody))
				}
				return
			}
			if !errors.Is(err, ErrIntegrity) {
				t.Fatalf("error %v, want ErrIntegrity", err)
			}
			// Never the complete body: at most everything but its last byte.
			if !bytes.Equal(got, c.wantBody) || int64(len(got)) >= max(c.size, 1) {
				t.Fatalf("released %d bytes before failing, want %d", len(got), len(c.wantBody))
			}
		})
	}
}

func TestVerifiedClosesItsSource(t *testing.T) {
	t.Parallel()
	closed := false
	r := Verified(closeFunc{Reader: strings.NewReader("x"), close: func() { closed = true }}, 1, make([]byte, 32))
	if err := r.Close(); err != nil || !closed {
		t.Fatalf("close: %v, source closed %v", err, closed)
	}
}

type closeFunc struct {
	io.Reader
	close func()
}

func (c closeFunc) Close() error { c.close(); return nil }
