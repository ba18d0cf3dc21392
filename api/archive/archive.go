package archive

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits bound an archive. A field that is zero or negative takes its default,
// so callers override only what they need and can never switch a bound off.
type Limits struct {
	MaxCompressedBytes int64 // bytes read from the caller's reader
	MaxExpandedBytes   int64 // total regular-file bytes after decompression
	// MaxEntries counts directories implied by file paths as well as tar
	// entries, because extraction creates them either way; it also bounds the
	// memory spent remembering paths.
	MaxEntries   int
	MaxPathBytes int // per entry path, after cleaning
}

// DefaultLimits are generous for a configuration (which is text) and small
// enough that one upload cannot exhaust a worker's disk or memory.
func DefaultLimits() Limits {
	return Limits{
		MaxCompressedBytes: 100_000_000,
		MaxExpandedBytes:   1_000_000_000,
		MaxEntries:         50_000,
		MaxPathBytes:       1024,
	}
}

func (l Limits) orDefaults() Limits {
	d := DefaultLimits()
	if l.MaxCompressedBytes <= 0 {
		l.MaxCompressedBytes = d.MaxCompressedBytes
	}
	if l.MaxExpandedBytes <= 0 {
		l.MaxExpandedBytes = d.MaxExpandedBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	if l.MaxPathBytes <= 0 {
		l.MaxPathBytes = d.MaxPathBytes
	}
	return l
}

// Manifest describes an archive that passed every check.
type Manifest struct {
	Entries        int // tar entries that are files or directories
	Files          int
	ExpandedBytes  int64
	LockFileSHA256 string // of the root ".terraform.lock.hcl", "" when absent
}

const (
	lockFileName = ".terraform.lock.hcl"
	blockSize    = 512
	// entryOverheadBytes is the decompressed room allowed per entry beyond its
	// content: header, padding and PAX or GNU records carrying a long path.
	// archive/tar reads any number of extended headers before returning an
	// entry, so without this budget a tiny archive could inflate without end.
	entryOverheadBytes = 8 << 10
	// trailerMaxBytes bounds the zero padding after the end-of-archive marker.
	// Writers pad to a record (10 KiB for GNU tar), so more is not padding.
	trailerMaxBytes = 1 << 20
)

var (
	errOverLimit    = errors.New("stream over its limit")
	errNoEndMarker  = errors.New("tar stream ends without its end-of-archive marker")
	errTrailingData = errors.New("data after the end-of-archive marker")
)

// Inspect reads a complete gzip-compressed tar stream from r and validates
// every entry.
func Inspect(ctx context.Context, r io.Reader, limits Limits) (Manifest, error) {
	return scan(ctx, r, limits, nil)
}

// Extract validates like Inspect and writes the files under dir, which must
// exist and be empty. Directories get 0o755 and files 0o644, or 0o755 when the
// header sets any execute bit, whatever the umask. It never follows or creates
// symlinks and never writes outside dir. On error the caller discards dir:
// an archive is only known to be valid once it has been read to the end.
func Extract(ctx context.Context, r io.Reader, dir string, limits Limits) (Manifest, error) {
	// Everything goes through the root so that no path, however it was
	// validated, can reach outside dir.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("opening extraction directory: %w", err)
	}
	defer root.Close()
	if err := requireEmpty(root); err != nil {
		return Manifest{}, err
	}
	return scan(ctx, r, limits, &dirWriter{root: root})
}

func requireEmpty(root *os.Root) error {
	d, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("opening extraction directory: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading extraction directory: %w", err)
	}
	if len(names) > 0 {
		return fmt.Errorf("extraction directory %s is not empty", root.Name())
	}
	return nil
}

// scanner holds one pass over an archive; writer is nil when inspecting.
type scanner struct {
	ctx        context.Context
	limits     Limits
	compressed *boundedReader
	expanded   *boundedReader
	blocks     *blockRecorder
	tree       tree
	writer     *dirWriter
	manifest   Manifest
	// entryEnd is the decompressed offset where the last entry, with its
	// padding, ends; the end-of-archive marker must follow it.
	entryEnd int64
}

