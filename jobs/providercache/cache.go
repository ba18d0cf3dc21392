package providercache

import (
	"archive/zip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/sys/unix"

	"github.com/cairnhq/cairn/jobs/sandbox"
)

// Limits of one package: a provider is one executable and a few text
// files.
const (
	maxPackageFiles = 64
	maxPackageBytes = 1 << 30
	maxIndexBytes   = 1 << 20
)

// Cache is a worker's provider cache under Root: packages/ is what
// sandboxes see, manifest.json and the lock stay the worker's.
type Cache struct {
	// Root is the cache's directory, the worker's own.
	Root string
	// Mirror is the operator's filesystem mirror the cache is filled from.
	Mirror string
	// Platform is <os>_<arch> of the packages sandboxes run (the worker's).
	Platform string
	Logger   *slog.Logger

	mu sync.Mutex
}

// New returns the cache under root filled from mirror for this worker's
// platform.
func New(root, mirror string, logger *slog.Logger) *Cache {
	return &Cache{Root: root, Mirror: mirror, Platform: runtime.GOOS + "_" + runtime.GOARCH, Logger: logger}
}

// Entry is one installed package, as the manifest records it.
type Entry struct {
	// Source is host/namespace/type.
	Source   string `json:"source"`
	Version  string `json:"version"`
	Platform string `json:"platform"`
	// H1 is the hash of the unpacked package (OpenTofu's h1: scheme), the
	// one lock files record.
	H1 string `json:"h1"`
	// ZH is the SHA-256 of the mirror's zip it came from (zh: scheme).
	ZH string `json:"zh"`
	// Stamps are what the kernel said of each file and directory of the
	// unpacked package when it was last hashed; VerifiedAt is when.
	Stamps     []FileStamp `json:"stamps,omitempty"`
	VerifiedAt time.Time   `json:"verified_at,omitzero"`
}

// FileStamp is one file or directory of an installed package as stat
// reports it. Writing, truncating, renaming, replacing or chmod-ing a file,
// or adding one to a directory, changes its change time (ctime), which no
// process but a privileged one can set back; so while every stamp matches,
// the package is the one that was hashed.
type FileStamp struct {
	Path  string `json:"path"`
	Mode  uint32 `json:"mode"`
	Size  int64  `json:"size"`
	Inode uint64 `json:"inode"`
	MTime int64  `json:"mtime_ns"`
	CTime int64  `json:"ctime_ns"`
}

// rehashAfter is how long a package whose stamps all match goes without
// being hashed again: the stamps catch any change made through the file
// system, a periodic hash what a disk did behind its back.
const rehashAfter = 24 * time.Hour

func (e Entry) key() string { return e.Source + " " + e.Version + " " + e.Platform }

// dir is where the entry is unpacked, relative to packages/: OpenTofu's
// unpacked mirror layout.
func (e Entry) dir() string {
	return filepath.Join(filepath.FromSlash(e.Source), e.Version, e.Platform)
}

// PackagesDir is what sandboxes see: the unpacked packages.
func (c *Cache) PackagesDir() string { return filepath.Join(c.Root, "packages") }

func (c *Cache) manifestPath() string { return filepath.Join(c.Root, "manifest.json") }

// Prepare makes the cache ready for one sandbox: it installs each mirror
// package the cache lacks, after verifying it, and checks every cached
// entry against the manifest: by the stamps of its files, and by its h1
// hash when a stamp differs or the last hash is older than rehashAfter. It
// returns the directory to show to the sandbox read-only. A tampered entry
// is removed and reported as ErrTampered: the attempt fails, the next one
// installs it again.
func (c *Cache) Prepare(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.MkdirAll(c.PackagesDir(), 0o755); err != nil {
		return "", fmt.Errorf("creating the provider cache: %w", err)
	}
	// Workers may share a data directory: one fills the cache at a time.
	unlock, err := lockDir(c.Root)
	if err != nil {
		return "", err
	}
	defer unlock()
	manifest, err := c.readManifest()
	if err != nil {
		return "", err
	}
	var tampered []string
	changed := false
	for key, e := range manifest {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		dir := filepath.Join(c.PackagesDir(), e.dir())
		stamps, stampErr := stampTree(dir)
		if stampErr == nil && slices.Equal(stamps, e.Stamps) && time.Since(e.VerifiedAt) < rehashAfter {
			continue
		}
		h1, err := dirhash.HashDir(dir, "", dirhash.Hash1)
		if err == nil && h1 == e.H1 {
			// Unchanged after all (a restore, a touched file): hashed now.
			// The stamps taken before hashing are the ones kept, so a
			// change made while it was hashed shows at the next check.
			if stampErr != nil {
				return "", stampErr
			}
			e.Stamps = stamps
			e.VerifiedAt = time.Now().UTC()
			manifest[key] = e
			changed = true
			continue
		}
		tampered = append(tampered, e.key())
		c.Logger.Error("cached provider package changed since it was installed; removing it", "source", e.Source,
			"version", e.Version, "platform", e.Platform, "want_h1", e.H1, "got_h1", h1, "error", err)
		if err := os.RemoveAll(dir); err != nil {
			return "", fmt.Errorf("removing a tampered provider package: %w", err)
		}
		delete(manifest, key)
	}
	if len(tampered) > 0 {
		if err := c.writeManifest(manifest); err != nil {
			return "", err
		}
		slices.Sort(tampered)
		return "", fmt.Errorf("%w: %s", ErrTampered, strings.Join(tampered, ", "))
	}
	found, err := c.mirrorPackages()
	if err != nil {
		return "", err
	}
	for _, p := range found {
		if _, ok := manifest[p.entry.key()]; ok {
			continue
		}
		e, err := c.install(ctx, p)
		if err != nil {
			// One bad package must not keep the others from sandboxes; a
			// configuration that needs it fails to install it.
			c.Logger.Error("provider package refused", "source", p.entry.Source, "version", p.entry.Version,
				"platform", p.entry.Platform, "error", err)
			continue
		}
		manifest[e.key()] = e
		changed = true
	}
	if changed {
		if err := c.writeManifest(manifest); err != nil {
			return "", err
		}
	}
	return c.PackagesDir(), nil
}

