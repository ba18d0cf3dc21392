package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// s3Client is the method prefix of the S3 client both processes store
// artifacts through (gocloud.dev's s3blob calls a dozen of its operations).
const s3Client = "github.com/aws/aws-sdk-go-v2/service/s3.(*Client)."

// TestLinkerPrunesUnusedMethods: the built cairn-api and cairn-worker hold
// the S3 operations blob storage calls and not the hundreds it never does.
// The linker drops unused exported methods only while nothing reachable
// looks methods up by name (text/template execution, go-cmp, gRPC's
// x/net/trace pages unless built with grpcnotrace); once something does,
// it keeps every method of every type, ~20 MB per binary and megabytes of
// pages an idle process keeps resident. An operation Cairn never calls
// showing up here means a change brought such a lookup in.
func TestLinkerPrunesUnusedMethods(t *testing.T) {
	t.Parallel()
	dir := os.Getenv("CAIRN_BIN_DIR")
	if dir == "" {
		t.Skip("no built binaries to inspect (CAIRN_BIN_DIR is set by the test runner after make build)")
	}
	for _, name := range []string{"cairn-api", "cairn-worker"} {
		bin := filepath.Join(dir, name)
		if _, err := os.Stat(bin); err != nil {
			t.Skipf("no built %s to inspect: %v", name, err)
		}
		out, err := exec.Command("go", "tool", "nm", bin).Output()
		if err != nil {
			t.Fatalf("go tool nm %s: %v", bin, err)
		}
		var ops []string
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) == 3 && strings.HasPrefix(f[2], s3Client) {
				ops = append(ops, strings.TrimPrefix(f[2], s3Client))
			}
		}
		has := func(op string) bool {
			for _, o := range ops {
				if o == op {
					return true
				}
			}
			return false
		}
		if !has("GetObject") || !has("PutObject") {
			t.Fatalf("%s has no S3 GetObject/PutObject; the check below would prove nothing: %v", bin, ops)
		}
		for _, unused := range []string{"PutBucketCors", "ListBuckets", "GetBucketPolicy", "SelectObjectContent"} {
			if has(unused) {
				t.Errorf("%s links S3's %s, which Cairn never calls: the linker keeps every exported method (%d S3 operations linked)", bin, unused, len(ops))
			}
		}
	}
}
