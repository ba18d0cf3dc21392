package blob

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"

	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/platform/fanout"
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
// The default backend is a directory; S3-compatible storage serves several
// nodes. Callers speak in logical keys (blobkey's layouts, what rows
// store); the store puts each under its prefix, the part of a shared
// bucket or directory Cairn is confined to, so moving the objects to
// another prefix needs no change to a row.
type Store struct {
	bucket *blob.Bucket
	sealer *seal.StreamSealer
	// prefix is "" or a normalised CAIRN_BLOB_PREFIX with its slash.
	prefix string
	// s3 and s3Bucket are set for S3 storage, whose writes go through
	// multipartWriter rather than the bucket's own uploader.
	s3       *s3.Client
	s3Bucket string
}

// OpenDir opens a store in a local directory (created when missing),
// confined to prefix (a CAIRN_BLOB_PREFIX value; "" for the whole
// directory).
func OpenDir(dir, prefix string, sealer *seal.StreamSealer) (*Store, error) {
	if sealer == nil {
		return nil, seal.ErrNoKey
	}
	within, err := storePrefix(prefix)
	if err != nil {
		return nil, err
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
	return &Store{bucket: bucket, sealer: sealer, prefix: within}, nil
}

// storePrefix checks a CAIRN_BLOB_PREFIX value and returns what the store
// puts before every key.
func storePrefix(raw string) (string, error) {
	prefix, err := blobkey.ParsePrefix(raw)
	if err != nil {
		return "", fmt.Errorf("blob key prefix %w", err)
	}
	if prefix == "" {
		return "", nil
	}
	return prefix + "/", nil
}

// S3Credentials are static keys for S3-compatible storage; empty means the
// standard AWS credential chain (environment, shared files, instance role).
type S3Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
}

// OpenURL opens the store a URL names, confined to prefix (as OpenDir): a
// directory path (or file:// URL) for the embedded default, or
// s3://bucket?region=…&endpoint=…&use_path_style=true for S3-compatible
// storage. The bucket must exist and be reachable: a store that cannot be
// reached fails at start, not at the first upload.
func OpenURL(ctx context.Context, rawURL, prefix string, creds S3Credentials, sealer *seal.StreamSealer) (*Store, error) {
	if sealer == nil {
		return nil, seal.ErrNoKey
	}
	within, err := storePrefix(prefix)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("blob storage URL: not a URL")
	}
	switch u.Scheme {
	case "", "file":
		return OpenDir(u.Path, prefix, sealer)
	case s3blob.Scheme:
	default:
		return nil, fmt.Errorf("blob storage URL: scheme %q is not file or s3", u.Scheme)
	}
	switch {
	case u.Host == "":
		return nil, errors.New("blob storage URL: s3:// needs a bucket name")
	case u.User != nil:
		// Keys in the URL would be ignored while the secret sits in
		// CAIRN_BLOB_URL; they belong in CAIRN_S3_* or the AWS chain.
		return nil, errors.New("blob storage URL: credentials do not belong in the URL; set CAIRN_S3_ACCESS_KEY_ID and CAIRN_S3_SECRET_ACCESS_KEY")
	case u.Path != "" && u.Path != "/":
		// A prefix here would be ignored and objects written at the
		// bucket's root.
		return nil, errors.New("blob storage URL: name the bucket only; a key prefix belongs in CAIRN_BLOB_PREFIX")
	}
	client, err := newS3Client(ctx, u.Query(), creds)
	if err != nil {
		return nil, err
	}
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &u.Host}); err != nil {
		return nil, fmt.Errorf("reaching S3 bucket %q: %w", u.Host, err)
	}
	bucket, err := s3blob.OpenBucket(ctx, client, u.Host, nil)
	if err != nil {
		return nil, fmt.Errorf("opening S3 bucket: %w", err)
	}
	return &Store{bucket: bucket, sealer: sealer, prefix: within, s3: client, s3Bucket: u.Host}, nil
}