func scan(ctx context.Context, r io.Reader, limits Limits, writer *dirWriter) (Manifest, error) {
	limits = limits.orDefaults()
	s := &scanner{
		ctx:        ctx,
		limits:     limits,
		compressed: &boundedReader{r: ctxReader{ctx: ctx, r: r}, limit: limits.MaxCompressedBytes},
		tree:       tree{nodes: make(map[string]nodeKind), max: limits.MaxEntries},
		writer:     writer,
	}
	gz, err := gzip.NewReader(s.compressed)
	if err != nil {
		return Manifest{}, s.streamError(err)
	}
	budget := addCapped(limits.MaxExpandedBytes, mulCapped(int64(limits.MaxEntries), entryOverheadBytes), trailerMaxBytes)
	s.expanded = &boundedReader{r: gz, limit: budget}
	s.blocks = &blockRecorder{r: s.expanded}
	tr := tar.NewReader(s.blocks)
	for {
		if err := ctx.Err(); err != nil {
			return Manifest{}, fmt.Errorf("reading configuration archive: %w", err)
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		// Only reported under GODEBUG=tarinsecurepath=0, and the header is
		// still returned; our own path rules are stricter.
		if errors.Is(err, tar.ErrInsecurePath) {
			err = nil
		}
		if err != nil {
			return Manifest{}, s.streamError(err)
		}
		if err := s.entry(tr, hdr); err != nil {
			return Manifest{}, err
		}
	}
	// archive/tar accepts a stream that simply stops between entries, which
	// is what a tar cut short before it was compressed looks like.
	if s.expanded.n-s.entryEnd < 2*blockSize {
		return Manifest{}, fmt.Errorf("%w: %w", &Error{Code: codeMalformed}, errNoEndMarker)
	}
	if err := s.drainTrailer(); err != nil {
		return Manifest{}, err
	}
	if s.manifest.Files == 0 {
		return Manifest{}, &Error{Code: codeEmpty}
	}
	return s.manifest, nil
}

func (s *scanner) entry(tr *tar.Reader, hdr *tar.Header) error {
	start := s.expanded.n
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		// git archive writes one to record the commit: it describes the
		// archive, not a file. Its records were read already; only padding
		// remains.
		s.entryEnd = roundUpToBlock(start)
		return nil
	case tar.TypeReg:
		if isSparse(hdr) {
			return &Error{Code: codeEntryType, Path: hdr.Name}
		}
		if err := s.file(tr, hdr); err != nil {
			return err
		}
		s.entryEnd = start + roundUpToBlock(hdr.Size)
		return nil
	case tar.TypeDir:
		if err := s.dir(hdr); err != nil {
			return err
		}
		s.entryEnd = start
		return nil
	case tar.TypeSymlink, tar.TypeLink:
		return &Error{Code: codeLink, Path: hdr.Name}
	default:
		return &Error{Code: codeEntryType, Path: hdr.Name}
	}
}

func (s *scanner) dir(hdr *tar.Header) error {
	name, code := cleanPath(hdr.Name, s.limits.MaxPathBytes)
	if code != "" {
		return &Error{Code: code, Path: hdr.Name}
	}
	newDirs, code := s.tree.add(name, explicitDir)
	if code != "" {
		return &Error{Code: code, Path: hdr.Name}
	}
	s.manifest.Entries++
	if s.writer != nil {
		return s.writeError(s.writer.makeDirs(newDirs), hdr.Name)
	}
	return nil
}

func (s *scanner) file(tr *tar.Reader, hdr *tar.Header) error {
	name, code := cleanPath(hdr.Name, s.limits.MaxPathBytes)
	if code == "" && (name == "." || strings.HasSuffix(hdr.Name, "/")) {
		code = codePathInvalid
	}
	if code != "" {
		return &Error{Code: code, Path: hdr.Name}
	}
	newDirs, code := s.tree.add(name, regularFile)
	if code != "" {
		return &Error{Code: code, Path: hdr.Name}
	}
	// Decided on the declared size, before any content is decompressed.
	if hdr.Size > s.limits.MaxExpandedBytes-s.manifest.ExpandedBytes {
		return &Error{Code: codeExpansion, Path: hdr.Name}
	}
	s.manifest.Entries++
	s.manifest.Files++
	s.manifest.ExpandedBytes += hdr.Size

	src := &sourceReader{r: tr}
	var content io.Reader = src
	var lock hash.Hash
	if name == lockFileName {
		lock = sha256.New()
		content = io.TeeReader(src, lock)
	}
	var err error
	switch {
	case s.writer != nil:
		mode := fs.FileMode(0o644)
		if hdr.Mode&0o111 != 0 {
			mode = 0o755
		}
		if err = s.writer.makeDirs(newDirs); err == nil {
			err = s.writer.writeFile(name, mode, content)
		}
	case lock != nil:
		_, err = io.Copy(io.Discard, content)
	}
	if src.err != nil {
		return s.streamError(src.err)
	}
	if err != nil {
		return s.writeError(err, hdr.Name)
	}
	if lock != nil {
		s.manifest.LockFileSHA256 = hex.EncodeToString(lock.Sum(nil))
	}
	return nil
}