// mirrorPackage is one zip of the mirror for this platform with the hashes
// the mirror publishes for it.
type mirrorPackage struct {
	entry  Entry
	zip    string
	hashes []string
}

// packedName is a packed package's file name:
// terraform-provider-<type>_<version>_<os>_<arch>.zip.
var packedName = regexp.MustCompile(`^terraform-provider-([a-z0-9_-]+?)_([0-9][0-9A-Za-z.+-]*)_([a-z0-9]+_[a-z0-9]+)\.zip$`)

// mirrorPackages lists the mirror's packed packages for this platform:
// <host>/<namespace>/<type>/terraform-provider-<type>_<version>_<platform>.zip,
// each with the hashes of <host>/<namespace>/<type>/<version>.json.
func (c *Cache) mirrorPackages() ([]mirrorPackage, error) {
	var out []mirrorPackage
	hosts, err := os.ReadDir(c.Mirror)
	if err != nil {
		return nil, fmt.Errorf("reading the provider mirror: %w", err)
	}
	for _, h := range hosts {
		namespaces, _ := os.ReadDir(filepath.Join(c.Mirror, h.Name()))
		for _, ns := range namespaces {
			types, _ := os.ReadDir(filepath.Join(c.Mirror, h.Name(), ns.Name()))
			for _, typ := range types {
				dir := filepath.Join(c.Mirror, h.Name(), ns.Name(), typ.Name())
				files, _ := os.ReadDir(dir)
				for _, f := range files {
					m := packedName.FindStringSubmatch(f.Name())
					if m == nil || m[1] != typ.Name() || m[3] != c.Platform || !f.Type().IsRegular() {
						continue
					}
					hashes, err := publishedHashes(filepath.Join(dir, m[2]+".json"), f.Name(), c.Platform)
					if err != nil {
						c.Logger.Error("provider package without published checksums is not used", "package", f.Name(), "error", err)
						continue
					}
					out = append(out, mirrorPackage{zip: filepath.Join(dir, f.Name()), hashes: hashes, entry: Entry{
						Source: h.Name() + "/" + ns.Name() + "/" + typ.Name(), Version: m[2], Platform: m[3]}})
				}
			}
		}
	}
	return out, nil
}

// versionIndex is a mirror's <version>.json (the provider network mirror
// protocol's version document).
type versionIndex struct {
	Archives map[string]struct {
		URL    string   `json:"url"`
		Hashes []string `json:"hashes"`
	} `json:"archives"`
}

// publishedHashes are the hashes a mirror's version document gives for the
// platform's archive, which must be the zip named zipName.
func publishedHashes(path, zipName, platform string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var idx versionIndex
	if err := json.NewDecoder(io.LimitReader(f, maxIndexBytes)).Decode(&idx); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", filepath.Base(path), err)
	}
	a, ok := idx.Archives[platform]
	if !ok || a.URL != zipName || len(a.Hashes) == 0 {
		return nil, fmt.Errorf("%s publishes no hashes for %s", filepath.Base(path), zipName)
	}
	return a.Hashes, nil
}