// newS3Client builds a client from the URL's region, endpoint and
// use_path_style parameters; any other or repeated parameter is refused so a
// typo does not silently fall back to a default.
func newS3Client(ctx context.Context, q url.Values, creds S3Credentials) (*s3.Client, error) {
	for name, values := range q {
		if len(values) != 1 {
			return nil, fmt.Errorf("blob storage URL: parameter %q given %d times", name, len(values))
		}
		switch name {
		case "region", "endpoint", "use_path_style":
		default:
			return nil, fmt.Errorf("blob storage URL: unknown parameter %q (region, endpoint, use_path_style)", name)
		}
	}
	region := q.Get("region")
	if region == "" {
		region = "us-east-1"
	}
	loaders := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(region)}
	if creds.AccessKeyID != "" || creds.SecretAccessKey != "" {
		if creds.AccessKeyID == "" || creds.SecretAccessKey == "" {
			return nil, errors.New("S3 credentials: both the access key ID and the secret are needed")
		}
		loaders = append(loaders, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, loaders...)
	if err != nil {
		return nil, fmt.Errorf("loading S3 configuration: %w", err)
	}
	pathStyle := false
	if v := q.Get("use_path_style"); v != "" {
		if pathStyle, err = strconv.ParseBool(v); err != nil {
			return nil, errors.New("blob storage URL: use_path_style is not true or false")
		}
	}
	endpoint := q.Get("endpoint")
	if endpoint != "" {
		e, err := url.Parse(endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return nil, errors.New("blob storage URL: endpoint is not an http(s) URL")
		}
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = pathStyle
		if endpoint != "" {
			o.BaseEndpoint = &endpoint
		}
	}), nil
}

// Close releases the bucket.
func (s *Store) Close() error { return s.bucket.Close() }

// Digests describe the plaintext of a stored object.
type Digests struct {
	Size   int64
	SHA256 []byte
	MD5    []byte
}

// countingHasher passes writes to the SHA-256 and to the MD5's branch
// while counting them.
type countingHasher struct {
	sha hash.Hash
	md  io.Writer
	n   int64
}

func (c *countingHasher) Write(p []byte) (int, error) {
	c.sha.Write(p)
	c.md.Write(p)
	c.n += int64(len(p))
	return len(p), nil
}

// objectKey is where the object of a logical key lives.
func (s *Store) objectKey(key string) string { return s.prefix + key }

// Put seals the stream r under key, bound to identity, reading at most
// limit bytes. A longer stream is cut one byte past the limit and
// ErrTooLarge returned; any failure leaves no object behind (the bucket
// commits only on a clean close).
func (s *Store) Put(ctx context.Context, key, identity string, r io.Reader, limit int64) (Digests, error) {
	w, err := s.newWriter(ctx, s.objectKey(key))
	if err != nil {
		return Digests{}, err
	}
	defer w.abort()
	abort := func(cause error) (Digests, error) {
		w.abort()
		return Digests{}, cause
	}
	sealed, err := s.sealer.NewWriter(w, []byte(identity))
	if err != nil {
		return abort(err)
	}
	// The MD5 is computed on a goroutine of its own: on a machine without
	// SHA instructions each digest costs as much as everything else the
	// upload does, and one goroutine doing both held a 100 MB state upload
	// to half the target rate.
	md := md5.New()
	mdBranch := fanout.Start(func(r io.Reader) error {
		_, err := io.Copy(md, r)
		return err
	})
	defer mdBranch.CloseWithError(errAbandoned)
	sum := &countingHasher{sha: sha256.New(), md: mdBranch}
	if _, err := io.Copy(sealed, io.TeeReader(io.LimitReader(r, limit+1), sum)); err != nil {
		return abort(fmt.Errorf("streaming object: %w", err))
	}
	if sum.n > limit {
		return abort(ErrTooLarge)
	}
	if err := sealed.Close(); err != nil {
		return abort(fmt.Errorf("sealing object: %w", err))
	}
	if err := mdBranch.Close(); err != nil {
		return abort(fmt.Errorf("hashing object: %w", err))
	}
	if err := w.commit(); err != nil {
		return Digests{}, fmt.Errorf("committing object: %w", err)
	}
	return Digests{Size: sum.n, SHA256: sum.sha.Sum(nil), MD5: md.Sum(nil)}, nil
}