// drainTrailer reads what follows the end-of-archive marker, so the gzip
// checksum is verified and nothing can hide behind the marker.
func (s *scanner) drainTrailer() error {
	buf := make([]byte, 32<<10)
	var total int64
	for {
		n, err := s.blocks.Read(buf)
		total += int64(n)
		if total > trailerMaxBytes || !allZero(buf[:n]) {
			return fmt.Errorf("%w: %w", &Error{Code: codeMalformed}, errTrailingData)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return s.streamError(err)
		}
	}
}

// streamError names a failure to read the stream. It carries no path: where
// archive/tar notices a fault (inside an entry, or skipping past it) says
// little about which entry is to blame. The flags are consulted
// before err because gzip and tar report our limit as whatever they were
// doing when it struck.
func (s *scanner) streamError(err error) error {
	switch {
	case s.ctx.Err() != nil:
		return fmt.Errorf("reading configuration archive: %w", s.ctx.Err())
	case s.compressed.over:
		return &Error{Code: codeTooLarge}
	case s.expanded != nil && s.expanded.over:
		return &Error{Code: codeExpansion}
	case errors.Is(err, tar.ErrHeader) && s.blocks != nil && s.blocks.lastHeaderChecksumInvalid():
		return fmt.Errorf("%w: %w", &Error{Code: codeChecksumInvalid}, err)
	default:
		return fmt.Errorf("%w: %w", &Error{Code: codeMalformed}, err)
	}
}

// writeError names a failure to write under the extraction directory.
func (s *scanner) writeError(err error, entry string) error {
	if err == nil {
		return nil
	}
	// The directory started empty and the tree admits each path once, so a
	// name that already exists is a clash the filesystem sees and the tree
	// cannot, such as "A.tf" and "a.tf" on a case-insensitive volume.
	if errors.Is(err, fs.ErrExist) {
		return &Error{Code: codeDuplicatePath, Path: entry}
	}
	return fmt.Errorf("extracting %q: %w", entry, err)
}

// cleanPath returns the slash-separated path an entry name stands for, or the
// code that refuses it. Names are refused rather than repaired: an archive
// that needs repairing was not made by a well-behaved tool.
func cleanPath(name string, maxBytes int) (string, string) {
	if name == "" {
		return "", codePathInvalid
	}
	for _, r := range name {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return "", codePathInvalid
		}
	}
	if name[0] == '/' || name[0] == '\\' || hasDriveLetter(name) {
		return "", codeAbsolutePath
	}
	// A backslash is a separator to some extractors and not to others, so
	// the same name could land in two places.
	if strings.ContainsRune(name, '\\') {
		return "", codePathInvalid
	}
	// Checked before cleaning, which would fold "a/../b" into "b" and hide
	// intent no honest archive has.
	for segment := range strings.SplitSeq(name, "/") {
		if segment == ".." {
			return "", codePathTraversal
		}
	}
	cleaned := path.Clean(name)
	if len(cleaned) > maxBytes {
		return "", codePathTooLong
	}
	return cleaned, ""
}

func hasDriveLetter(name string) bool {
	return len(name) >= 2 && name[1] == ':' &&
		('a' <= name[0] && name[0] <= 'z' || 'A' <= name[0] && name[0] <= 'Z')
}

// isSparse reports a PAX sparse file, which archive/tar presents as a regular
// file although its logical content is not what the archive stores.
func isSparse(hdr *tar.Header) bool {
	for key := range hdr.PAXRecords {
		if strings.HasPrefix(key, "GNU.sparse.") {
			return true
		}
	}
	return false
}

type nodeKind uint8

const (
	impliedDir nodeKind = iota + 1
	explicitDir
	regularFile
)

// tree remembers every path the archive creates, including directories only
// implied by a file's path, so clashes are caught whatever order entries come
// in and extraction knows which directories it still has to make.
type tree struct {
	nodes   map[string]nodeKind
	max     int
	newDirs []string // reused between calls
}

