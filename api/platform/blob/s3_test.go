package blob_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/blobtest"
	"github.com/cairnhq/cairn/api/platform/seal"
)

func s3Store(t *testing.T, prefix string) (*blob.Store, blobtest.Server, string) {
	t.Helper()
	srv := blobtest.S3(t)
	name, storeURL := srv.Bucket(t)
	sealer, err := seal.NewStreamSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	s, err := blob.OpenURL(context.Background(), storeURL, prefix, srv.Creds, sealer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, srv, name
}

// pendingUploads counts multipart uploads that were started and neither
// completed nor aborted.
func pendingUploads(t *testing.T, srv blobtest.Server, bucket string) int {
	t.Helper()
	out, err := srv.Client().ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Uploads)
}

// pattern is a deterministic, incompressible-enough plaintext of n bytes
// with a recognisable secret in every block.
func pattern(n int) []byte {
	b := bytes.Repeat([]byte(`{"password":"hunter2","n":0123456789}`), n/37+1)
	return b[:n]
}

func TestS3RoundTripsSmallAndMultipartObjectsSealed(t *testing.T) {
	t.Parallel()
	s, srv, bucket := s3Store(t, "")
	ctx := context.Background()
	for _, size := range []int{0, 1000, blob.PartSize, 2*blob.PartSize + 12345} {
		plain := pattern(size)
		key := "state/ws/" + strings.Repeat("x", size%7+1)
		d, err := s.Put(ctx, key, key, bytes.NewReader(plain), 100<<20)
		if err != nil {
			t.Fatalf("put %d bytes: %v", size, err)
		}
		want := sha256.Sum256(plain)
		if d.Size != int64(size) || !bytes.Equal(d.SHA256, want[:]) {
			t.Fatalf("digests of %d bytes: %+v", size, d)
		}
		raw, err := srv.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("raw object of %d bytes: %v", size, err)
		}
		cipher, _ := io.ReadAll(raw.Body)
		raw.Body.Close()
		if size > 0 && bytes.Contains(cipher, []byte("hunter2")) {
			t.Fatal("plaintext visible in the bucket")
		}
		r, err := s.Open(ctx, key, key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("read back %d of %d bytes: %v", len(got), size, err)
		}
		if _, err := s.Open(ctx, key, "another/identity"); err == nil {
			t.Fatal("an object opened under another identity")
		}
	}
	if n := pendingUploads(t, srv, bucket); n != 0 {
		t.Fatalf("%d multipart uploads left open", n)
	}
	if _, err := s.Open(ctx, "state/missing", "x"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("missing object = %v", err)
	}
	if err := s.Delete(ctx, "state/missing"); err != nil {
		t.Fatalf("deleting a missing object: %v", err)
	}
}

// cancelAfter cancels its context once n bytes have been read, as a client
// that hangs up mid-upload does.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n -= n
	if c.n <= 0 {
		c.cancel()
	}
	return n, err
}

func TestS3FailedUploadsAbortTheirMultipartUpload(t *testing.T) {
	t.Parallel()
	s, srv, bucket := s3Store(t, "")
	ctx := context.Background()

	// Over the limit after two full parts went out.
	_, err := s.Put(ctx, "state/big", "state/big", bytes.NewReader(pattern(3*blob.PartSize)), 2*blob.PartSize+1)
	if !errors.Is(err, blob.ErrTooLarge) {
		t.Fatalf("oversize put = %v", err)
	}
	// The client goes away in the middle of the third part.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	src := &cancelAfter{r: bytes.NewReader(pattern(4 * blob.PartSize)), n: 2*blob.PartSize + 100, cancel: cancel}
	if _, err := s.Put(cctx, "state/cut", "state/cut", src, 100<<20); err == nil {
		t.Fatal("a cancelled upload succeeded")
	}
	for _, key := range []string{"state/big", "state/cut"} {
		if _, err := s.Open(ctx, key, key); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("failed upload %s left an object: %v", key, err)
		}
	}
	if n := pendingUploads(t, srv, bucket); n != 0 {
		t.Fatalf("%d multipart uploads left open after failures", n)
	}
}

func TestOpenURLRefusesWhatItCannotUse(t *testing.T) {
	t.Parallel()
	srv := blobtest.S3(t)
	name, good := srv.Bucket(t)
	sealer, _ := seal.NewStreamSealer(bytes.Repeat([]byte{7}, 32))
	ctx := context.Background()
	for _, bad := range []string{
		"ftp://bucket",
		"s3://?endpoint=" + srv.Endpoint,
		good + "&endpont=typo",
		good + "&use_path_style=maybe",
		strings.Replace(good, name, name+"-missing", 1),
		strings.Replace(good, "s3://", "s3://AKIDEXAMPLE:secret-in-url@", 1),
		strings.Replace(good, name+"?", name+"/tenant-a?", 1),
	} {
		s, err := blob.OpenURL(ctx, bad, "", srv.Creds, sealer)
		if err == nil {
			s.Close()
			t.Fatalf("OpenURL(%q) succeeded", bad)
		}
		if strings.Contains(err.Error(), "secret-in-url") {
			t.Fatalf("OpenURL's error repeats the URL's secret: %v", err)
		}
	}
	if _, err := blob.OpenURL(ctx, good, "", blob.S3Credentials{AccessKeyID: srv.Creds.AccessKeyID, SecretAccessKey: "wrong"}, sealer); err == nil {
		t.Fatal("wrong credentials were accepted at start")
	}
	if _, err := blob.OpenURL(ctx, good, "", srv.Creds, nil); !errors.Is(err, seal.ErrNoKey) {
		t.Fatalf("no master key = %v", err)
	}
}
