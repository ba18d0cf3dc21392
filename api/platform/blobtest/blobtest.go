// Package blobtest gives tests a fresh bucket on the real S3-compatible
// server that `make test` starts (versitygw).
package blobtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/cairnhq/cairn/api/platform/blob"
)

// Server is how to reach the test S3 server.
type Server struct {
	Endpoint string
	Creds    blob.S3Credentials
}

// S3 returns the test server, failing the test when none was started.
func S3(t testing.TB) Server {
	t.Helper()
	endpoint := os.Getenv("CAIRN_TEST_S3_ENDPOINT")
	if endpoint == "" {
		t.Fatal("CAIRN_TEST_S3_ENDPOINT is not set: run the tests with `make test` (or `cairn-dev cluster`), which starts versitygw")
	}
	return Server{Endpoint: endpoint, Creds: blob.S3Credentials{
		AccessKeyID:     os.Getenv("CAIRN_TEST_S3_ACCESS_KEY"),
		SecretAccessKey: os.Getenv("CAIRN_TEST_S3_SECRET_KEY"),
	}}
}

// Client is a plain S3 client for the test server, for looking behind the
// store's back (multipart uploads, raw objects).
func (s Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.Creds.AccessKeyID, s.Creds.SecretAccessKey, ""),
	})
}

// Bucket creates a fresh bucket and returns its name and the store URL
// that names it.
func (s Server) Bucket(t testing.TB) (name, storeURL string) {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name = "cairn-test-" + hex.EncodeToString(b)
	if _, err := s.Client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("creating test bucket: %v", err)
	}
	q := url.Values{"endpoint": {s.Endpoint}, "region": {"us-east-1"}, "use_path_style": {"true"}}
	return name, "s3://" + name + "?" + q.Encode()
}

// Objects reaches stored objects behind a store's back, as another tool
// sharing its bucket or directory does: raw bytes under full keys, the
// store's prefix included.
type Objects struct {
	put func(ctx context.Context, key string, body []byte) error
	// get returns fs.ErrNotExist for a missing object.
	get func(ctx context.Context, key string) ([]byte, error)
}

// Put writes body under key.
func (o Objects) Put(t testing.TB, key string, body []byte) {
	t.Helper()
	if err := o.put(context.Background(), key, body); err != nil {
		t.Fatalf("planting %s: %v", key, err)
	}
}

// Get returns the bytes under key, or false when there is no object.
func (o Objects) Get(t testing.TB, key string) ([]byte, bool) {
	t.Helper()
	b, err := o.get(context.Background(), key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
	return b, true
}

// Dir reaches the objects of a directory store.
func Dir(dir string) Objects {
	path := func(key string) string { return filepath.Join(dir, filepath.FromSlash(key)) }
	return Objects{
		put: func(_ context.Context, key string, body []byte) error {
			if err := os.MkdirAll(filepath.Dir(path(key)), 0o700); err != nil {
				return err
			}
			return os.WriteFile(path(key), body, 0o600)
		},
		get: func(_ context.Context, key string) ([]byte, error) { return os.ReadFile(path(key)) },
	}
}

// Objects reaches the objects of one bucket of the server.
func (s Server) Objects(bucket string) Objects {
	client := s.Client()
	return Objects{
		put: func(ctx context.Context, key string, body []byte) error {
			_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
			return err
		},
		get: func(ctx context.Context, key string) ([]byte, error) {
			out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			var missing *types.NoSuchKey
			if errors.As(err, &missing) {
				return nil, fs.ErrNotExist
			}
			if err != nil {
				return nil, err
			}
			defer out.Body.Close()
			return io.ReadAll(out.Body)
		},
	}
}
