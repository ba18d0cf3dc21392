package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entry is one tar entry to build; typeflag defaults to a regular file.
type entry struct {
	name     string
	typeflag byte
	body     string
	mode     int64
	link     string
	pax      map[string]string
	format   tar.Format
}

func writeEntries(t testing.TB, tw *tar.Writer, entries []entry) {
	t.Helper()
	for _, e := range entries {
		hdr := &tar.Header{
			Name:       e.name,
			Typeflag:   e.typeflag,
			Mode:       e.mode,
			Linkname:   e.link,
			PAXRecords: e.pax,
			Format:     e.format,
		}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Mode == 0 && hdr.Typeflag != tar.TypeXGlobalHeader {
			hdr.Mode = 0o644
		}
		if hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("writing header %q: %v", e.name, err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatalf("writing body %q: %v", e.name, err)
		}
	}
}

// tarBytes is a complete tar stream, end-of-archive marker included.
func tarBytes(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	writeEntries(t, tw, entries)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipBytes(t testing.TB, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func archiveOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	return gzipBytes(t, tarBytes(t, entries...))
}

// setChecksum rewrites a header block's checksum so that only the fields a
// test corrupted on purpose are wrong.
func setChecksum(block []byte) {
	copy(block[148:156], "        ")
	var sum int64
	for _, c := range block[:blockSize] {
		sum += int64(c)
	}
	copy(block[148:156], fmt.Sprintf("%06o\x00 ", sum))
}

// withName rewrites the first header's name, for names tar.Writer refuses to
// encode but other writers produce.
func withName(raw []byte, name string) []byte {
	clear(raw[:100])
	copy(raw[:100], name)
	setChecksum(raw)
	return raw
}

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// extractInto extracts into a fresh "target" directory inside a parent it
// also returns, so a test can see whether anything landed beside target.
func extractInto(t *testing.T, data []byte, limits Limits) (string, string, Manifest, error) {
	t.Helper()
	parent := t.TempDir()
	target := filepath.Join(parent, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	m, err := Extract(context.Background(), bytes.NewReader(data), target, limits)
	return parent, target, m, err
}

func requireOnlyTarget(t *testing.T, parent string) {
	t.Helper()
	names, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0].Name() != "target" {
		t.Fatalf("extraction wrote outside its directory: %v", names)
	}
}

func TestRefusedArchives(t *testing.T) {
	t.Parallel()
	valid := archiveOf(t, entry{name: "main.tf", body: "terraform {}\n"})

	checksumBroken := tarBytes(t, entry{name: "main.tf", body: "x"})
	copy(checksumBroken[148:156], "7777777\x00")

	// A valid checksum over a size field archive/tar cannot parse: a parse
	// error, not a checksum error.
	sizeBroken := tarBytes(t, entry{name: "main.tf", body: "x"})
	copy(sizeBroken[124:136], "zzzzzzzzzzz\x00")
	setChecksum(sizeBroken)

	var noEndMarker bytes.Buffer
	tw := tar.NewWriter(&noEndMarker)
	writeEntries(t, tw, []entry{{name: "main.tf", body: "x"}})
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}

	cutInBody := tarBytes(t, entry{name: "main.tf", body: strings.Repeat("x", 2000)})[:blockSize+1000]

	crcBroken := bytes.Clone(valid)
	crcBroken[len(crcBroken)-8] ^= 0xff

	oldSparse := tarBytes(t, entry{name: "sparse.tf", format: tar.FormatGNU})
	oldSparse[156] = tar.TypeGNUSparse
	setChecksum(oldSparse)

	// Extended headers are free to archive/tar but cost decompression: three
	// near-1 MiB global headers overrun the budget of a one-entry archive.
	inflated := make([]entry, 0, 4)
	for range 3 {
		inflated = append(inflated, entry{name: "pax_global_header", typeflag: tar.TypeXGlobalHeader, pax: map[string]string{"comment": strings.Repeat("x", 900_000)}})
	}
	inflated = append(inflated, entry{name: "main.tf", body: "x"})

	file := func(name string) entry { return entry{name: name, body: "x"} }
	dir := func(name string) entry { return entry{name: name, typeflag: tar.TypeDir, mode: 0o755} }

	for _, tc := range []struct {
		name   string
		data   []byte
		limits Limits
		code   string
		path   string
	}{
		{name: "over compressed limit", data: valid, limits: Limits{MaxCompressedBytes: int64(len(valid) - 1)}, code: codeTooLarge},
		{name: "not gzip", data: []byte("main.tf = definitely not gzip"), code: codeMalformed},
		{name: "empty stream", data: nil, code: codeMalformed},
		{name: "truncated gzip", data: valid[:len(valid)-10], code: codeMalformed},
		{name: "gzip crc mismatch", data: crcBroken, code: codeMalformed},
		{name: "garbage after gzip", data: append(bytes.Clone(valid), "garbage"...), code: codeMalformed},
		{name: "tar without end marker", data: gzipBytes(t, noEndMarker.Bytes()), code: codeMalformed},
		{name: "tar cut inside a body", data: gzipBytes(t, cutInBody), code: codeMalformed},
		{name: "data after end marker", data: gzipBytes(t, append(tarBytes(t, file("main.tf")), "hidden"...)), code: codeMalformed},
		{name: "padding beyond a record", data: gzipBytes(t, append(tarBytes(t, file("main.tf")), make([]byte, trailerMaxBytes+blockSize)...)), code: codeMalformed},
		{name: "unparsable header field", data: gzipBytes(t, sizeBroken), code: codeMalformed},
		{name: "bad header checksum", data: gzipBytes(t, checksumBroken), code: codeChecksumInvalid},
		{name: "parent segment", data: archiveOf(t, file("../main.tf")), code: codePathTraversal, path: "../main.tf"},
		{name: "parent segment inside", data: archiveOf(t, file("a/../../main.tf")), code: codePathTraversal, path: "a/../../main.tf"},
		{name: "parent segment that cleans away", data: archiveOf(t, file("a/../main.tf")), code: codePathTraversal, path: "a/../main.tf"},
		{name: "parent directory", data: archiveOf(t, dir("./../")), code: codePathTraversal, path: "./../"},
		{name: "leading slash", data: archiveOf(t, file("/etc/main.tf")), code: codeAbsolutePath, path: "/etc/main.tf"},
		{name: "leading backslash", data: archiveOf(t, file(`\main.tf`)), code: codeAbsolutePath, path: `\main.tf`},
		{name: "drive letter", data: archiveOf(t, file("C:/main.tf")), code: codeAbsolutePath, path: "C:/main.tf"},
		{name: "drive relative", data: archiveOf(t, file("c:main.tf")), code: codeAbsolutePath, path: "c:main.tf"},
		{name: "backslash inside", data: archiveOf(t, file(`a\main.tf`)), code: codePathInvalid, path: `a\main.tf`},
		{name: "control character", data: archiveOf(t, file("a\x01.tf")), code: codePathInvalid, path: "a\x01.tf"},
		{name: "newline", data: archiveOf(t, file("a\n.tf")), code: codePathInvalid, path: "a\n.tf"},
		{name: "empty name", data: archiveOf(t, file("")), code: codePathInvalid},
		{name: "file named root", data: gzipBytes(t, withName(tarBytes(t, file("placeholder")), "./")), code: codePathInvalid, path: "./"},
		{name: "file with trailing slash", data: gzipBytes(t, withName(tarBytes(t, file("placeholder")), "main.tf/")), code: codePathInvalid, path: "main.tf/"},
		{name: "path too long", data: archiveOf(t, file("./abcdefghijk")), limits: Limits{MaxPathBytes: 10}, code: codePathTooLong, path: "./abcdefghijk"},
		{name: "same file twice", data: archiveOf(t, file("main.tf"), file("main.tf")), code: codeDuplicatePath, path: "main.tf"},
		{name: "same file cleaned", data: archiveOf(t, file("a//main.tf"), file("./a/./main.tf")), code: codeDuplicatePath, path: "./a/./main.tf"},
		{name: "same directory twice", data: archiveOf(t, dir("a/"), file("a/main.tf"), dir("a")), code: codeDuplicatePath, path: "a"},
		{name: "root twice", data: archiveOf(t, dir("./"), dir(".")), code: codeDuplicatePath, path: "."},
		{name: "child of a file", data: archiveOf(t, file("a"), file("a/main.tf")), code: codeDuplicatePath, path: "a/main.tf"},
		{name: "file over implied directory", data: archiveOf(t, file("a/b/main.tf"), file("a")), code: codeDuplicatePath, path: "a"},
		{name: "file over directory", data: archiveOf(t, dir("a/"), file("a")), code: codeDuplicatePath, path: "a"},
		{name: "directory over file", data: archiveOf(t, file("a"), dir("a/")), code: codeDuplicatePath, path: "a/"},
		{name: "symlink", data: archiveOf(t, file("main.tf"), entry{name: "link.tf", typeflag: tar.TypeSymlink, link: "main.tf"}), code: codeLink, path: "link.tf"},
		{name: "hard link", data: archiveOf(t, file("main.tf"), entry{name: "link.tf", typeflag: tar.TypeLink, link: "main.tf"}), code: codeLink, path: "link.tf"},
		{name: "character device", data: archiveOf(t, entry{name: "tty", typeflag: tar.TypeChar}), code: codeEntryType, path: "tty"},
		{name: "block device", data: archiveOf(t, entry{name: "sda", typeflag: tar.TypeBlock}), code: codeEntryType, path: "sda"},
		{name: "fifo", data: archiveOf(t, entry{name: "pipe", typeflag: tar.TypeFifo}), code: codeEntryType, path: "pipe"},
		{name: "contiguous file", data: archiveOf(t, entry{name: "c.tf", typeflag: tar.TypeCont}), code: codeEntryType, path: "c.tf"},
		{name: "old gnu sparse file", data: gzipBytes(t, oldSparse), code: codeEntryType, path: "sparse.tf"},
		{name: "total over expanded limit", data: archiveOf(t, entry{name: "a.tf", body: "123456"}, entry{name: "b.tf", body: "123456"}), limits: Limits{MaxExpandedBytes: 10}, code: codeExpansion, path: "b.tf"},
		{name: "one file over expanded limit", data: archiveOf(t, entry{name: "a.tf", body: "12345678901"}), limits: Limits{MaxExpandedBytes: 10}, code: codeExpansion, path: "a.tf"},
		{name: "extended headers over budget", data: archiveOf(t, inflated...), limits: Limits{MaxExpandedBytes: 10, MaxEntries: 1}, code: codeExpansion},
		{name: "too many files", data: archiveOf(t, file("a.tf"), file("b.tf"), file("c.tf")), limits: Limits{MaxEntries: 2}, code: codeTooManyEntries, path: "c.tf"},
		{name: "too many implied directories", data: archiveOf(t, file("a/b/main.tf")), limits: Limits{MaxEntries: 2}, code: codeTooManyEntries, path: "a/b/main.tf"},
		{name: "directories only", data: archiveOf(t, dir("a/"), dir("a/b/")), code: codeEmpty},
		{name: "no entries", data: archiveOf(t), code: codeEmpty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Inspect(context.Background(), bytes.NewReader(tc.data), tc.limits)
			requireRefused(t, "Inspect", err, tc.code, tc.path)

			parent, _, _, err := extractInto(t, tc.data, tc.limits)
			requireRefused(t, "Extract", err, tc.code, tc.path)
			requireOnlyTarget(t, parent)
		})
	}
}

