package runner

import (
	"bytes"
	"crypto/sha256"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// systemCertFiles and systemCertDirs are where Go programs on Linux look
// for root certificates when SSL_CERT_FILE and SSL_CERT_DIR are unset (Go's
// crypto/x509): the first bundle that exists, then every file of every
// directory.
var (
	systemCertFiles = []string{
		"/etc/ssl/certs/ca-certificates.crt",
		"/etc/pki/tls/certs/ca-bundle.crt",
		"/etc/ssl/ca-bundle.pem",
		"/etc/pki/tls/cacert.pem",
		"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
		"/etc/ssl/cert.pem",
	}
	systemCertDirs = []string{"/etc/ssl/certs", "/etc/pki/tls/certs"}
)

// maxTrustBytes bounds what TrustBundle reads from one file.
const maxTrustBytes = 16 << 20

// CertDirs are the certificate directories a Go program reads: those of
// SSL_CERT_DIR, else the system's.
func CertDirs() []string {
	if d := os.Getenv("SSL_CERT_DIR"); d != "" {
		return strings.Split(d, ":")
	}
	return systemCertDirs
}

// TrustBundle writes to path one PEM bundle of every root certificate a Go
// program on this host trusts with caFile as its SSL_CERT_FILE (the
// system's bundle when caFile is empty) and certDirs as its certificate
// directories (CertDirs), each certificate once.
//
// Sandboxed commands get the bundle as SSL_CERT_FILE and no certificate
// directory: the same roots, but one file to parse instead of a file per
// certificate, which cost every tofu command that speaks TLS 4–6 ms.
// It returns false when it found no certificate, and writes nothing.
func TrustBundle(path, caFile string, certDirs []string) (bool, error) {
	files := []string{caFile}
	if caFile == "" {
		files = systemCertFiles
	}
	var pems [][]byte
	for _, f := range files {
		body, err := readBounded(f)
		if errors.Is(err, fs.ErrNotExist) && caFile == "" {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("reading the runner's CA file: %w", err)
		}
		pems = append(pems, body)
		break
	}
	for _, dir := range certDirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if body, err := readBounded(filepath.Join(dir, e.Name())); err == nil {
				pems = append(pems, body)
			}
		}
	}
	var out bytes.Buffer
	seen := map[[sha256.Size]byte]bool{}
	for _, body := range pems {
		for {
			var block *pem.Block
			block, body = pem.Decode(body)
			if block == nil {
				break
			}
			sum := sha256.Sum256(block.Bytes)
			if block.Type != "CERTIFICATE" || len(block.Headers) != 0 || seen[sum] {
				continue
			}
			seen[sum] = true
			if err := pem.Encode(&out, block); err != nil {
				return false, err
			}
		}
	}
	if len(seen) == 0 {
		return false, nil
	}
	if current, err := os.ReadFile(path); err == nil && bytes.Equal(current, out.Bytes()) {
		return true, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".trust-*.pem")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out.Bytes()); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	// Sandboxes run as other users and must read it.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return false, err
	}
	return true, os.Rename(tmp.Name(), path)
}

// readBounded reads a regular file (following links, as the system's
// certificate directories are mostly links) of at most maxTrustBytes.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	body, err := io.ReadAll(io.LimitReader(f, maxTrustBytes+1))
	if err == nil && len(body) > maxTrustBytes {
		err = fmt.Errorf("%s is larger than %d bytes", path, maxTrustBytes)
	}
	return body, err
}

// noCertDir is what sandboxed commands get as SSL_CERT_DIR: a path that
// never exists, so they read only the bundle.
const noCertDir = "/nonexistent/cairn-cert-dir"
