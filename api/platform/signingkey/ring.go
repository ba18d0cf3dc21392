package signingkey

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/seal"
)

// Purpose names what a ring's keys sign; nothing else is signed with them.
type Purpose string

const (
	// WorkloadIdentity signs the tokens sandboxed runs present to clouds.
	WorkloadIdentity Purpose = "workload_identity"
	// IDToken signs the OpenID provider's ID tokens.
	IDToken Purpose = "id_token"
)

// Rotation of every ring.
const (
	// SigningPeriod is how long one key signs.
	SigningPeriod = 30 * 24 * time.Hour
	// PublishAhead is how long a successor key is in the JWKS before it
	// signs, so a verifier's cached JWKS already holds it.
	PublishAhead = 48 * time.Hour
	// MaxTokenLifetime is the longest a token signed by a ring may live:
	// a retired key stays published that long after its last signature.
	MaxTokenLifetime = 24 * time.Hour
	retiredKeyGrace  = MaxTokenLifetime + time.Hour
	rsaBits          = 2048
	// keyRefresh is how long a process signs with the key it loaded before
	// it looks again: each look also keeps the rotation going.
	keyRefresh = time.Hour
)

// ErrNoKey means the ring has no key it can sign with (no master key to
// unseal one).
var ErrNoKey = errors.New("no signing key")

// Ring is the key set of one purpose.
type Ring struct {
	db      *sqlx.DB
	sealer  *seal.Sealer
	purpose Purpose
	now     func() time.Time

	mu     sync.Mutex
	cached *signingKey
}

type signingKey struct {
	kid         string
	key         *rsa.PrivateKey
	notBefore   time.Time
	retireAfter time.Time
	loadedAt    time.Time
}

// New returns the ring of purpose. sealer may be nil: nothing is signed
// then (ErrNoKey), though published keys are still served.
func New(conn *sqlx.DB, sealer *seal.Sealer, purpose Purpose) *Ring {
	return &Ring{db: conn, sealer: sealer, purpose: purpose, now: time.Now}
}

// WithClock returns the ring reading the time from now (tests let keys age
// without waiting).
func (r *Ring) WithClock(now func() time.Time) *Ring {
	return &Ring{db: r.db, sealer: r.sealer, purpose: r.purpose, now: now}
}

// Now is the ring's clock.
func (r *Ring) Now() time.Time { return r.now() }

// JWK is one public key of the key set.
type JWK struct {
	KeyType   string `json:"kty"`
	Use       string `json:"use"`
	Algorithm string `json:"alg"`
	KeyID     string `json:"kid"`
	N         string `json:"n"`
	E         string `json:"e"`
}

