package devstack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLSFiles are the paths of a local certificate authority and a server
// certificate it signed.
type TLSFiles struct {
	CA     string // CA certificate (PEM)
	Cert   string // server certificate (PEM)
	Key    string // server key (PEM)
	Bundle string // the system roots plus the CA, for SSL_CERT_FILE
}

// systemRoots are where Debian-family and other distributions keep their
// CA bundle; the first that exists is copied into the bundle.
var systemRoots = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/cert.pem",
}

// EnsureTLS creates, once, a local CA and a server certificate for
// localhost and 127.0.0.1 under dir, and returns their paths. The OpenTofu
// CLI insists on HTTPS for service discovery, so a local installation needs
// a certificate its CLI can be told to trust (SSL_CERT_FILE=Bundle).
func EnsureTLS(dir string) (TLSFiles, error) {
	f := TLSFiles{
		CA:     filepath.Join(dir, "ca.pem"),
		Cert:   filepath.Join(dir, "server.pem"),
		Key:    filepath.Join(dir, "server-key.pem"),
		Bundle: filepath.Join(dir, "bundle.pem"),
	}
	if _, err := os.Stat(f.Bundle); err == nil {
		return f, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "Cairn local CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano() + 1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(2, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return f, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for path, data := range map[string][]byte{
		f.CA:   caPEM,
		f.Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		f.Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return f, err
		}
	}
	var bundle []byte
	for _, roots := range systemRoots {
		if b, err := os.ReadFile(roots); err == nil {
			bundle = append(b, '\n')
			break
		}
	}
	if err := os.WriteFile(f.Bundle, append(bundle, caPEM...), 0o644); err != nil {
		return f, fmt.Errorf("writing CA bundle: %w", err)
	}
	return f, nil
}
