package sandbox

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// VerifiedTool is a tool binary whose SHA-256 matched its mirror's SHA256SUMS.
type VerifiedTool struct {
	Name    string
	Version string
	// Path is the host path of the verified copy in the tool cache. It is
	// read-only and never rewritten: sandboxes link or bind it, never copy it.
	Path   string
	SHA256 string
}

// ToolCache verifies tools from a mirror into a cache directory.
//
// The mirror layout is <mirror>/<name>/<version>/<name> (the binary) beside
// <mirror>/<name>/<version>/SHA256SUMS with lines "<hex>  <file>", as `make
// tools` writes it. The checksum file travels with the mirror, so this guards
// against corrupt, partial or swapped copies, not against whoever controls the
// mirror.
//
// Results are memoized for the life of the ToolCache: the first sandbox that
// needs a tool pays for one copy and hash, later ones nothing. A ToolCache is
// safe for concurrent use; concurrent calls for the same tool share one
// verification.
type ToolCache struct {
	mirror   string
	cacheDir string

	mu       sync.Mutex
	verified map[toolKey]*toolVerification
}

type toolKey struct{ name, version string }

// toolVerification is one in-flight or finished verification; done closes
// when tool and err are set.
type toolVerification struct {
	done chan struct{}
	tool VerifiedTool
	err  error
}

// NewToolCache returns a cache that verifies tools from mirror into cacheDir.
func NewToolCache(mirror, cacheDir string) *ToolCache {
	return &ToolCache{mirror: mirror, cacheDir: cacheDir, verified: map[toolKey]*toolVerification{}}
}

// Verified returns the verified copy of a tool version. Failures are not
// memoized, so a repaired mirror is picked up by the next call.
func (c *ToolCache) Verified(ctx context.Context, name, version string) (VerifiedTool, error) {
	if !validName(name, 64) {
		return VerifiedTool{}, fmt.Errorf("%w: tool name %q", ErrInvalidSpec, name)
	}
	if !validVersion(version) {
		return VerifiedTool{}, fmt.Errorf("%w: tool version %q", ErrInvalidSpec, version)
	}
	key := toolKey{name, version}
	for {
		c.mu.Lock()
		v, ok := c.verified[key]
		if !ok {
			v = &toolVerification{done: make(chan struct{})}
			c.verified[key] = v
			c.mu.Unlock()
			v.tool, v.err = c.verify(ctx, name, version)
			if v.err != nil {
				c.mu.Lock()
				delete(c.verified, key)
				c.mu.Unlock()
			}
			close(v.done)
			return v.tool, v.err
		}
		c.mu.Unlock()
		select {
		case <-v.done:
		case <-ctx.Done():
			return VerifiedTool{}, fmt.Errorf("verifying %s %s: %w", name, version, ctx.Err())
		}
		// Another caller's context ending is no reason to fail this one.
		if v.err != nil && ctx.Err() == nil &&
			(errors.Is(v.err, context.Canceled) || errors.Is(v.err, context.DeadlineExceeded)) {
			continue
		}
		return v.tool, v.err
	}
}

// validVersion accepts semver-like versions such as "1.10.0+build.1", which
// validName rejects only for the '+'.
func validVersion(s string) bool {
	return validName(strings.ReplaceAll(s, "+", "_"), 64)
}