// install verifies a mirror package against its published hashes, unpacks
// it beside the cache and moves it into place.
func (c *Cache) install(ctx context.Context, p mirrorPackage) (Entry, error) {
	e := p.entry
	zh, err := sandbox.FileSHA256(p.zip)
	if err != nil {
		return Entry{}, err
	}
	h1, err := dirhash.HashZip(p.zip, dirhash.Hash1)
	if err != nil {
		return Entry{}, fmt.Errorf("hashing %s: %w", filepath.Base(p.zip), err)
	}
	e.ZH, e.H1 = "zh:"+zh, h1
	// Every published hash of a scheme we can compute must match, and at
	// least one must: a mirror cannot vouch with hashes nobody checks.
	matched := 0
	for _, want := range p.hashes {
		switch {
		case strings.HasPrefix(want, "zh:") && want != e.ZH, strings.HasPrefix(want, "h1:") && want != e.H1:
			return Entry{}, fmt.Errorf("%w: %s has %s and %s, the mirror publishes %s", ErrUnverified, filepath.Base(p.zip), e.H1, e.ZH, want)
		case strings.HasPrefix(want, "zh:"), strings.HasPrefix(want, "h1:"):
			matched++
		}
	}
	if matched == 0 {
		return Entry{}, fmt.Errorf("%w: %s has no h1: or zh: hash in its mirror", ErrUnverified, filepath.Base(p.zip))
	}
	tmp, err := os.MkdirTemp(c.Root, "unpack-")
	if err != nil {
		return Entry{}, err
	}
	defer os.RemoveAll(tmp)
	if err := unzip(ctx, p.zip, tmp); err != nil {
		return Entry{}, fmt.Errorf("unpacking %s: %w", filepath.Base(p.zip), err)
	}
	// What was unpacked is what was verified.
	if got, err := dirhash.HashDir(tmp, "", dirhash.Hash1); err != nil || got != e.H1 {
		return Entry{}, fmt.Errorf("%w: %s unpacked to %s (%v)", ErrUnverified, filepath.Base(p.zip), got, err)
	}
	dest := filepath.Join(c.PackagesDir(), e.dir())
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return Entry{}, err
	}
	if err := os.RemoveAll(dest); err != nil {
		return Entry{}, err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return Entry{}, err
	}
	// MkdirTemp made it 0700; sandboxes run as other users.
	if err := os.Chmod(dest, 0o755); err != nil {
		return Entry{}, err
	}
	if e.Stamps, err = stampTree(dest); err != nil {
		return Entry{}, err
	}
	e.VerifiedAt = time.Now().UTC()
	c.Logger.Info("provider package installed into the cache", "source", e.Source, "version", e.Version, "platform", e.Platform, "h1", e.H1)
	return e, nil
}

// unzip unpacks a provider zip: regular files only, at clean relative
// paths, bounded in number and size; executables keep their bit and
// nothing is writable by others.
func unzip(ctx context.Context, path, dest string) error {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return err
	}
	defer zr.Close()
	if len(zr.File) > maxPackageFiles {
		return fmt.Errorf("%d files, more than %d", len(zr.File), maxPackageFiles)
	}
	var total int64
	for _, f := range zr.File {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := f.Name
		if strings.HasSuffix(name, "/") && f.Mode().IsDir() {
			continue
		}
		if !fs.ValidPath(name) || !f.Mode().IsRegular() {
			return fmt.Errorf("entry %q is not a regular file at a clean relative path", name)
		}
		mode := os.FileMode(0o644)
		if f.Mode()&0o111 != 0 {
			mode = 0o755
		}
		target := filepath.Join(dest, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		n, err := copyEntry(f, target, mode, maxPackageBytes-total)
		if err != nil {
			return err
		}
		total += n
	}
	return nil
}

func copyEntry(f *zip.File, target string, mode os.FileMode, room int64) (int64, error) {
	rc, err := f.Open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(rc, room+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > room {
		err = fmt.Errorf("package larger than %d bytes", int64(maxPackageBytes))
	}
	return n, err
}

func (c *Cache) readManifest() (map[string]Entry, error) {
	out := map[string]Entry{}
	body, err := os.ReadFile(c.manifestPath())
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the provider cache manifest: %w", err)
	}
	var entries []Entry
	if err := json.Unmarshal(body, &entries); err != nil {
		return nil, fmt.Errorf("decoding the provider cache manifest: %w", err)
	}
	for _, e := range entries {
		out[e.key()] = e
	}
	return out, nil
}

func (c *Cache) writeManifest(m map[string]Entry) error {
	entries := make([]Entry, 0, len(m))
	for _, e := range m {
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.key(), b.key()) })
	body, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return err
	}
	tmp := c.manifestPath() + ".tmp"
	if err := os.WriteFile(tmp, body, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, c.manifestPath())
}

// lockDir takes an exclusive lock on dir/.lock until the returned func.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the provider cache: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the provider cache: %w", err)
	}
	return func() { f.Close() }, nil
}

// stampTree stats every file and directory under dir, the root included,
// without following links, in lexical order.
func stampTree(dir string) ([]FileStamp, error) {
	var out []FileStamp
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		out = append(out, FileStamp{Path: filepath.ToSlash(rel), Mode: st.Mode, Size: st.Size, Inode: st.Ino,
			MTime: st.Mtim.Nano(), CTime: st.Ctim.Nano()})
		return nil
	})
	return out, err
}
