package e2e

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/platform/blobtest"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// hundredMB is the largest state Cairn accepts.
const hundredMB = 100_000_000

// apiRSSGrowthBound is how much a 100 MB state may grow the API's resident
// memory: the body streams through one sealing frame and one S3 part.
const apiRSSGrowthBound = 64 << 20

// stateTransfer is one 100 MB state sent through /api/v2 and read back.
type stateTransfer struct {
	upload, download time.Duration
	rssGrowth        int64
}

// transferHundredMBState creates a workspace, uploads a 100 MB state to its
// hosted upload URL while sampling the API's memory, and reads it back.
func transferHundredMBState(t *testing.T, s *Stack) stateTransfer {
	t.Helper()
	if err := devstack.OpenPublicGate(s.Client, s.APIURL, operatorToken, "e2e-open-gate"); err != nil {
		t.Fatal(err)
	}
	m := s.newMember(t, "bigstate")
	bearer := []string{"Authorization", "Bearer " + m.token, "Content-Type", "application/vnd.api+json"}
	var ws struct{ ID string }
	if st := s.apiJSON(t, http.MethodPost, "/api/v2/organizations/"+m.slug+"/workspaces",
		map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"name": "big-state"}}}, &ws, bearer...); st != http.StatusCreated {
		t.Fatalf("creating workspace: %d", st)
	}
	if st := s.apiJSON(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/actions/lock", nil, nil, bearer...); st != http.StatusOK {
		t.Fatalf("locking: %d", st)
	}
	sum := md5.New()
	_, _ = io.Copy(sum, devstack.SyntheticState(hundredMB))
	var sv struct {
		ID         string
		Attributes map[string]any
	}
	if st := s.apiJSON(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/state-versions",
		map[string]any{"data": map[string]any{"type": "state-versions", "attributes": map[string]any{
			"serial": 1, "md5": hex.EncodeToString(sum.Sum(nil)), "lineage": "bench"}}}, &sv, bearer...); st != http.StatusCreated {
		t.Fatalf("creating state version: %d", st)
	}
	uploadURL, _ := sv.Attributes["hosted-state-upload-url"].(string)
	before := devstack.ReadRSS(s.PID("api"))
	sampler := devstack.SampleRSS(s.PID("api"))
	req, _ := http.NewRequest(http.MethodPut, uploadURL, devstack.SyntheticState(hundredMB))
	req.ContentLength = hundredMB
	start := time.Now()
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var out stateTransfer
	out.upload = time.Since(start)
	out.rssGrowth = sampler.Stop() - before
	if resp.StatusCode >= 300 {
		t.Fatalf("upload answered %d", resp.StatusCode)
	}
	if st := s.apiJSON(t, http.MethodGet, "/api/v2/state-versions/"+sv.ID, nil, &sv, bearer...); st != http.StatusOK {
		t.Fatalf("reading state version: %d", st)
	}
	downloadURL, _ := sv.Attributes["hosted-state-download-url"].(string)
	req, _ = http.NewRequest(http.MethodGet, downloadURL, nil)
	req.Header.Set("Authorization", "Bearer "+m.token)
	start = time.Now()
	resp, err = s.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	check := md5.New()
	n, _ := io.Copy(check, resp.Body)
	resp.Body.Close()
	out.download = time.Since(start)
	if n != hundredMB || !bytes.Equal(check.Sum(nil), sum.Sum(nil)) {
		t.Fatalf("downloaded %d bytes that do not match the upload (status %d)", n, resp.StatusCode)
	}
	return out
}

