package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The managed base (SPEC §1 rule 10) is the root file system every sandbox
// starts from: programs, libraries, CA certificates and a minimal user
// database, assembled once by `make tools` from pinned Debian packages and
// never from whatever the worker's host has in /usr at run time. A base
// directory holds:
//
//	BASE.json   its version, digest and the packages it was built from
//	rootfs/     the file system commands see read-only as /
//
// The digest covers every path, type, permission and byte under rootfs/, so
// a base that changed after it was built (a file edited, added or removed)
// no longer matches the digest it records, and the worker refuses it.
const (
	BaseManifestName = "BASE.json"
	BaseRootName     = "rootfs"
	// BaseSchema is the schema field of BASE.json.
	BaseSchema = "cairn.sandbox-base/v1"
)

// ErrBaseUnavailable means the configured managed base is missing,
// unreadable or does not match its digest: no sandbox is created.
var ErrBaseUnavailable = errors.New("sandbox base unavailable")

// BasePackage is one Debian package a base was built from.
type BasePackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// BaseManifest is BASE.json.
type BaseManifest struct {
	Schema   string        `json:"schema"`
	Version  string        `json:"version"`
	Digest   string        `json:"digest"`
	Packages []BasePackage `json:"packages"`
}

// Base is a verified managed base.
type Base struct {
	// Dir is the base directory (BASE.json and rootfs/), resolved.
	Dir     string
	Version string
	Digest  string
}

// Root is the directory shown to commands as /.
func (b Base) Root() string { return filepath.Join(b.Dir, BaseRootName) }

// OpenBase reads the base in dir and checks that its root file system
// still has the digest BASE.json records and, when want is not empty, that
// this is the digest the operator pinned. Every failure wraps
// ErrBaseUnavailable.
func OpenBase(dir, want string) (Base, error) {
	fail := func(format string, args ...any) (Base, error) {
		return Base{}, fmt.Errorf("%w: %s", ErrBaseUnavailable, fmt.Sprintf(format, args...))
	}
	if dir == "" {
		return fail("no base configured (CAIRN_SANDBOX_BASE)")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fail("resolving %s: %v", dir, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fail("%s: %v (make tools builds it)", abs, err)
	}
	raw, err := os.ReadFile(filepath.Join(resolved, BaseManifestName))
	if err != nil {
		return fail("reading %s: %v", BaseManifestName, err)
	}
	var m BaseManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return fail("decoding %s: %v", BaseManifestName, err)
	}
	if m.Schema != BaseSchema || m.Version == "" || !strings.HasPrefix(m.Digest, "sha256:") {
		return fail("%s is not a %s manifest with a version and a sha256 digest", BaseManifestName, BaseSchema)
	}
	if want != "" && want != m.Digest {
		return fail("base %s records digest %s, the configured digest is %s", m.Version, m.Digest, want)
	}
	if err := checkBaseOwnership(resolved); err != nil {
		return fail("%v", err)
	}
	got, err := DigestBaseRoot(filepath.Join(resolved, BaseRootName))
	if err != nil {
		return fail("digesting %s: %v", BaseRootName, err)
	}
	if got != m.Digest {
		return fail("base %s has digest %s, its manifest records %s: it changed after it was built", m.Version, got, m.Digest)
	}
	return Base{Dir: resolved, Version: m.Version, Digest: m.Digest}, nil
}

// checkBaseOwnership refuses a base directory that anyone but root or the
// worker's user could change: a root worker's sandboxes would run what
// they put there.
func checkBaseOwnership(dir string) error {
	for _, p := range []string{dir, filepath.Join(dir, BaseRootName)} {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", p)
		}
		if fi.Mode().Perm()&0o022 != 0 {
			return fmt.Errorf("%s is writable by others than its owner", p)
		}
		if uid := fileOwner(fi); uid != 0 && uid != os.Geteuid() {
			return fmt.Errorf("%s belongs to user %d, neither root nor the worker", p, uid)
		}
	}
	return nil
}

// DigestBaseRoot is the digest of a base's root file system: SHA-256 over
// one line per entry, in lexical order, naming its path, type, permission
// bits and content (a file's SHA-256, a link's target). Anything but
// directories, regular files and links makes it fail (a base holds no
// devices or sockets), and so does an entry writable by group or others or
// owned by anyone but root or the worker's user.
func DigestBaseRoot(root string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		perm := fi.Mode().Perm()
		// Verified once at start, the base must stay as verified: an entry
		// another user could rewrite afterwards is refused, as the base
		// directory itself is (checkBaseOwnership).
		if fi.Mode()&fs.ModeSymlink == 0 {
			if perm&0o022 != 0 {
				return fmt.Errorf("%s is writable by others than its owner", rel)
			}
			if uid := fileOwner(fi); uid != 0 && uid != os.Geteuid() {
				return fmt.Errorf("%s belongs to user %d, neither root nor the worker", rel, uid)
			}
		}
		switch {
		case d.IsDir():
			_, err = fmt.Fprintf(h, "d %04o %s\n", perm, rel)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, lerr := os.Readlink(p)
			if lerr != nil {
				return lerr
			}
			_, err = fmt.Fprintf(h, "l %s -> %s\n", rel, target)
		case fi.Mode().IsRegular():
			sum, ferr := FileSHA256(p)
			if ferr != nil {
				return ferr
			}
			_, err = fmt.Fprintf(h, "f %04o %s %s\n", perm, rel, sum)
		default:
			return fmt.Errorf("%s is neither a directory, a file nor a link", rel)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// fileOwner is the user ID owning fi, or -1 when unknown.
func fileOwner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// FileSHA256 returns the lowercase hex SHA-256 of the file at p, read as a
// stream: the managed base's digest, provider packages and toolchains use it.
func FileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// baseBinds are the bwrap arguments that show the base read-only as the
// sandbox's system paths: each top-level entry of its root (usr, etc and
// the merged-/usr links bin, lib, …) in its place, then the host's name
// resolution files over the base's empty ones, since the network is the
// host's (SPEC §1 rule 10: egress stays open).
func baseBinds(b Base) ([]string, error) {
	root := b.Root()
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBaseUnavailable, err)
	}
	var args []string
	for _, e := range entries {
		src, dst := filepath.Join(root, e.Name()), "/"+e.Name()
		if e.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrBaseUnavailable, err)
			}
			args = append(args, "--symlink", target, dst)
			continue
		}
		args = append(args, "--ro-bind", src, dst)
	}
	for _, p := range hostNetworkFiles {
		// The base carries an empty file for each, the mount point.
		if _, err := os.Stat(p); err == nil {
			if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
				args = append(args, "--ro-bind", p, p)
			}
		}
	}
	return args, nil
}

// hostNetworkFiles are the host's own files a sandbox sees over the base:
// how this host resolves names.
var hostNetworkFiles = []string{"/etc/resolv.conf", "/etc/hosts"}