// add records name and returns the directories that must now be created,
// outermost first, or the code that refuses name. The slice is valid until the
// next call.
func (t *tree) add(name string, kind nodeKind) ([]string, string) {
	if existing, ok := t.nodes[name]; ok {
		if existing == impliedDir && kind == explicitDir {
			t.nodes[name] = explicitDir
			return nil, ""
		}
		return nil, codeDuplicatePath
	}
	t.newDirs = t.newDirs[:0]
	// Every recorded node has all its ancestors recorded, so the walk stops
	// at the first known one.
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if existing, ok := t.nodes[dir]; ok {
			if existing == regularFile {
				return nil, codeDuplicatePath
			}
			break
		}
		t.newDirs = append(t.newDirs, dir)
	}
	if len(t.nodes)+len(t.newDirs)+1 > t.max {
		return nil, codeTooManyEntries
	}
	for _, dir := range t.newDirs {
		t.nodes[dir] = impliedDir
	}
	t.nodes[name] = kind
	slices.Reverse(t.newDirs)
	if kind == explicitDir && name != "." {
		t.newDirs = append(t.newDirs, name)
	}
	return t.newDirs, ""
}

// dirWriter writes entries under the extraction root.
type dirWriter struct {
	root *os.Root
}

func (w *dirWriter) makeDirs(names []string) error {
	for _, name := range names {
		if err := w.root.Mkdir(name, 0o755); err != nil {
			return fmt.Errorf("creating directory: %w", err)
		}
		// Mkdir is subject to the umask; the mode is part of the contract.
		if err := w.root.Chmod(name, 0o755); err != nil {
			return fmt.Errorf("setting directory mode: %w", err)
		}
	}
	return nil
}

func (w *dirWriter) writeFile(name string, mode fs.FileMode, content io.Reader) error {
	f, err := w.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("creating file: %w", err)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("setting file mode: %w", err)
	}
	if _, err := io.Copy(f, content); err != nil {
		f.Close()
		return fmt.Errorf("writing file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing file: %w", err)
	}
	return nil
}

// sourceReader keeps the archive's read error apart from the disk's, which
// io.Copy reports alike.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

// ctxReader lets cancellation interrupt a long entry, not only the gaps
// between entries.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// boundedReader counts what passes through and reads at most one byte past
// limit, enough to know the stream is over without consuming the rest.
type boundedReader struct {
	r     io.Reader
	n     int64
	limit int64
	over  bool
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.over {
		return 0, errOverLimit
	}
	if room := b.limit - b.n; room < int64(len(p)) {
		p = p[:room+1]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.limit {
		b.over = true
		return n, errOverLimit
	}
	return n, err
}

// blockRecorder keeps the last complete 512-byte block of the tar stream.
// archive/tar answers ErrHeader both for a bad checksum and for fields it
// cannot parse; the block it just read tells the two apart.
type blockRecorder struct {
	r    io.Reader
	n    int64
	cur  [blockSize]byte
	last [blockSize]byte
}

func (b *blockRecorder) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.record(p[:n])
	return n, err
}

func (b *blockRecorder) record(data []byte) {
	end := b.n + int64(len(data))
	// Only the last complete block and the partial one after it matter, so
	// whole blocks before them are skipped rather than copied.
	if skipTo := end - end%blockSize - blockSize; skipTo > b.n {
		data = data[skipTo-b.n:]
		b.n = skipTo
	}
	for len(data) > 0 {
		copied := copy(b.cur[b.n%blockSize:], data)
		data = data[copied:]
		b.n += int64(copied)
		if b.n%blockSize == 0 {
			b.last = b.cur
		}
	}
}

// lastHeaderChecksumInvalid reports whether the stream stopped right after a
// complete block whose header checksum is wrong.
func (b *blockRecorder) lastHeaderChecksumInvalid() bool {
	if b.n == 0 || b.n%blockSize != 0 {
		return false
	}
	// The checksum is the octal sum of the header's bytes with its own field
	// counted as spaces; some historic writers summed signed bytes.
	const fieldStart, fieldEnd = 148, 156
	var unsigned, signed int64
	for i, c := range b.last {
		if i >= fieldStart && i < fieldEnd {
			c = ' '
		}
		unsigned += int64(c)
		signed += int64(int8(c))
	}
	field := strings.Trim(string(b.last[fieldStart:fieldEnd]), " \x00")
	want, err := strconv.ParseInt(field, 8, 64)
	return err != nil || (want != unsigned && want != signed)
}

func allZero(data []byte) bool {
	for _, c := range data {
		if c != 0 {
			return false
		}
	}
	return true
}

func roundUpToBlock(n int64) int64 {
	return (n + blockSize - 1) / blockSize * blockSize
}

// mulCapped multiplies non-negative values, saturating like addCapped.
func mulCapped(a, b int64) int64 {
	if b != 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// addCapped adds non-negative values, saturating so that a caller's huge
// limits cannot wrap into a negative budget.
func addCapped(values ...int64) int64 {
	var sum int64
	for _, v := range values {
		if v > math.MaxInt64-sum {
			return math.MaxInt64
		}
		sum += v
	}
	return sum
}