// TestHundredMegabyteStateStreamsIntoS3: a 100 MB state uploaded through
// /api/v2 lands sealed in a real S3 server (versitygw) as a multipart upload,
// reads back byte for byte, and grows the API's memory by less than 64 MiB;
// the same transfer against the directory store gives the comparison.
func TestHundredMegabyteStateStreamsIntoS3(t *testing.T) {
	t.Parallel()
	srv := blobtest.S3(t)
	bucket, storeURL := srv.Bucket(t)
	cheap := []string{"CAIRN_OPERATOR_TOKEN=" + operatorToken, "CAIRN_ARGON2_MEMORY_KIB=64", "CAIRN_ARGON2_ITERATIONS=1", "CAIRN_ARGON2_PARALLELISM=1"}

	_, dirDB := dbtest.NewURL(t)
	dir := transferHundredMBState(t, apiOnly(t, dirDB, cheap...))

	_, s3DB := dbtest.NewURL(t)
	onS3 := transferHundredMBState(t, apiOnly(t, s3DB, append(cheap, "CAIRN_BLOB_URL="+storeURL,
		"CAIRN_S3_ACCESS_KEY_ID="+srv.Creds.AccessKeyID, "CAIRN_S3_SECRET_ACCESS_KEY="+srv.Creds.SecretAccessKey)...))

	mbps := func(d time.Duration) string { return fmt.Sprintf("%.1f MB/s", hundredMB/1e6/d.Seconds()) }
	t.Logf("directory store: upload %s, download %s, API RSS growth %.1f MiB", mbps(dir.upload), mbps(dir.download), float64(dir.rssGrowth)/(1<<20))
	t.Logf("S3 (versitygw):  upload %s, download %s, API RSS growth %.1f MiB", mbps(onS3.upload), mbps(onS3.download), float64(onS3.rssGrowth)/(1<<20))
	if onS3.rssGrowth > apiRSSGrowthBound {
		t.Fatalf("the API grew by %.1f MiB storing 100 MB in S3, over %d MiB", float64(onS3.rssGrowth)/(1<<20), apiRSSGrowthBound>>20)
	}

	// The state (and its JSON twin, if any) is in the bucket, sealed: bigger
	// than the plaintext by its frame overhead, and no upload left open.
	ctx := context.Background()
	objects, err := srv.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var largest int64
	for _, o := range objects.Contents {
		largest = max(largest, aws.ToInt64(o.Size))
	}
	if largest <= hundredMB {
		t.Fatalf("no sealed 100 MB object in the bucket (largest %d bytes of %d objects)", largest, len(objects.Contents))
	}
	uploads, err := srv.Client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(uploads.Uploads) != 0 {
		t.Fatalf("%d multipart uploads left open", len(uploads.Uploads))
	}
}

// TestBlobPrefixConfinesTheProcesses: cairn-api and cairn-worker refuse
// to start, naming the variable, on a CAIRN_BLOB_PREFIX that could leave
// its part of a shared bucket; cairn-api started with one writes a
// configuration archive under it, while its row keeps the key without it.
func TestBlobPrefixConfinesTheProcesses(t *testing.T) {
	t.Parallel()
	bin := binDir(t)
	for _, program := range []string{"cairn-api", "cairn-worker"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, filepath.Join(bin, program))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "CAIRN_DATA_DIR=" + t.TempDir(), "CAIRN_BLOB_PREFIX=../other-team"}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), "CAIRN_BLOB_PREFIX") {
			t.Errorf("%s with an escaping prefix: %v, %q", program, err, stderr.String())
		}
	}

	srv := blobtest.S3(t)
	bucket, storeURL := srv.Bucket(t)
	conn, dbURL := dbtest.NewURL(t)
	s := apiOnly(t, dbURL, "CAIRN_OPERATOR_TOKEN="+operatorToken, "CAIRN_ARGON2_MEMORY_KIB=64", "CAIRN_ARGON2_ITERATIONS=1",
		"CAIRN_ARGON2_PARALLELISM=1", "CAIRN_BLOB_URL="+storeURL, "CAIRN_S3_ACCESS_KEY_ID="+srv.Creds.AccessKeyID,
		"CAIRN_S3_SECRET_ACCESS_KEY="+srv.Creds.SecretAccessKey, "CAIRN_BLOB_PREFIX=tenant-a/cairn/")
	if err := devstack.OpenPublicGate(s.Client, s.APIURL, operatorToken, "e2e-open-gate"); err != nil {
		t.Fatal(err)
	}
	m := s.newMember(t, "prefixed")
	cfgID := s.uploadConfiguration(t, m, s.createWorkspace(t, m, "prefixed", "us"), map[string]string{"main.tf": "# prefixed\n"})
	var key string
	if err := conn.Get(&key, `SELECT blob_key FROM configuration_versions WHERE id = $1`, cfgID); err != nil {
		t.Fatal(err)
	}
	listed, err := srv.Client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range listed.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if !blobkey.Recognised(key) || !slices.Equal(keys, []string{"tenant-a/cairn/" + key}) {
		t.Fatalf("the row holds %q and the bucket %q, want the row's key under tenant-a/cairn/", key, keys)
	}
}
