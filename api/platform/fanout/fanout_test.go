package fanout_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/platform/fanout"
)

// TestTheConsumerReadsEveryByteInOrder writes a stream in chunks of every
// size, smaller and larger than a queued buffer, and checks that the
// consumer saw exactly those bytes and that Close returns its result.
func TestTheConsumerReadsEveryByteInOrder(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	stream := make([]byte, 3<<20+17)
	for i := range stream {
		stream[i] = byte(rng.IntN(256))
	}
	var got []byte
	want := errors.New("consumer result")
	b := fanout.Start(func(r io.Reader) error {
		got, _ = io.ReadAll(r)
		return want
	})
	for rest := stream; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(200<<10))
		if k, err := b.Write(rest[:n]); k != n || err != nil {
			t.Fatalf("write of %d: %d, %v", n, k, err)
		}
		rest = rest[n:]
	}
	if err := b.Close(); err != want {
		t.Fatalf("close returned %v, want the consumer's %v", err, want)
	}
	if sha256.Sum256(got) != sha256.Sum256(stream) {
		t.Fatalf("consumer read %d bytes that differ from the %d written", len(got), len(stream))
	}
	if _, err := b.Write([]byte("late")); !errors.Is(err, fanout.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
}

// awaitNil fails the test with stuck unless a nil error arrives on done
// within 10 seconds: a blocked writer fails fast instead of hanging to the
// package's timeout.
func awaitNil(t *testing.T, done <-chan error, stuck string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal(stuck)
	}
}

// TestTheWriterRunsAheadOfABusyConsumer is the reason for the package:
// while the consumer is busy, writes up to the queue's bound return at
// once (io.Pipe would wait for the consumer on the first).
func TestTheWriterRunsAheadOfABusyConsumer(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var n int64
	b := fanout.Start(func(r io.Reader) error {
		<-gate
		var err error
		n, err = io.Copy(io.Discard, r)
		return err
	})
	wrote := make(chan error, 1)
	go func() {
		chunk := make([]byte, 32<<10)
		for range 16 { // 512 KiB: the whole queue
			if _, err := b.Write(chunk); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	awaitNil(t, wrote, "writes waited for a consumer that had not started reading")
	close(gate)
	if err := b.Close(); err != nil || n != 16*32<<10 {
		t.Fatalf("consumer read %d bytes, %v", n, err)
	}
}

// TestAConsumerThatStopsEarlyNeverBlocksTheWriter: the parser gives up on
// a state that is not JSON after a few bytes; the upload goes on.
func TestAConsumerThatStopsEarlyNeverBlocksTheWriter(t *testing.T) {
	t.Parallel()
	b := fanout.Start(func(r io.Reader) error {
		_, err := r.Read(make([]byte, 1))
		return err
	})
	done := make(chan error, 1)
	go func() {
		chunk := bytes.Repeat([]byte("z"), 100<<10)
		for range 100 {
			if _, err := b.Write(chunk); err != nil {
				done <- err
				return
			}
		}
		done <- b.Close()
	}()
	awaitNil(t, done, "the writer blocked on a consumer that had stopped reading")
}

// TestAConsumersEOFIsNotTheWritersEnd: io.Copy takes a bare io.EOF from
// its source as a clean end, so a consumer that fails with one must not
// let an upload commit what was copied so far.
func TestAConsumersEOFIsNotTheWritersEnd(t *testing.T) {
	t.Parallel()
	b := fanout.Start(func(r io.Reader) error {
		_, _ = io.CopyN(io.Discard, r, 64<<10)
		return io.EOF
	})
	src := bytes.NewReader(make([]byte, 4<<20))
	n, err := io.Copy(io.Discard, io.TeeReader(src, b))
	if err == nil || !errors.Is(err, io.EOF) {
		t.Fatalf("copy of %d bytes ended with %v, want the consumer's failure", n, err)
	}
	_ = b.CloseWithError(err)
}

// TestWriteCopiesTheCallersBytes: io.Copy reuses its buffer after each
// Write, so the branch must keep a copy, never the slice.
func TestWriteCopiesTheCallersBytes(t *testing.T) {
	t.Parallel()
	var got []byte
	b := fanout.Start(func(r io.Reader) error {
		var err error
		got, err = io.ReadAll(r)
		return err
	})
	buf := make([]byte, 1000)
	var want []byte
	for i := range 300 {
		for j := range buf {
			buf[j] = byte(i + j)
		}
		want = append(want, buf...)
		_, _ = b.Write(buf)
	}
	clear(buf)
	if err := b.Close(); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("consumer read %d bytes (%v) that differ from the %d written", len(got), err, len(want))
	}
}

// TestCloseWithErrorReachesTheConsumer: a failed upload ends the
// consumer's stream with the failure, not a clean end it could mistake
// for the whole document.
func TestCloseWithErrorReachesTheConsumer(t *testing.T) {
	t.Parallel()
	cause := errors.New("client went away")
	b := fanout.Start(func(r io.Reader) error {
		_, err := io.ReadAll(r)
		return err
	})
	_, _ = b.Write([]byte(`{"version":4,`))
	if err := b.CloseWithError(cause); err != cause {
		t.Fatalf("consumer ended with %v, want %v", err, cause)
	}
	if err := b.CloseWithError(errors.New("again")); err != cause {
		t.Fatalf("a second close changed the result to %v", err)
	}
}

// TestAFailedConsumerStopsTheWriter: an archive that fails validation
// stops the upload at the next write rather than at its end.
func TestAFailedConsumerStopsTheWriter(t *testing.T) {
	t.Parallel()
	invalid := errors.New("not a gzip stream")
	b := fanout.Start(func(r io.Reader) error {
		_, _ = r.Read(make([]byte, 1))
		return invalid
	})
	chunk := make([]byte, 64<<10)
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		_, err = b.Write(chunk)
	}
	if !errors.Is(err, invalid) {
		t.Fatalf("writes went on after the consumer failed: %v", err)
	}
	if got := b.CloseWithError(err); got != invalid {
		t.Fatalf("close returned %v", got)
	}
}
