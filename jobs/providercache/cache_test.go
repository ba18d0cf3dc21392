package providercache_test

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/dirhash"

	"github.com/cairnhq/cairn/jobs/providercache"
)

const source = "registry.opentofu.org/example/thing"

var platform = runtime.GOOS + "_" + runtime.GOARCH

// mirror lays out one packed package in a filesystem mirror, with the
// version document `tofu providers mirror` writes, and returns the mirror
// and the zip. hashes, when not nil, replaces the published hashes.
func mirror(t *testing.T, files map[string]string, hashes []string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	typeDir := filepath.Join(dir, filepath.FromSlash(source))
	if err := os.MkdirAll(typeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := "terraform-provider-thing_1.2.3_" + platform + ".zip"
	pkg := filepath.Join(typeDir, name)
	f, err := os.Create(pkg)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for n, body := range files {
		hdr := &zip.FileHeader{Name: n, Method: zip.Deflate}
		hdr.SetMode(0o755)
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if hashes == nil {
		h1, err := dirhash.HashZip(pkg, dirhash.Hash1)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := os.ReadFile(pkg)
		sum := sha256.Sum256(body)
		hashes = []string{h1, "zh:" + hex.EncodeToString(sum[:])}
	}
	doc, _ := json.Marshal(map[string]any{"archives": map[string]any{platform: map[string]any{"url": name, "hashes": hashes}}})
	if err := os.WriteFile(filepath.Join(typeDir, "1.2.3.json"), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, pkg
}

func newCache(t *testing.T, m string) *providercache.Cache {
	return providercache.New(filepath.Join(t.TempDir(), "cache"), m, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func binary(dir string) string {
	return filepath.Join(dir, filepath.FromSlash(source), "1.2.3", platform, "terraform-provider-thing_v1.2.3")
}

func TestPrepareInstallsVerifiedPackagesOnce(t *testing.T) {
	t.Parallel()
	m, _ := mirror(t, map[string]string{"terraform-provider-thing_v1.2.3": "#!/bin/sh\n"}, nil)
	c := newCache(t, m)
	dir, err := c.Prepare(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(binary(dir))
	if err != nil {
		t.Fatalf("the package is not unpacked in OpenTofu's layout: %v", err)
	}
	if st.Mode().Perm() != 0o755 {
		t.Fatalf("unpacked mode %v, want 0755", st.Mode().Perm())
	}
	if _, err := c.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	again, err := os.Stat(binary(dir))
	if err != nil || !again.ModTime().Equal(st.ModTime()) || !os.SameFile(st, again) {
		t.Fatalf("a second prepare installed the package again: %v", err)
	}
}

func TestPrepareRefusesUnpublishedOrMismatchedPackages(t *testing.T) {
	t.Parallel()
	for name, hashes := range map[string][]string{
		"wrong zh":         {"zh:0000000000000000000000000000000000000000000000000000000000000000"},
		"wrong h1":         {"h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="},
		"no usable scheme": {"md5:abc"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, _ := mirror(t, map[string]string{"terraform-provider-thing_v1.2.3": "x"}, hashes)
			dir, err := newCache(t, m).Prepare(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(binary(dir)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("an unverified package reached the cache: %v", err)
			}
		})
	}
	t.Run("no version document", func(t *testing.T) {
		t.Parallel()
		m, _ := mirror(t, map[string]string{"terraform-provider-thing_v1.2.3": "x"}, nil)
		if err := os.Remove(filepath.Join(m, filepath.FromSlash(source), "1.2.3.json")); err != nil {
			t.Fatal(err)
		}
		dir, err := newCache(t, m).Prepare(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(binary(dir)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a package without published checksums reached the cache: %v", err)
		}
	})
	t.Run("path outside the package", func(t *testing.T) {
		t.Parallel()
		m, _ := mirror(t, map[string]string{"../escape": "x"}, nil)
		c := newCache(t, m)
		if _, err := c.Prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(c.Root, "packages", filepath.FromSlash(source), "1.2.3", "escape")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("an entry outside the package was unpacked: %v", err)
		}
	})
}

// preparedCache is a cache that installed one good package, and the
// directory sandboxes see.
func preparedCache(t *testing.T) (*providercache.Cache, string) {
	t.Helper()
	m, _ := mirror(t, map[string]string{"terraform-provider-thing_v1.2.3": "#!/bin/sh\necho good\n"}, nil)
	c := newCache(t, m)
	dir, err := c.Prepare(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c, dir
}

func TestPrepareDetectsATamperedEntryAndReinstallsIt(t *testing.T) {
	t.Parallel()
	c, dir := preparedCache(t)
	if err := os.WriteFile(binary(dir), []byte("#!/bin/sh\necho evil\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prepare(context.Background()); !errors.Is(err, providercache.ErrTampered) {
		t.Fatalf("prepare over a tampered entry: %v, want ErrTampered", err)
	}
	if _, err := os.Stat(binary(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the tampered entry is still there: %v", err)
	}
	if _, err := c.Prepare(context.Background()); err != nil {
		t.Fatalf("prepare after the tampered entry was removed: %v", err)
	}
	body, err := os.ReadFile(binary(dir))
	if err != nil || string(body) != "#!/bin/sh\necho good\n" {
		t.Fatalf("reinstalled package: %q, %v", body, err)
	}
	// An added file is a change too.
	if err := os.WriteFile(filepath.Join(filepath.Dir(binary(dir)), "extra"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prepare(context.Background()); !errors.Is(err, providercache.ErrTampered) {
		t.Fatalf("prepare over an entry with an added file: %v, want ErrTampered", err)
	}
}

func TestPrepareCatchesATamperThatKeepsSizeAndModTime(t *testing.T) {
	t.Parallel()
	c, dir := preparedCache(t)
	before, err := os.Stat(binary(dir))
	if err != nil {
		t.Fatal(err)
	}
	// Same length, and the modification time put back: only the change
	// time, which no unprivileged process can set, still tells.
	if err := os.WriteFile(binary(dir), []byte("#!/bin/sh\necho evil\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(binary(dir), before.ModTime(), before.ModTime()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prepare(context.Background()); !errors.Is(err, providercache.ErrTampered) {
		t.Fatalf("prepare over a same-size, same-mtime tamper: %v, want ErrTampered", err)
	}
}

func TestPrepareHashesOnlyWhenStampsChangeOrTheHashIsOld(t *testing.T) {
	t.Parallel()
	c, dir := preparedCache(t)
	manifestPath := filepath.Join(c.Root, "manifest.json")
	rewrite := func(edit func(*providercache.Entry)) {
		t.Helper()
		body, err := os.ReadFile(manifestPath)
		if err != nil {
			t.Fatal(err)
		}
		var entries []providercache.Entry
		if err := json.Unmarshal(body, &entries); err != nil || len(entries) != 1 {
			t.Fatalf("manifest: %v, %d entries", err, len(entries))
		}
		edit(&entries[0])
		body, _ = json.Marshal(entries)
		if err := os.WriteFile(manifestPath, body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The recorded hash no longer matches the files, but nothing about
	// the files changed and they were hashed recently: no hash is taken.
	rewrite(func(e *providercache.Entry) { e.H1 = "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" })
	if _, err := c.Prepare(context.Background()); err != nil {
		t.Fatalf("prepare with matching stamps hashed the package: %v", err)
	}
	// A day later the package is hashed again, and the mismatch found.
	rewrite(func(e *providercache.Entry) { e.VerifiedAt = time.Now().Add(-25 * time.Hour) })
	if _, err := c.Prepare(context.Background()); !errors.Is(err, providercache.ErrTampered) {
		t.Fatalf("prepare after a day: %v, want ErrTampered", err)
	}
	// A touched but unchanged file is hashed, found intact and stamped
	// afresh.
	if _, err := c.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	var before providercache.Entry
	rewrite(func(e *providercache.Entry) { before = *e })
	now := time.Now()
	if err := os.Chtimes(binary(dir), now, now); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prepare(context.Background()); err != nil {
		t.Fatalf("prepare after a touch: %v", err)
	}
	var after providercache.Entry
	rewrite(func(e *providercache.Entry) { after = *e })
	if after.H1 != before.H1 || !after.VerifiedAt.After(before.VerifiedAt) || reflect.DeepEqual(after.Stamps, before.Stamps) {
		t.Fatalf("after a touch the entry was not hashed and stamped afresh:\nbefore %+v\nafter  %+v", before, after)
	}
}