func (c *ToolCache) verify(ctx context.Context, name, version string) (VerifiedTool, error) {
	srcDir := filepath.Join(c.mirror, name, version)
	want, err := expectedSum(filepath.Join(srcDir, "SHA256SUMS"), name)
	if err != nil {
		return VerifiedTool{}, fmt.Errorf("verifying %s %s: %w", name, version, err)
	}
	tool := VerifiedTool{Name: name, Version: version, SHA256: want}
	dstDir := filepath.Join(c.cacheDir, name, version)
	tool.Path = filepath.Join(dstDir, want)

	// A copy verified by an earlier process is hashed again before use:
	// memoization is per process, and the cache directory outlives it.
	if got, err := hashFile(ctx, tool.Path); err == nil && got == want {
		return tool, nil
	} else if err == nil {
		if err := os.Remove(tool.Path); err != nil {
			return VerifiedTool{}, fmt.Errorf("removing tampered cached %s %s: %w", name, version, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return VerifiedTool{}, fmt.Errorf("checking cached %s %s: %w", name, version, err)
	}

	if err := os.MkdirAll(dstDir, 0o700); err != nil {
		return VerifiedTool{}, fmt.Errorf("creating tool cache directory: %w", err)
	}
	got, tmp, err := copyHashing(ctx, filepath.Join(srcDir, name), dstDir)
	if err != nil {
		return VerifiedTool{}, fmt.Errorf("copying %s %s from mirror: %w", name, version, err)
	}
	if got != want {
		_ = os.Remove(tmp)
		return VerifiedTool{}, fmt.Errorf("verifying %s %s: %w: SHA256SUMS has %s, mirror binary hashes to %s",
			name, version, ErrChecksumMismatch, want, got)
	}
	if err := os.Chmod(tmp, 0o555); err != nil {
		_ = os.Remove(tmp)
		return VerifiedTool{}, fmt.Errorf("sealing %s %s: %w", name, version, err)
	}
	// Only the rename makes the copy reachable under its final name, so a
	// crash or a mismatch never leaves a usable unverified file.
	if err := os.Rename(tmp, tool.Path); err != nil {
		_ = os.Remove(tmp)
		return VerifiedTool{}, fmt.Errorf("publishing %s %s: %w", name, version, err)
	}
	return tool, nil
}

// expectedSum reads the SHA256SUMS entry for file.
func expectedSum(sumsPath, file string) (string, error) {
	f, err := os.Open(sumsPath)
	if err != nil {
		return "", fmt.Errorf("opening SHA256SUMS: %w", err)
	}
	defer f.Close()
	var found string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		// "<hex>  <file>" in text mode, "<hex> *<file>" in binary mode.
		name = strings.TrimPrefix(strings.TrimLeft(name, " "), "*")
		if name != file {
			continue
		}
		sum = strings.ToLower(sum)
		if b, err := hex.DecodeString(sum); err != nil || len(b) != sha256.Size {
			return "", fmt.Errorf("%w: SHA256SUMS entry for %s is not a SHA-256 digest", ErrChecksumMismatch, file)
		}
		if found != "" && found != sum {
			return "", fmt.Errorf("%w: SHA256SUMS has conflicting entries for %s", ErrChecksumMismatch, file)
		}
		found = sum
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading SHA256SUMS: %w", err)
	}
	if found == "" {
		return "", fmt.Errorf("%w: SHA256SUMS has no entry for %s", ErrChecksumMismatch, file)
	}
	return found, nil
}

// copyHashing copies src into a new temporary file in dir, hashing it in the
// same pass, and returns the hex digest and the temporary file's path.
func copyHashing(ctx context.Context, src, dir string) (sum, tmpPath string, err error) {
	in, err := os.Open(src)
	if err != nil {
		return "", "", err
	}
	defer in.Close()
	// No process may be forked while the copy's write descriptor is open: a
	// child inherits it until its own exec closes it, and executing the
	// copy in that window fails with ETXTBSY ("text file busy"). Holding
	// the fork lock for the copy (once per tool version per cache) costs
	// other commands a short wait instead.
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	out, err := os.CreateTemp(dir, ".partial-*")
	if err != nil {
		return "", "", err
	}
	defer func() {
		if err != nil {
			_ = out.Close()
			_ = os.Remove(out.Name())
		}
	}()
	h := sha256.New()
	if _, err = io.Copy(io.MultiWriter(out, h), ctxReader{ctx, in}); err != nil {
		return "", "", err
	}
	if err = out.Sync(); err != nil {
		return "", "", err
	}
	if err = out.Close(); err != nil {
		return "", "", err
	}
	return hexSum(h), out.Name(), nil
}

func hashFile(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return "", err
	}
	return hexSum(h), nil
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// ctxReader stops a long copy (tofu is about 90 MB) when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