func requireRefused(t *testing.T, op string, err error, code, path string) {
	t.Helper()
	if got := CodeOf(err); got != code {
		t.Fatalf("%s: code %q, want %q (err: %v)", op, got, code, err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("%s: %v does not match ErrInvalid", op, err)
	}
	archiveErr, _ := errors.AsType[*Error](err)
	if archiveErr.Path != path {
		t.Fatalf("%s: path %q, want %q", op, archiveErr.Path, path)
	}
}

type wantFile struct {
	body string
	mode fs.FileMode
}

func TestAcceptedArchives(t *testing.T) {
	t.Parallel()
	lock := "provider \"registry.opentofu.org/hashicorp/aws\" {}\n"
	lockSum := sha256.Sum256([]byte(lock))
	main := "terraform {}\n"

	for _, tc := range []struct {
		name     string
		data     []byte
		limits   Limits
		manifest Manifest
		files    map[string]wantFile
		dirs     []string
	}{
		{
			name:     "single file",
			data:     archiveOf(t, entry{name: "main.tf", body: main}),
			manifest: Manifest{Entries: 1, Files: 1, ExpandedBytes: int64(len(main))},
			files:    map[string]wantFile{"main.tf": {main, 0o644}},
		},
		{
			name: "root lock file",
			data: archiveOf(t,
				entry{name: "main.tf", body: main},
				entry{name: ".terraform.lock.hcl", body: lock}),
			manifest: Manifest{Entries: 2, Files: 2, ExpandedBytes: int64(len(main) + len(lock)), LockFileSHA256: hex.EncodeToString(lockSum[:])},
			files:    map[string]wantFile{"main.tf": {main, 0o644}, ".terraform.lock.hcl": {lock, 0o644}},
		},
		{
			name: "lock file below the root is just a file",
			data: archiveOf(t,
				entry{name: "modules/vpc/.terraform.lock.hcl", body: lock}),
			manifest: Manifest{Entries: 1, Files: 1, ExpandedBytes: int64(len(lock))},
			files:    map[string]wantFile{"modules/vpc/.terraform.lock.hcl": {lock, 0o644}},
			dirs:     []string{"modules", "modules/vpc"},
		},
		{
			name: "tar -C dir . with git's global header",
			data: archiveOf(t,
				entry{name: "pax_global_header", typeflag: tar.TypeXGlobalHeader, pax: map[string]string{"comment": "0123abcd"}},
				entry{name: "./", typeflag: tar.TypeDir, mode: 0o700},
				entry{name: "./main.tf", body: main, mode: 0o600},
				entry{name: "././.terraform.lock.hcl", body: lock},
				entry{name: "./scripts/", typeflag: tar.TypeDir, mode: 0o700},
				entry{name: "./scripts/init.sh", body: "#!/bin/sh\n", mode: 0o744}),
			manifest: Manifest{Entries: 5, Files: 3, ExpandedBytes: int64(len(main) + len(lock) + len("#!/bin/sh\n")), LockFileSHA256: hex.EncodeToString(lockSum[:])},
			files: map[string]wantFile{
				"main.tf":             {main, 0o644},
				".terraform.lock.hcl": {lock, 0o644},
				"scripts/init.sh":     {"#!/bin/sh\n", 0o755},
			},
			dirs: []string{"scripts"},
		},
		{
			name: "nested files without directory entries, directory entry after its files",
			data: archiveOf(t,
				entry{name: "modules/vpc/main.tf", body: "a"},
				entry{name: "modules/vpc/outputs.tf", body: "bb"},
				entry{name: "modules/db/main.tf", body: "ccc"},
				entry{name: "modules/", typeflag: tar.TypeDir},
				entry{name: "empty/dir/", typeflag: tar.TypeDir},
				entry{name: "main.tf", body: main}),
			manifest: Manifest{Entries: 6, Files: 4, ExpandedBytes: int64(6 + len(main))},
			files: map[string]wantFile{
				"modules/vpc/main.tf":    {"a", 0o644},
				"modules/vpc/outputs.tf": {"bb", 0o644},
				"modules/db/main.tf":     {"ccc", 0o644},
				"main.tf":                {main, 0o644},
			},
			dirs: []string{"modules", "modules/vpc", "modules/db", "empty", "empty/dir"},
		},
		{
			name:     "record padding after the end marker",
			data:     gzipBytes(t, append(tarBytes(t, entry{name: "main.tf", body: main}), make([]byte, 10240)...)),
			manifest: Manifest{Entries: 1, Files: 1, ExpandedBytes: int64(len(main))},
			files:    map[string]wantFile{"main.tf": {main, 0o644}},
		},
		{
			name:     "limits met exactly",
			data:     archiveOf(t, entry{name: "./a/bcdefgh.tf", body: "0123456789"}),
			limits:   Limits{MaxExpandedBytes: 10, MaxEntries: 2, MaxPathBytes: len("a/bcdefgh.tf")},
			manifest: Manifest{Entries: 1, Files: 1, ExpandedBytes: 10},
			files:    map[string]wantFile{"a/bcdefgh.tf": {"0123456789", 0o644}},
			dirs:     []string{"a"},
		},
		{
			name:     "non-ascii name",
			data:     archiveOf(t, entry{name: "réseau/main.tf", body: main}),
			manifest: Manifest{Entries: 1, Files: 1, ExpandedBytes: int64(len(main))},
			files:    map[string]wantFile{"réseau/main.tf": {main, 0o644}},
			dirs:     []string{"réseau"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := Inspect(context.Background(), bytes.NewReader(tc.data), tc.limits)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if m != tc.manifest {
				t.Fatalf("Inspect manifest %+v, want %+v", m, tc.manifest)
			}

			parent, target, m, err := extractInto(t, tc.data, tc.limits)
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if m != tc.manifest {
				t.Fatalf("Extract manifest %+v, want %+v", m, tc.manifest)
			}
			requireOnlyTarget(t, parent)
			requireTree(t, target, tc.files, tc.dirs)
		})
	}
}

func requireTree(t *testing.T, root string, files map[string]wantFile, dirs []string) {
	t.Helper()
	wantDirs := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		wantDirs[d] = true
	}
	seen := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		seen++
		switch {
		case info.IsDir():
			if !wantDirs[rel] {
				t.Errorf("unexpected directory %s", rel)
			}
			if info.Mode().Perm() != 0o755 {
				t.Errorf("directory %s mode %v, want 0755", rel, info.Mode().Perm())
			}
		case info.Mode().IsRegular():
			want, ok := files[rel]
			if !ok {
				t.Errorf("unexpected file %s", rel)
				return nil
			}
			body, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if string(body) != want.body {
				t.Errorf("file %s holds %q, want %q", rel, body, want.body)
			}
			if info.Mode().Perm() != want.mode {
				t.Errorf("file %s mode %v, want %v", rel, info.Mode().Perm(), want.mode)
			}
		default:
			t.Errorf("%s is neither file nor directory: %v", rel, info.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != len(files)+len(dirs) {
		t.Fatalf("found %d paths, want %d files and %d directories", seen, len(files), len(dirs))
	}
}

func TestInspectReadsAtMostOnePastCompressedLimit(t *testing.T) {
	t.Parallel()
	data := archiveOf(t, entry{name: "main.tf", body: string(randomBytes(1, 200_000))})
	const limit = 10_000
	for _, tc := range []struct {
		name string
		r    func() io.Reader
	}{
		{"one read", func() io.Reader { return bytes.NewReader(data) }},
		{"byte by byte", func() io.Reader { return io.LimitReader(&oneByteReader{bytes.NewReader(data)}, int64(len(data))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			counter := &countingReader{r: tc.r()}
			_, err := Inspect(context.Background(), counter, Limits{MaxCompressedBytes: limit})
			if CodeOf(err) != codeTooLarge {
				t.Fatalf("code %q, want %q (err: %v)", CodeOf(err), codeTooLarge, err)
			}
			if counter.n > limit+1 {
				t.Fatalf("read %d bytes, limit %d", counter.n, limit)
			}
		})
	}

	// The limit is inclusive: an archive of exactly the limit is read to its end.
	if _, err := Inspect(context.Background(), bytes.NewReader(data), Limits{MaxCompressedBytes: int64(len(data))}); err != nil {
		t.Fatalf("archive of exactly the limit: %v", err)
	}
}

type oneByteReader struct{ r io.Reader }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

func TestDeclaredSizeRefusedBeforeContent(t *testing.T) {
	t.Parallel()
	t.Run("content present", func(t *testing.T) {
		t.Parallel()
		// Incompressible, so compressed bytes read track content bytes read.
		body := randomBytes(2, 2<<20)
		data := archiveOf(t, entry{name: "big.tf", body: string(body)})
		counter := &countingReader{r: bytes.NewReader(data)}
		_, err := Inspect(context.Background(), counter, Limits{MaxExpandedBytes: 1 << 20})
		if CodeOf(err) != codeExpansion {
			t.Fatalf("code %q, want %q (err: %v)", CodeOf(err), codeExpansion, err)
		}
		if counter.n > 64<<10 {
			t.Fatalf("read %d of %d compressed bytes before refusing", counter.n, len(data))
		}
	})
	t.Run("content absent", func(t *testing.T) {
		t.Parallel()
		// Had the content been read, the missing terabyte would show as a
		// truncated archive instead.
		var raw bytes.Buffer
		tw := tar.NewWriter(&raw)
		if err := tw.WriteHeader(&tar.Header{Name: "big.tf", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 40}); err != nil {
			t.Fatal(err)
		}
		data := gzipBytes(t, raw.Bytes())
		_, err := Inspect(context.Background(), bytes.NewReader(data), Limits{})
		if CodeOf(err) != codeExpansion {
			t.Fatalf("code %q, want %q (err: %v)", CodeOf(err), codeExpansion, err)
		}
		parent, _, _, err := extractInto(t, data, Limits{})
		if CodeOf(err) != codeExpansion {
			t.Fatalf("Extract code %q, want %q (err: %v)", CodeOf(err), codeExpansion, err)
		}
		requireOnlyTarget(t, parent)
	})
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	data := archiveOf(t, entry{name: "main.tf", body: "x"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Inspect(ctx, bytes.NewReader(data), Limits{})
	if !errors.Is(err, context.Canceled) || CodeOf(err) != "" || errors.Is(err, ErrInvalid) {
		t.Fatalf("Inspect with a cancelled context: %v", err)
	}

	// Cancelled part-way through: the entry after the cancellation is never read.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	data = archiveOf(t,
		entry{name: "a.tf", body: string(randomBytes(3, 256<<10))},
		entry{name: "b.tf", body: string(randomBytes(4, 256<<10))})
	r := &cancellingReader{r: bytes.NewReader(data), after: 100 << 10, cancel: cancel}
	_, err = Inspect(ctx, r, Limits{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Inspect cancelled mid-stream: %v", err)
	}
	if r.n > 100<<10+64<<10 {
		t.Fatalf("read %d bytes after cancelling at %d", r.n, 100<<10)
	}
}

type cancellingReader struct {
	r      io.Reader
	n      int64
	after  int64
	cancel context.CancelFunc
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n >= c.after {
		c.cancel()
	}
	return n, err
}

func TestExtractNeedsEmptyDirectory(t *testing.T) {
	t.Parallel()
	data := archiveOf(t, entry{name: "main.tf", body: "new"})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Extract(context.Background(), bytes.NewReader(data), dir, Limits{})
	if err == nil || CodeOf(err) != "" {
		t.Fatalf("Extract into a non-empty directory: %v", err)
	}
	if body, _ := os.ReadFile(filepath.Join(dir, "main.tf")); string(body) != "old" {
		t.Fatalf("existing file overwritten: %q", body)
	}

	_, err = Extract(context.Background(), bytes.NewReader(data), filepath.Join(dir, "missing"), Limits{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Extract into a missing directory: %v", err)
	}
}

func TestCleanPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cleaned, code string
	}{
		{"main.tf", "main.tf", ""},
		{"./main.tf", "main.tf", ""},
		{"././main.tf", "main.tf", ""},
		{"a//b/./c.tf", "a/b/c.tf", ""},
		{"a/", "a", ""},
		{"./", ".", ""},
		{"..a/b..", "..a/b..", ""},
		{"ünïcode.tf", "ünïcode.tf", ""},
		{"..", "", codePathTraversal},
		{"a/..", "", codePathTraversal},
		{"a/../b", "", codePathTraversal},
		{"./../a", "", codePathTraversal},
		{"/a", "", codeAbsolutePath},
		{"//a", "", codeAbsolutePath},
		{`\a`, "", codeAbsolutePath},
		{"Z:a", "", codeAbsolutePath},
		{`a\b`, "", codePathInvalid},
		{`..\a`, "", codePathInvalid},
		{"", "", codePathInvalid},
		{"a\x00b", "", codePathInvalid},
		{"a\tb", "", codePathInvalid},
		{"a\x7fb", "", codePathInvalid},
		{"a\u0085b", "", codePathInvalid},
		{"a\xffb", "", codePathInvalid},
		{"./" + strings.Repeat("x", 16), strings.Repeat("x", 16), ""},
		{strings.Repeat("x", 17), "", codePathTooLong},
	} {
		cleaned, code := cleanPath(tc.name, 16)
		if cleaned != tc.cleaned || code != tc.code {
			t.Errorf("cleanPath(%q) = %q, %q; want %q, %q", tc.name, cleaned, code, tc.cleaned, tc.code)
		}
	}
}

func TestErrorIdentity(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("accepting upload: %w", &Error{Code: codePathTraversal, Path: "../\x1b[31mx"})
	if !errors.Is(err, ErrInvalid) || CodeOf(err) != codePathTraversal {
		t.Fatalf("wrapped *Error lost its identity: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"../\x1b[31mx"`) {
		t.Fatalf("path not quoted in %q", msg)
	}
	if CodeOf(errors.New("disk full")) != "" || CodeOf(nil) != "" {
		t.Fatal("CodeOf invented a code")
	}
	if errors.Is(errors.New("invalid configuration archive"), ErrInvalid) {
		t.Fatal("ErrInvalid matched by message")
	}
}

func TestLimitDefaults(t *testing.T) {
	t.Parallel()
	want := Limits{MaxCompressedBytes: 100_000_000, MaxExpandedBytes: 1_000_000_000, MaxEntries: 50_000, MaxPathBytes: 1024}
	if got := DefaultLimits(); got != want {
		t.Fatalf("DefaultLimits() = %+v, want %+v", got, want)
	}
	if got := (Limits{MaxEntries: 7, MaxPathBytes: -1}).orDefaults(); got != (Limits{MaxCompressedBytes: 100_000_000, MaxExpandedBytes: 1_000_000_000, MaxEntries: 7, MaxPathBytes: 1024}) {
		t.Fatalf("orDefaults() = %+v", got)
	}
}

func BenchmarkInspect(b *testing.B) {
	// About 20 MB compressed: random bodies do not compress.
	entries := make([]entry, 0, 200)
	for i := range 200 {
		entries = append(entries, entry{name: fmt.Sprintf("modules/m%03d/main.tf", i), body: string(randomBytes(uint64(i), 100_000))})
	}
	data := archiveOf(b, entries...)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Inspect(context.Background(), bytes.NewReader(data), Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
