package runner

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func selfSigned(t *testing.T, name string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now(),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestTrustBundleFoldsTheCAFileAndCertificateDirectories(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	private, public, other := selfSigned(t, "private CA"), selfSigned(t, "public root"), selfSigned(t, "other root")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, append(append([]byte{}, private...), public...), 0o644); err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(dir, "certs")
	os.MkdirAll(certs, 0o755)
	for name, body := range map[string][]byte{"public.pem": public, "other.pem": other, "README": []byte("not a certificate"),
		"key.pem": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("x")})} {
		if err := os.WriteFile(filepath.Join(certs, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "data", "trust.pem")
	ok, err := TrustBundle(out, caFile, []string{certs, filepath.Join(dir, "missing")})
	if err != nil || !ok {
		t.Fatalf("TrustBundle: %v, %v", ok, err)
	}
	body, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for rest := body; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("the bundle holds something that is not a certificate: %v", err)
		}
		subjects = append(subjects, c.Subject.CommonName)
	}
	if len(subjects) != 3 {
		t.Fatalf("bundle subjects %v, want the private CA, the public and the other root once each", subjects)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o644 {
		t.Fatalf("bundle mode %v: sandbox users could not read it", fi.Mode().Perm())
	}
	if _, err := TrustBundle(out, filepath.Join(dir, "absent.pem"), nil); err == nil {
		t.Fatal("a missing CA file was not an error")
	}
	if ok, err := TrustBundle(filepath.Join(dir, "empty.pem"), filepath.Join(certs, "README"), nil); err != nil || ok {
		t.Fatalf("a CA file without certificates: %v, %v (want nothing written)", ok, err)
	}
}