// JWKS is the published key set: the key that signs now, its successor
// once it is created, and retired keys until their last token expired.
func (r *Ring) JWKS(ctx context.Context) ([]JWK, error) {
	var rows []json.RawMessage
	if err := r.db.SelectContext(ctx, &rows, `SELECT public_jwk FROM oidc_signing_keys WHERE purpose = $1 AND publish_until > $2
		ORDER BY not_before`, r.purpose, r.now()); err != nil {
		return nil, fmt.Errorf("reading signing keys: %w", err)
	}
	keys := make([]JWK, 0, len(rows))
	for _, raw := range rows {
		var k JWK
		if err := json.Unmarshal(raw, &k); err != nil {
			return nil, fmt.Errorf("decoding signing key: %w", err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// Rotate keeps the key set current: a key that signs now (the first one is
// created on first need), a successor published PublishAhead before its
// predecessor retires, and retired keys dropped once no token they signed
// can be valid. Concurrent callers serialize on a lock.
func (r *Ring) Rotate(ctx context.Context) error {
	if r.sealer == nil {
		return fmt.Errorf("rotating signing keys: %w", ErrNoKey)
	}
	now := r.now().UTC().Truncate(time.Microsecond)
	return db.WithTx(ctx, r.db, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cairn/oidc-signing-keys/' || $1, 0))`, r.purpose); err != nil {
			return fmt.Errorf("locking signing keys: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM oidc_signing_keys WHERE purpose = $1 AND publish_until <= $2`, r.purpose, now); err != nil {
			return fmt.Errorf("dropping retired keys: %w", err)
		}
		var latest sql.NullTime
		if err := tx.GetContext(ctx, &latest, `SELECT max(retire_after) FROM oidc_signing_keys WHERE purpose = $1 AND retire_after > $2`,
			r.purpose, now); err != nil {
			return fmt.Errorf("reading signing keys: %w", err)
		}
		var active bool
		if err := tx.GetContext(ctx, &active, `SELECT EXISTS (SELECT 1 FROM oidc_signing_keys WHERE purpose = $1 AND not_before <= $2
			AND retire_after > $2)`, r.purpose, now); err != nil {
			return fmt.Errorf("reading signing keys: %w", err)
		}
		switch {
		case !active:
			// No key signs now: the first, or a gap after a long outage.
			return r.insertKey(ctx, tx, now, now.Add(SigningPeriod))
		case latest.Time.Sub(now) <= PublishAhead:
			return r.insertKey(ctx, tx, latest.Time, latest.Time.Add(SigningPeriod))
		}
		return nil
	})
}

func (r *Ring) insertKey(ctx context.Context, tx *sqlx.Tx, notBefore, retireAfter time.Time) error {
	key, err := rsa.GenerateKey(rand.Reader, rsaBits)
	if err != nil {
		return fmt.Errorf("generating signing key: %w", err)
	}
	jwk := publicJWK(&key.PublicKey)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding signing key: %w", err)
	}
	sealed, err := r.sealer.Seal(der, r.association(jwk.KeyID))
	if err != nil {
		return err
	}
	public, _ := json.Marshal(jwk)
	if _, err := tx.ExecContext(ctx, `INSERT INTO oidc_signing_keys (kid, purpose, public_jwk, sealed_private_key, not_before,
		retire_after, publish_until) VALUES ($1, $2, $3, $4, $5, $6, $7)`, jwk.KeyID, r.purpose, string(public), sealed, notBefore,
		retireAfter, retireAfter.Add(retiredKeyGrace)); err != nil {
		return fmt.Errorf("storing signing key: %w", err)
	}
	return nil
}

// association binds a sealed key to its purpose and kid: a row moved to
// another purpose does not open. Workload-identity keys keep the binding
// they were sealed with before rings had purposes.
func (r *Ring) association(kid string) []byte {
	if r.purpose == WorkloadIdentity {
		return []byte("cairn/oidc-signing-key/" + kid)
	}
	return []byte("cairn/signing-key/" + string(r.purpose) + "/" + kid)
}

// publicJWK is the RSA public key as a JWK, its kid the RFC 7638
// thumbprint.
func publicJWK(pub *rsa.PublicKey) JWK {
	n := base64.RawURLEncoding.EncodeToString(pub.N.Bytes())
	e := base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes())
	thumb := sha256.Sum256([]byte(`{"e":"` + e + `","kty":"RSA","n":"` + n + `"}`))
	return JWK{KeyType: "RSA", Use: "sig", Algorithm: "RS256", KeyID: base64.RawURLEncoding.EncodeToString(thumb[:]), N: n, E: e}
}

// signer returns the key that signs now, from memory while it is current
// and was loaded within keyRefresh.
func (r *Ring) signer(ctx context.Context) (*signingKey, error) {
	now := r.now()
	r.mu.Lock()
	cached := r.cached
	r.mu.Unlock()
	if cached != nil && !now.Before(cached.notBefore) && now.Before(cached.retireAfter) && now.Sub(cached.loadedAt) < keyRefresh {
		return cached, nil
	}
	if r.sealer == nil {
		return nil, ErrNoKey
	}
	if err := r.Rotate(ctx); err != nil {
		return nil, err
	}
	// The first key signs from the moment Rotate read the clock, which is
	// after now.
	k, err := r.activeKey(ctx, r.now())
	if err != nil {
		return nil, err
	}
	k.loadedAt = now
	r.mu.Lock()
	r.cached = k
	r.mu.Unlock()
	return k, nil
}

func (r *Ring) activeKey(ctx context.Context, now time.Time) (*signingKey, error) {
	var row struct {
		KID         string    `db:"kid"`
		Sealed      []byte    `db:"sealed_private_key"`
		NotBefore   time.Time `db:"not_before"`
		RetireAfter time.Time `db:"retire_after"`
	}
	err := r.db.GetContext(ctx, &row, `SELECT kid, sealed_private_key, not_before, retire_after FROM oidc_signing_keys
		WHERE purpose = $1 AND not_before <= $2 AND retire_after > $2 ORDER BY not_before DESC LIMIT 1`, r.purpose, now)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("no signing key in force: %w", ErrNoKey)
		}
		return nil, fmt.Errorf("reading signing key: %w", err)
	}
	der, err := r.sealer.Open(row.Sealed, r.association(row.KID))
	if err != nil {
		return nil, fmt.Errorf("unsealing signing key %s: %w", row.KID, err)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	key, ok := parsed.(*rsa.PrivateKey)
	if err != nil || !ok {
		return nil, fmt.Errorf("signing key %s is not an RSA key", row.KID)
	}
	return &signingKey{kid: row.KID, key: key, notBefore: row.NotBefore, retireAfter: row.RetireAfter}, nil
}

// Sign returns claims as a compact RS256 JWT (typ JWT) signed with the key
// in force, named by its kid.
func (r *Ring) Sign(ctx context.Context, claims any) (string, error) {
	k, err := r.signer(ctx)
	if err != nil {
		return "", err
	}
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": k.kid})
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encoding token claims: %w", err)
	}
	input := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	digest := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k.key, crypto.SHA256, digest[:])
	if err != nil {
		return "", fmt.Errorf("signing token: %w", err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// Ready checks that the ring can sign now, creating its first key when
// needed: ErrNoKey when it cannot.
func (r *Ring) Ready(ctx context.Context) error {
	_, err := r.signer(ctx)
	return err
}
