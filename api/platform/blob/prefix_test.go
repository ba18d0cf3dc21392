package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/blobtest"
	"github.com/cairnhq/cairn/api/platform/seal"
)

func directoryStore(t *testing.T, prefix string) (*blob.Store, blobtest.Objects) {
	t.Helper()
	dir := t.TempDir()
	sealer, _ := seal.NewStreamSealer(bytes.Repeat([]byte{7}, 32))
	s, err := blob.OpenDir(dir, prefix, sealer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, blobtest.Dir(dir)
}

func prefixedS3Store(t *testing.T, prefix string) (*blob.Store, blobtest.Objects) {
	t.Helper()
	s, srv, bucket := s3Store(t, prefix)
	return s, srv.Objects(bucket)
}

// TestPrefixConfinesTheStore: with a prefix, the store writes, reads,
// lists and deletes only under it, in keys without it; objects beside it,
// under a sibling whose name starts the same way included, are out of its
// reach.
func TestPrefixConfinesTheStore(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(*testing.T, string) (*blob.Store, blobtest.Objects){
		"directory": directoryStore,
		"s3":        prefixedS3Store,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, raw := open(t, "team/cairn/")
			ctx := context.Background()
			if page, next, err := s.ListPage(ctx, nil, blob.MaxListPage); err != nil || len(page) != 0 || next != nil {
				t.Fatalf("listing an empty prefix: %v %v %v", page, next, err)
			}
			outside := []string{"state/b", "team/state/b", "team/cairn-old/state/b", "team/cairnstate/b", "team/state/cairn/b"}
			for _, k := range outside {
				raw.Put(t, k, []byte("another tool's "+k))
			}
			if _, err := s.Put(ctx, "state/a", "identity", bytes.NewReader([]byte("Cairn's")), 100); err != nil {
				t.Fatal(err)
			}
			if _, ok := raw.Get(t, "team/cairn/state/a"); !ok {
				t.Fatal("the object is not under the prefix")
			}
			if _, ok := raw.Get(t, "state/a"); ok {
				t.Fatal("the object was written outside the prefix")
			}
			page, next, err := s.ListPage(ctx, nil, blob.MaxListPage)
			if err != nil || next != nil {
				t.Fatal(err, next)
			}
			var listed []string
			for _, o := range page {
				listed = append(listed, o.Key)
			}
			if !slices.Equal(listed, []string{"state/a"}) {
				t.Fatalf("listed %q, want only state/a", listed)
			}
			r, err := s.Open(ctx, "state/a", "identity")
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil || string(got) != "Cairn's" {
				t.Fatalf("read back %q, %v", got, err)
			}
			if _, err := s.Open(ctx, "state/b", "identity"); !errors.Is(err, blob.ErrNotFound) {
				t.Fatalf("opening an object outside the prefix: %v", err)
			}
			for _, k := range []string{"state/b", "../state/b", "../cairn-old/state/b"} {
				if err := s.Delete(ctx, k); err != nil {
					t.Logf("deleting %s: %v", k, err)
				}
			}
			for _, k := range outside {
				if b, ok := raw.Get(t, k); !ok || string(b) != "another tool's "+k {
					t.Errorf("%s outside the prefix changed: %q, %v", k, b, ok)
				}
			}
			if err := s.Delete(ctx, "state/a"); err != nil {
				t.Fatal(err)
			}
			if _, ok := raw.Get(t, "team/cairn/state/a"); ok {
				t.Fatal("the object under the prefix survived its delete")
			}
		})
	}
}

func TestOpeningRefusesAnUnsafePrefix(t *testing.T) {
	t.Parallel()
	sealer, _ := seal.NewStreamSealer(bytes.Repeat([]byte{7}, 32))
	for _, prefix := range []string{"../cairn", "/cairn", "a//b", "a b"} {
		if s, err := blob.OpenDir(t.TempDir(), prefix, sealer); err == nil {
			s.Close()
			t.Errorf("OpenDir with prefix %q succeeded", prefix)
		}
		if s, err := blob.OpenURL(context.Background(), t.TempDir(), prefix, blob.S3Credentials{}, sealer); err == nil {
			s.Close()
			t.Errorf("OpenURL with prefix %q succeeded", prefix)
		}
	}
}
