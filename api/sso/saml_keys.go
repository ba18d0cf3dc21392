package sso

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/seal"
)

// spKeyBits is the size of a service provider's RSA key: RSA, because XML
// encryption of assertions to the SP needs it and every IdP accepts it.
const spKeyBits = 2048

// spCertificateLifetime is how long the SP's self-signed certificate says
// it is valid. SAML metadata treats a certificate as a container for the
// key (the metadata interoperability profile ignores its dates), so it
// outlives any provider rather than forcing a rotation nobody asked for.
const spCertificateLifetime = 20 * 365 * 24 * time.Hour

// spKeyPair is the key a SAML provider's service provider signs its
// AuthnRequests with and decrypts assertions with.
type spKeyPair struct {
	key         *rsa.PrivateKey
	certificate *x509.Certificate
}

func spKeyAssociation(providerID string) []byte {
	return []byte("cairn/saml-sp-key/" + providerID)
}

// loadSPKeyPair returns the provider's key pair, creating it on first use.
// Concurrent first uses (two replicas serving the metadata at once) each
// generate one, the first insert wins and both read the winner.
func loadSPKeyPair(ctx context.Context, conn *sqlx.DB, sealer *seal.Sealer, providerID string) (spKeyPair, error) {
	if sealer == nil {
		return spKeyPair{}, fmt.Errorf("loading SAML service provider key: %w", seal.ErrNoKey)
	}
	pair, err := readSPKeyPair(ctx, conn, sealer, providerID)
	if !errors.Is(err, sql.ErrNoRows) {
		return pair, err
	}
	fresh, err := newSPKeyPair(providerID, time.Now())
	if err != nil {
		return spKeyPair{}, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(fresh.key)
	if err != nil {
		return spKeyPair{}, fmt.Errorf("encoding SAML service provider key: %w", err)
	}
	sealed, err := sealer.Seal(der, spKeyAssociation(providerID))
	if err != nil {
		return spKeyPair{}, err
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO saml_sp_keys (provider_id, certificate_der, private_key_sealed)
		VALUES ($1, $2, $3) ON CONFLICT (provider_id) DO NOTHING`, providerID, fresh.certificate.Raw, sealed); err != nil {
		return spKeyPair{}, fmt.Errorf("storing SAML service provider key: %w", err)
	}
	return readSPKeyPair(ctx, conn, sealer, providerID)
}

func readSPKeyPair(ctx context.Context, q sqlx.QueryerContext, sealer *seal.Sealer, providerID string) (spKeyPair, error) {
	var row struct {
		Certificate []byte `db:"certificate_der"`
		Sealed      []byte `db:"private_key_sealed"`
	}
	if err := sqlx.GetContext(ctx, q, &row, `SELECT certificate_der, private_key_sealed FROM saml_sp_keys
		WHERE provider_id = $1`, providerID); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return spKeyPair{}, err
		}
		return spKeyPair{}, fmt.Errorf("reading SAML service provider key: %w", err)
	}
	der, err := sealer.Open(row.Sealed, spKeyAssociation(providerID))
	if err != nil {
		return spKeyPair{}, err
	}
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return spKeyPair{}, fmt.Errorf("decoding SAML service provider key: %w", err)
	}
	key, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return spKeyPair{}, errors.New("decoding SAML service provider key: not an RSA key")
	}
	cert, err := x509.ParseCertificate(row.Certificate)
	if err != nil {
		return spKeyPair{}, fmt.Errorf("decoding SAML service provider certificate: %w", err)
	}
	return spKeyPair{key: key, certificate: cert}, nil
}

// newSPKeyPair generates a key and a self-signed certificate naming the
// provider.
func newSPKeyPair(providerID string, now time.Time) (spKeyPair, error) {
	key, err := rsa.GenerateKey(rand.Reader, spKeyBits)
	if err != nil {
		return spKeyPair{}, fmt.Errorf("generating SAML service provider key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return spKeyPair{}, fmt.Errorf("generating certificate serial: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "Cairn SAML service provider " + providerID},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(spCertificateLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return spKeyPair{}, fmt.Errorf("creating SAML service provider certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return spKeyPair{}, fmt.Errorf("creating SAML service provider certificate: %w", err)
	}
	return spKeyPair{key: key, certificate: cert}, nil
}
