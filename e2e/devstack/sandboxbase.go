package devstack

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cairnhq/cairn/jobs/sandbox"
)

// SandboxBaseRecipe names this recipe for the managed base: bump it when the
// package list or the generated files change, so `make tools` rebuilds.
const SandboxBaseRecipe = "cairn-base-3"

// sandboxBasePackages are what sandboxed commands need besides their own
// checksum-verified tools (tofu and providers are static; the policy
// evaluator is cairn-worker, linked against libc): a POSIX shell, the core
// utilities scripts and provisioners expect (Debian's essential text
// tools among them), and the CA certificates. The libraries they link
// against are added from their dependencies.
var sandboxBasePackages = []string{"dash", "coreutils", "mawk", "sed", "grep", "findutils", "libc6", "ca-certificates"}

// sandboxBaseAlternatives are programs Debian names through its
// alternatives system (links the package list does not hold).
var sandboxBaseAlternatives = []string{"awk"}

// sandboxBaseSkipped are package paths a sandbox never reads.
var sandboxBaseSkipped = []string{"/usr/share/doc", "/usr/share/man", "/usr/share/info", "/usr/share/lintian",
	"/usr/share/locale", "/usr/share/bug", "/usr/share/debianutils", "/usr/share/menu"}

// SandboxBaseDir is where `make tools` puts the managed base, and where a
// worker started from the repository looks for it (CAIRN_SANDBOX_BASE).
func SandboxBaseDir(root string) string { return filepath.Join(root, ".tools", "sandbox-base") }

// EnsureSandboxBase assembles the managed base sandboxes start from (SPEC
// §1 rule 10) under root, unless a base of this recipe is there and still
// matches its digest. It takes the files of pinned Debian packages
// (sandboxBasePackages and the libraries they depend on) as this host's
// package database lists them, so what a sandbox sees is a named set of
// packages at recorded versions, not whatever else the host has installed;
// the package versions and the digest of the result go into BASE.json, and
// every run's evidence records that version and digest.
func EnsureSandboxBase(ctx context.Context, root string, log io.Writer) (string, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	dir := SandboxBaseDir(absRoot)
	version, err := sandboxBaseVersion()
	if err != nil {
		return "", err
	}
	if b, err := sandbox.OpenBase(dir, ""); err == nil && b.Version == version {
		return dir, nil
	}
	fmt.Fprintf(log, "==> assembling the sandbox base %s into %s\n", version, dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".sandbox-base-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	manifest, err := assembleSandboxBase(ctx, tmp, version)
	if err != nil {
		return "", fmt.Errorf("assembling the sandbox base: %w", err)
	}
	raw, err := json.MarshalIndent(manifest, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, sandbox.BaseManifestName), append(raw, '\n'), 0o644); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	// Swapped in whole, so a worker never sees half a base.
	old := dir + ".old"
	_ = os.RemoveAll(old)
	if err := os.Rename(dir, old); err != nil && !os.IsNotExist(err) {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	_ = os.RemoveAll(old)
	if _, err := sandbox.OpenBase(dir, manifest.Digest); err != nil {
		return "", err
	}
	return dir, nil
}

// sandboxBaseVersion is the recipe and the distribution it was built from,
// e.g. cairn-base-2+debian12.
func sandboxBaseVersion() (string, error) {
	raw, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "", fmt.Errorf("the sandbox base is built from Debian packages: %w", err)
	}
	fields := map[string]string{}
	for line := range strings.Lines(string(raw)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok {
			fields[k] = strings.Trim(v, `"`)
		}
	}
	return SandboxBaseRecipe + "+" + fields["ID"] + fields["VERSION_ID"], nil
}

