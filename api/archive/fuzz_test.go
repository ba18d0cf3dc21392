package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
)

// FuzzExtract feeds archives to Inspect and Extract under small limits, so
// that every bound is within the fuzzer's reach, and checks what an
// accepted archive leaves on disk against an independent reading of the
// same tar stream. raw is a tar stream the target compresses itself unless
// compressed is set (then it is the gzip stream), since mutating gzip bytes
// rarely gets past the checksum.
func FuzzExtract(f *testing.F) {
	file := func(name, body string) entry { return entry{name: name, body: body} }
	dir := func(name string) entry { return entry{name: name, typeflag: tar.TypeDir, mode: 0o755} }
	seeds := [][]entry{
		{file("main.tf", "terraform {}\n")},
		{file("main.tf", "x"), file(lockFileName, "provider \"p\" {}\n"), dir("modules/"), file("modules/a/b.tf", "y")},
		{{name: "pax_global_header", typeflag: tar.TypeXGlobalHeader, pax: map[string]string{"comment": "0123abcd"}},
			dir("./"), {name: "./run.sh", body: "#!/bin/sh\n", mode: 0o744}},
		{file("a/../b.tf", "x")},
		{file("a", "x"), file("a/b", "y")},
		{file("main.tf", "x"), {name: "l", typeflag: tar.TypeSymlink, link: "/etc/passwd"}},
		{{name: "long/" + string(bytes.Repeat([]byte("p"), 120)) + ".tf", body: "x", format: tar.FormatPAX}},
	}
	for _, s := range seeds {
		raw := tarBytes(f, s...)
		f.Add(raw, false, uint16(0), uint8(0), uint8(0))
		f.Add(gzipBytes(f, raw), true, uint16(4), uint8(2), uint8(8))
	}
	// One directory per process, emptied after every input: a fresh
	// t.TempDir costs more than the extraction.
	base := f.TempDir()
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, raw []byte, compressed bool, maxExpanded uint16, maxEntries, maxPath uint8) {
		data := raw
		if !compressed {
			data = gzipBytes(t, raw)
		}
		// Never zero, so defaults (1 GB) never apply, and small enough that
		// a few fuzzed bytes can cross every bound.
		limits := Limits{
			MaxCompressedBytes: 1 << 20,
			MaxExpandedBytes:   1 + int64(maxExpanded)%4096,
			MaxEntries:         1 + int(maxEntries)%16,
			MaxPathBytes:       1 + int(maxPath)%64,
		}
		inspected, inspectErr := Inspect(context.Background(), bytes.NewReader(data), limits)
		root := filepath.Join(base, strconv.FormatInt(n.Add(1), 10))
		if err := os.Mkdir(root, 0o700); err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(root)
		extracted, extractErr := Extract(context.Background(), bytes.NewReader(data), root, limits)

		// Inspecting and extracting are one validation: same verdict, same
		// manifest, and a refusal always carries a stable code.
		if CodeOf(inspectErr) != CodeOf(extractErr) || (inspectErr == nil) != (extractErr == nil) {
			t.Fatalf("Inspect: %v, Extract: %v", inspectErr, extractErr)
		}
		if inspectErr != nil {
			if CodeOf(inspectErr) == "" {
				t.Fatalf("refusal without a code: %v", inspectErr)
			}
			return
		}
		if inspected != extracted {
			t.Fatalf("Inspect manifest %+v, Extract manifest %+v", inspected, extracted)
		}
		m := extracted
		if m.Files < 1 || m.Files > m.Entries || m.Entries > limits.MaxEntries || m.ExpandedBytes > limits.MaxExpandedBytes {
			t.Fatalf("manifest %+v breaks limits %+v", m, limits)
		}
		requireExtractedAsDeclared(t, root, data, m, limits)
	})
}

// requireExtractedAsDeclared walks the extraction directory and compares
// it with the regular files archive/tar itself reads from the stream: every
// file there is one of them with the same bytes, nothing else was created,
// and the tree stays within the limits.
func requireExtractedAsDeclared(t *testing.T, root string, data []byte, m Manifest, limits Limits) {
	t.Helper()
	want := map[string][]byte{}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("accepted archive is not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			t.Fatalf("accepted archive does not read back: %v", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("accepted archive does not read back: %v", err)
		}
		want[path.Clean(hdr.Name)] = body
	}

	var files, nodes int
	var expanded int64
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		nodes++
		rel, err := filepath.Rel(root, p)
		if err != nil || !filepath.IsLocal(rel) {
			t.Fatalf("extracted %s outside %s", p, root)
		}
		rel = filepath.ToSlash(rel)
		if len(rel) > limits.MaxPathBytes {
			t.Fatalf("extracted path %q is over %d bytes", rel, limits.MaxPathBytes)
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			if info.Mode().Perm() != 0o755 {
				t.Fatalf("directory %q has mode %v", rel, info.Mode())
			}
		case info.Mode().IsRegular():
			files++
			expanded += info.Size()
			body, ok := want[rel]
			if !ok {
				t.Fatalf("extracted %q, which is no regular file of the archive", rel)
			}
			got, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, body) {
				t.Fatalf("extracted %q holds %d bytes unlike the archive's %d", rel, len(got), len(body))
			}
			if perm := info.Mode().Perm(); perm != 0o644 && perm != 0o755 {
				t.Fatalf("file %q has mode %v", rel, info.Mode())
			}
		default:
			t.Fatalf("extracted %q of type %v", rel, info.Mode().Type())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files != m.Files || files != len(want) || expanded != m.ExpandedBytes {
		t.Fatalf("extracted %d files (%d bytes), archive has %d, manifest %+v", files, expanded, len(want), m)
	}
	if nodes > limits.MaxEntries {
		t.Fatalf("extracted %d files and directories, over %d entries", nodes, limits.MaxEntries)
	}
	wantLock := ""
	if lock, ok := want[lockFileName]; ok {
		sum := sha256.Sum256(lock)
		wantLock = hex.EncodeToString(sum[:])
	}
	if m.LockFileSHA256 != wantLock {
		t.Fatalf("lock file digest %q, want %q", m.LockFileSHA256, wantLock)
	}
}
