package blob

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/gcerrors"

	"github.com/cairnhq/cairn/api/platform/seal"
)

var (
	// ErrTooLarge means a stream crossed its limit; nothing was kept.
	ErrTooLarge = errors.New("object over its size limit")
	// ErrNotFound means no object is stored under the key.
	ErrNotFound = errors.New("object not found")
)

// Store keeps sealed objects: every byte is encrypted before it leaves the
// process, bound to the object's identity, and streamed in bounded frames.
// The default backend is a directory; the bucket interface leaves room for
// S3-compatible storage.
type Store struct {
	bucket *blob.Bucket
	sealer *seal.StreamSealer
}

// OpenDir opens a store in a local directory (created when missing).
func OpenDir(dir string, sealer *seal.StreamSealer) (*Store, error) {
	if sealer == nil {
		return nil, seal.ErrNoKey
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating blob directory: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	bucket, err := fileblob.OpenBucket(abs, &fileblob.Options{NoTempDir: true})
	if err != nil {
		return nil, fmt.Errorf("opening blob directory: %w", err)
	}
	return &Store{bucket: bucket, sealer: sealer}, nil
}

// Close releases the bucket.
func (s *Store) Close() error { return s.bucket.Close() }

// Digests describe the plaintext of a stored object.
type Digests struct {
	Size   int64
	SHA256 []byte
	MD5    []byte
}

// countingHasher passes writes to digests while counting them.
type countingHasher struct {
	sha, md hash.Hash
	n       int64
}

func (c *countingHasher) Write(p []byte) (int, error) {
	c.sha.Write(p)
	c.md.Write(p)
	c.n += int64(len(p))
	return len(p), nil
}

// Put seals the stream r under key, bound to identity, reading at most
// limit bytes. A longer stream is cut one byte past the limit and
// ErrTooLarge returned; any failure leaves no object behind (the bucket
// commits only on a clean close).
func (s *Store) Put(ctx context.Context, key, identity string, r io.Reader, limit int64) (Digests, error) {
	writeCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(writeCtx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return Digests{}, fmt.Errorf("opening object writer: %w", err)
	}
	abort := func(cause error) (Digests, error) {
		cancel()
		_ = w.Close()
		return Digests{}, cause
	}
	sealed, err := s.sealer.NewWriter(w, []byte(identity))
	if err != nil {
		return abort(err)
	}
	sum := &countingHasher{sha: sha256.New(), md: md5.New()}
	if _, err := io.Copy(sealed, io.TeeReader(io.LimitReader(r, limit+1), sum)); err != nil {
		return abort(fmt.Errorf("streaming object: %w", err))
	}
	if sum.n > limit {
		return abort(ErrTooLarge)
	}
	if err := sealed.Close(); err != nil {
		return abort(fmt.Errorf("sealing object: %w", err))
	}
	if err := w.Close(); err != nil {
		return Digests{}, fmt.Errorf("committing object: %w", err)
	}
	return Digests{Size: sum.n, SHA256: sum.sha.Sum(nil), MD5: sum.md.Sum(nil)}, nil
}

// Open returns the plaintext of an object. Reading fails at the first frame
// that does not authenticate against identity.
func (s *Store) Open(ctx context.Context, key, identity string) (io.ReadCloser, error) {
	r, err := s.bucket.NewReader(ctx, key, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("opening object: %w", err)
	}
	plain, err := s.sealer.NewReader(r, []byte(identity))
	if err != nil {
		r.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{plain, r}, nil
}

// Delete removes an object; a missing one is not an error. Callers remove
// the database reference first, so a failure here leaves an orphan for the
// sweep, never a dangling reference.
func (s *Store) Delete(ctx context.Context, key string) error {
	err := s.bucket.Delete(ctx, key)
	if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("deleting object: %w", err)
	}
	return nil
}

// Key joins path segments into an object key, refusing segments that could
// escape their prefix.
func Key(parts ...string) string {
	for i, p := range parts {
		parts[i] = strings.NewReplacer("/", "_", "..", "_").Replace(p)
	}
	return strings.Join(parts, "/")
}