// assembleSandboxBase copies the packages' files into dir/rootfs and
// returns the manifest.
func assembleSandboxBase(ctx context.Context, dir, version string) (sandbox.BaseManifest, error) {
	rootfs := filepath.Join(dir, sandbox.BaseRootName)
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return sandbox.BaseManifest{}, err
	}
	pkgs, err := packageClosure(ctx, sandboxBasePackages)
	if err != nil {
		return sandbox.BaseManifest{}, err
	}
	// Merged-/usr hosts link /bin, /lib, … to usr/: the base keeps the
	// same links, and package paths land where they resolve.
	for _, name := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		if target, err := os.Readlink("/" + name); err == nil {
			if err := os.Symlink(target, filepath.Join(rootfs, name)); err != nil {
				return sandbox.BaseManifest{}, err
			}
		}
	}
	for _, p := range pkgs {
		out, err := exec.CommandContext(ctx, "dpkg-query", "-L", p.Name).Output()
		if err != nil {
			return sandbox.BaseManifest{}, fmt.Errorf("listing %s: %w", p.Name, err)
		}
		for _, path := range strings.Fields(string(out)) {
			if path == "/." || slices.ContainsFunc(sandboxBaseSkipped, func(s string) bool {
				return path == s || strings.HasPrefix(path, s+"/")
			}) {
				continue
			}
			if err := copyIntoBase(rootfs, path); err != nil {
				return sandbox.BaseManifest{}, err
			}
		}
	}
	for _, name := range sandboxBaseAlternatives {
		for _, p := range []string{"/usr/bin/" + name, "/etc/alternatives/" + name} {
			if err := copyIntoBase(rootfs, p); err != nil {
				return sandbox.BaseManifest{}, err
			}
		}
	}
	// The certificate bundle and its links are made by update-ca-certificates
	// at install time, not shipped in the package.
	if err := copyTreeIntoBase(rootfs, "/etc/ssl/certs"); err != nil {
		return sandbox.BaseManifest{}, err
	}
	// A user database of its own (no host accounts), name service from
	// files and DNS, and empty mount points for the host's resolver files.
	generated := map[string]string{
		"etc/passwd":        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n",
		"etc/group":         "root:x:0:\nnogroup:x:65534:\n",
		"etc/nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
		"etc/resolv.conf":   "",
		"etc/hosts":         "",
	}
	for rel, content := range generated {
		p := filepath.Join(rootfs, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return sandbox.BaseManifest{}, err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return sandbox.BaseManifest{}, err
		}
	}
	digest, err := sandbox.DigestBaseRoot(rootfs)
	if err != nil {
		return sandbox.BaseManifest{}, err
	}
	return sandbox.BaseManifest{Schema: sandbox.BaseSchema, Version: version, Digest: digest, Packages: pkgs}, nil
}

// packageClosure is roots plus the libraries they depend on, recursively,
// each at its installed version. Only library dependencies are followed:
// dash's dependency on dpkg, say, is for its install scripts, which never
// run in a sandbox.
func packageClosure(ctx context.Context, roots []string) ([]sandbox.BasePackage, error) {
	seen := map[string]bool{}
	var out []sandbox.BasePackage
	queue := slices.Clone(roots)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		raw, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f", "${Version}\n${Pre-Depends}, ${Depends}\n", name).Output()
		if err != nil {
			return nil, fmt.Errorf("package %s is not installed (the sandbox base is built from it): %w", name, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Scan()
		out = append(out, sandbox.BasePackage{Name: name, Version: sc.Text()})
		sc.Scan()
		for dep := range strings.SplitSeq(sc.Text(), ",") {
			// "libc6 (>= 2.34)" or "a | b": the first alternative.
			first, _, _ := strings.Cut(dep, "|")
			fields := strings.Fields(first)
			if len(fields) == 0 {
				continue
			}
			dname, _, _ := strings.Cut(fields[0], ":")
			if strings.HasPrefix(dname, "lib") && !seen[dname] {
				queue = append(queue, dname)
			}
		}
	}
	slices.SortFunc(out, func(a, b sandbox.BasePackage) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// copyIntoBase copies one host path (a directory, a file or a link) to
// where it resolves under rootfs, without following a final link.
// Permission bits are kept, set-user-ID and set-group-ID bits are not.
func copyIntoBase(rootfs, path string) error {
	fi, err := os.Lstat(path)
	if os.IsNotExist(err) {
		// A diverted or removed file: the package lists it, the host does
		// not have it.
		return nil
	}
	if err != nil {
		return err
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return err
	}
	dst := filepath.Join(rootfs, parent, filepath.Base(path))
	if parent == "/" {
		dst = filepath.Join(rootfs, filepath.Base(path))
	}
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		return os.Mkdir(dst, 0o755)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case fi.Mode().IsRegular():
		return copyFileMode(path, dst, fi.Mode().Perm())
	}
	return nil
}

// copyTreeIntoBase copies a host directory tree into the base.
func copyTreeIntoBase(rootfs, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return copyIntoBase(rootfs, p)
	})
}

func copyFileMode(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	// The umask may have cleared bits the package sets.
	return os.Chmod(dst, perm)
}