// errAbandoned ends the MD5 branch of a Put that failed.
var errAbandoned = errors.New("object write abandoned")

// newWriter opens the ciphertext sink for one object.
func (s *Store) newWriter(ctx context.Context, key string) (objectWriter, error) {
	if s.s3 != nil {
		return newMultipartWriter(ctx, s.s3, s.s3Bucket, key), nil
	}
	writeCtx, cancel := context.WithCancel(ctx)
	w, err := s.bucket.NewWriter(writeCtx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("opening object writer: %w", err)
	}
	return &bucketWriter{w: w, cancel: cancel}, nil
}

// bucketWriter adapts a bucket writer, which commits on a clean Close and
// discards the object when its context is cancelled first.
type bucketWriter struct {
	w      *blob.Writer
	cancel context.CancelFunc
	done   bool
}

func (b *bucketWriter) Write(p []byte) (int, error) { return b.w.Write(p) }

func (b *bucketWriter) commit() error {
	b.done = true
	defer b.cancel()
	return b.w.Close()
}

func (b *bucketWriter) abort() {
	if b.done {
		return
	}
	b.done = true
	b.cancel()
	_ = b.w.Close()
}

// Open returns the plaintext of an object. Reading fails at the first frame
// that does not authenticate against identity.
func (s *Store) Open(ctx context.Context, key, identity string) (io.ReadCloser, error) {
	r, err := s.bucket.NewReader(ctx, s.objectKey(key), nil)
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
	err := s.bucket.Delete(ctx, s.objectKey(key))
	if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("deleting object: %w", err)
	}
	return nil
}

// InterruptedWriteOf reports whether key is what an interrupted write of
// another key left behind, and that key. The directory store writes each
// object into "<key>.<hex time>.tmp" beside it and renames it into place,
// so a process killed mid-write leaves that file; an S3 upload leaves no
// object.
func (s *Store) InterruptedWriteOf(key string) (string, bool) {
	rest, ok := strings.CutSuffix(key, ".tmp")
	if s.s3 != nil || !ok {
		return "", false
	}
	dot := strings.LastIndexByte(rest, '.')
	stamp := rest[dot+1:]
	if dot < 0 || stamp == "" || strings.ContainsFunc(stamp, func(r rune) bool { return !(r >= '0' && r <= '9') && !(r >= 'a' && r <= 'f') }) {
		return "", false
	}
	return rest[:dot], true
}

// ObjectInfo is one stored object as a listing shows it.
type ObjectInfo struct {
	// Key is the object's key under the store's prefix, as Put, Open and
	// Delete take it.
	Key     string
	ModTime time.Time
}

// MaxListPage bounds one listing page.
const MaxListPage = 1000

// ListPage returns up to size objects (at most MaxListPage) under the
// store's prefix after token, and the token of the next page (nil after
// the last).
func (s *Store) ListPage(ctx context.Context, token []byte, size int) ([]ObjectInfo, []byte, error) {
	size = min(max(size, 1), MaxListPage)
	if token == nil {
		token = blob.FirstPageToken
	}
	page, next, err := s.bucket.ListPage(ctx, token, size, &blob.ListOptions{Prefix: s.prefix})
	if err != nil {
		return nil, nil, fmt.Errorf("listing objects: %w", err)
	}
	out := make([]ObjectInfo, 0, len(page))
	for _, o := range page {
		key, within := strings.CutPrefix(o.Key, s.prefix)
		if o.IsDir || !within {
			continue
		}
		out = append(out, ObjectInfo{Key: key, ModTime: o.ModTime})
	}
	return out, next, nil
}
