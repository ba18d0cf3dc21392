package engine_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

// sizedStream is n bytes of a real bundle followed by zeros, read without
// holding them.
type sizedStream struct {
	head []byte
	left int64
}

func (s *sizedStream) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), s.left)]
	n := copy(p, s.head)
	s.head = s.head[n:]
	clear(p[n:])
	s.left -= int64(len(p))
	return len(p), nil
}

func (s *sizedStream) Close() error { return nil }

// TestCompiledBundleOver100MBIsRefused: a compiled policy bundle is read
// for evaluation only up to 100 MB (SPEC §8). A stream of exactly
// MaxBundleBytes is read whole (and then refused only because it is not
// the bundle its digest names); one byte more is refused as over the
// bound before it is hashed or compiled.
func TestCompiledBundleOver100MBIsRefused(t *testing.T) {
	t.Parallel()
	if rego.MaxBundleBytes != 100_000_000 {
		t.Fatalf("MaxBundleBytes = %d, SPEC §8 says 100 MB", rego.MaxBundleBytes)
	}
	good := policyBundle(t, "[]")
	digest := rego.Digest(good)
	open := func(size int64) func() (io.ReadCloser, error) {
		return func() (io.ReadCloser, error) { return &sizedStream{head: good, left: size}, nil }
	}
	_, err := engine.NewCache(2).Get(context.Background(), digest, open(rego.MaxBundleBytes+1))
	wantCode(t, err, rego.CodeEvaluatorFailed)
	wantDetail(t, err, fmt.Sprintf("is over %d bytes", rego.MaxBundleBytes))

	_, err = engine.NewCache(2).Get(context.Background(), digest, open(rego.MaxBundleBytes))
	wantCode(t, err, rego.CodeEvaluatorFailed)
	wantDetail(t, err, "hashes to")

	// The bundle itself, at its own size, loads.
	if _, err := engine.NewCache(2).Get(context.Background(), digest, open(int64(len(good)))); err != nil {
		t.Fatalf("the bundle at its own size: %v", err)
	}
}
