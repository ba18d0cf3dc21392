package github

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"testing"

	"github.com/cairnhq/cairn/api/github/githubfake"
)

// TestRepackDirectory: the directory is rooted at the archive's top; with
// keepOthers its links come along (for the caller's validation to refuse),
// without it they are dropped; a traversing name stays one; a directory
// with nothing in it is ErrDirectoryMissing.
func TestRepackDirectory(t *testing.T) {
	t.Parallel()
	src, err := githubfake.TarballWithLinks("acme-infra-abcdef0", "abcdef0", map[string]string{
		"network/main.tf": "# net\n", "network/modules/sub/main.tf": "# sub\n", "other/main.tf": "# other\n",
	}, map[string]string{"network/evil": "/etc/passwd"})
	if err != nil {
		t.Fatal(err)
	}
	entries := func(keep bool, dir string) (map[string]byte, error) {
		var out bytes.Buffer
		if err := RepackDirectory(bytes.NewReader(src), &out, dir, keep); err != nil {
			return nil, err
		}
		gz, err := gzip.NewReader(&out)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(gz)
		got := map[string]byte{}
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			if err != nil {
				t.Fatal(err)
			}
			got[h.Name] = h.Typeflag
		}
	}
	kept, err := entries(true, "network")
	if err != nil {
		t.Fatal(err)
	}
	if kept["main.tf"] != tar.TypeReg || kept["modules/sub/main.tf"] != tar.TypeReg || kept["evil"] != tar.TypeSymlink {
		t.Fatalf("kept: %v", kept)
	}
	if _, ok := kept["other/main.tf"]; ok {
		t.Fatalf("another directory came along: %v", kept)
	}
	dropped, err := entries(false, "network")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dropped["evil"]; ok || dropped["main.tf"] != tar.TypeReg {
		t.Fatalf("dropped: %v", dropped)
	}
	if _, err := entries(true, "missing"); !errors.Is(err, ErrDirectoryMissing) {
		t.Fatalf("missing directory: %v", err)
	}

	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range []string{"top/", "top/../../escape.tf"} {
		typ := byte(tar.TypeReg)
		if name == "top/" {
			typ = tar.TypeDir
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: typ, Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	gz.Close()
	var out bytes.Buffer
	if err := RepackDirectory(&buf, &out, "", true); err != nil {
		t.Fatal(err)
	}
	zr, _ := gzip.NewReader(&out)
	h, err := tar.NewReader(zr).Next()
	if err != nil || h.Name != "../../escape.tf" {
		t.Fatalf("traversing name: %v %+v", err, h)
	}
}
