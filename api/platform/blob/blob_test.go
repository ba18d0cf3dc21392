package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/platform/seal"
)

func testStore(t *testing.T) (*Store, string) {
	t.Helper()
	sealer, err := seal.NewStreamSealer(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := OpenDir(dir, "", sealer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

func TestPutOpenRoundTripIsSealedAtRest(t *testing.T) {
	t.Parallel()
	s, dir := testStore(t)
	ctx := context.Background()
	plain := []byte(strings.Repeat(`{"secret":"hunter2"}`, 5000))
	d, err := s.Put(ctx, "state/a", "state/a", bytes.NewReader(plain), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(plain)
	if d.Size != int64(len(plain)) || !bytes.Equal(d.SHA256, want[:]) {
		t.Fatalf("digests %+v", d)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "state", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("hunter2")) {
		t.Fatal("plaintext visible at rest")
	}
	r, err := s.Open(ctx, "state/a", "state/a")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	if _, err := s.Open(ctx, "state/missing", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing object = %v", err)
	}
}

func TestOversizeStreamLeavesNothing(t *testing.T) {
	t.Parallel()
	s, dir := testStore(t)
	_, err := s.Put(context.Background(), "state/big", "state/big", bytes.NewReader(make([]byte, 3000)), 2999)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversize put = %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "state"))
	for _, e := range entries {
		t.Fatalf("oversize put left %s behind", e.Name())
	}
	if _, err := s.Put(context.Background(), "state/exact", "state/exact", bytes.NewReader(make([]byte, 2999)), 2999); err != nil {
		t.Fatalf("a stream of exactly the limit was refused: %v", err)
	}
}

// TestInterruptedWriteIsTracedToItsKey finds the file a directory write in
// flight keeps beside its key, as a killed process leaves it, and traces it
// to that key; other names are not taken for one.
func TestInterruptedWriteIsTracedToItsKey(t *testing.T) {
	t.Parallel()
	s, dir := testStore(t)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(context.Background(), "state/a", "state/a", pr, 1<<20)
		done <- err
	}()
	if _, err := pw.Write([]byte("in flight")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "state"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("a write in flight left %v, %v", entries, err)
	}
	if key, ok := s.InterruptedWriteOf("state/" + entries[0].Name()); !ok || key != "state/a" {
		t.Errorf("%s traced to %q, %v", entries[0].Name(), key, ok)
	}
	pw.CloseWithError(errors.New("killed"))
	if err := <-done; err == nil {
		t.Fatal("the interrupted write succeeded")
	}
	for _, name := range []string{"state/a", "state/a.tmp", "state/a..tmp", "state/a.18f0zz.tmp", "state/a.18F0.tmp", "state/a.18f0.tmp.bak"} {
		if key, ok := s.InterruptedWriteOf(name); ok {
			t.Errorf("%s traced to %q", name, key)
		}
	}
}
