// Package blobtest gives tests a fresh bucket on the real S3-compatible
// server that `make test` starts (versitygw).
package blobtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

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
