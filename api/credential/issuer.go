package credential

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"database/sql"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/seal"
)

// Key rotation and token lifetimes of the workload-identity issuer.
const (
	// SigningPeriod is how long one key signs.
	SigningPeriod = 30 * 24 * time.Hour
	// PublishAhead is how long a successor key is in the JWKS before it
	// signs, so a verifier's cached JWKS already holds it.
	PublishAhead = 48 * time.Hour
	// MaxTokenLifetime caps a token's life (the phase timeout sets it
	// otherwise); Google's STS refuses longer ones.
	MaxTokenLifetime = 24 * time.Hour
	// ClockSkew backdates iat and nbf, so a verifier whose clock is a
	// little behind Cairn's accepts a token at once.
	ClockSkew = 30 * time.Second
	// retiredKeyGrace keeps a retired key in the JWKS for the longest
	// token it signed, and a margin.
	retiredKeyGrace = MaxTokenLifetime + time.Hour
	rsaBits         = 2048
	// MaxSubjectBytes is Google's limit on google.subject.
	MaxSubjectBytes = 127
)

// Issuer is Cairn's OIDC issuer for workload identity: its discovery
// document, its JWKS and RS256 tokens signed with keys of its own (used for
// nothing else), rotated with overlap. Private keys are sealed in the
// database, so every API and worker process serves and signs with the same
// keys; a worker keeps the key it signs with in memory until it retires.
type Issuer struct {
	db     *sqlx.DB
	sealer *seal.Sealer
	url    string
	now    func() time.Time

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

// NewIssuer returns the issuer whose identifier is issuerURL
// (CAIRN_PUBLIC_URL followed by IssuerPath). sealer may be nil: nothing is signed then.
func NewIssuer(conn *sqlx.DB, sealer *seal.Sealer, issuerURL string) *Issuer {
	return &Issuer{db: conn, sealer: sealer, url: strings.TrimRight(issuerURL, "/"), now: time.Now}
}

// WithClock returns an issuer reading the time from now (tests let keys
// age without waiting).
func (i *Issuer) WithClock(now func() time.Time) *Issuer {
	return &Issuer{db: i.db, sealer: i.sealer, url: i.url, now: now}
}

// URL is the issuer identifier, the iss of every token.
func (i *Issuer) URL() string { return i.url }

// IssuerPath is the issuer's path under CAIRN_PUBLIC_URL: the root's
// OpenID discovery document belongs to the agents' authorization server
// (api/authserver), whose tokens are signed with other keys, so the
// workload-identity issuer has an identifier, discovery document and key
// set of its own, and neither issuer's keys verify the other's tokens.
const IssuerPath = "/workload-identity"

// JWKSPath is where the key set is served, under the issuer URL.
const JWKSPath = "/.well-known/jwks.json"

// DiscoveryPath is where the discovery document is served, under the
// issuer URL.
const DiscoveryPath = "/.well-known/openid-configuration"

// Discovery is the issuer's OpenID Provider metadata: enough for a cloud
// (or any OIDC library) to find the keys and the claims it may map.
func (i *Issuer) Discovery() map[string]any {
	return map[string]any{
		"issuer":                                i.url,
		"jwks_uri":                              i.url + JWKSPath,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"scopes_supported":                      []string{"openid"},
		"claims_supported": []string{"iss", "sub", "aud", "exp", "iat", "nbf", "jti", "organization_id", "organization_name",
			"project_id", "project_name", "workspace_id", "workspace_name", "run_id", "run_phase", "run_initiator"},
	}
}

// JWK is one public key of the key set.
type JWK struct {
	KeyType   string `json:"kty"`
	Use       string `json:"use"`
	Algorithm string `json:"alg"`
	KeyID     string `json:"kid"`
	N         string `json:"n"`
	E         string `json:"e"`
}

// JWKS is the issuer's published key set: the key that signs now, its
// successor once it is created, and retired keys until their last token
// expired.
func (i *Issuer) JWKS(ctx context.Context) ([]JWK, error) {
	var rows []json.RawMessage
	if err := i.db.SelectContext(ctx, &rows, `SELECT public_jwk FROM oidc_signing_keys WHERE publish_until > $1
		ORDER BY not_before`, i.now()); err != nil {
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

// Rotate keeps the key set current: a key that signs now (the first one
// is created on first need), a successor published PublishAhead before
// its predecessor retires, and retired keys dropped once no token they
// signed can be valid. Concurrent callers serialize on a lock.
func (i *Issuer) Rotate(ctx context.Context) error {
	if i.sealer == nil {
		return fmt.Errorf("rotating signing keys: %w", ErrNoSigningKey)
	}
	now := i.now().UTC().Truncate(time.Microsecond)
	return db.WithTx(ctx, i.db, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('cairn/oidc-signing-keys', 0))`); err != nil {
			return fmt.Errorf("locking signing keys: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM oidc_signing_keys WHERE publish_until <= $1`, now); err != nil {
			return fmt.Errorf("dropping retired keys: %w", err)
		}
		var latest sql.NullTime
		if err := tx.GetContext(ctx, &latest, `SELECT max(retire_after) FROM oidc_signing_keys WHERE retire_after > $1`, now); err != nil {
			return fmt.Errorf("reading signing keys: %w", err)
		}
		var active bool
		if err := tx.GetContext(ctx, &active, `SELECT EXISTS (SELECT 1 FROM oidc_signing_keys WHERE not_before <= $1 AND retire_after > $1)`, now); err != nil {
			return fmt.Errorf("reading signing keys: %w", err)
		}
		switch {
		case !active:
			// No key signs now: the first, or a gap after a long outage.
			return i.insertKey(ctx, tx, now, now.Add(SigningPeriod))
		case latest.Time.Sub(now) <= PublishAhead:
			return i.insertKey(ctx, tx, latest.Time, latest.Time.Add(SigningPeriod))
		}
		return nil
	})
}

func (i *Issuer) insertKey(ctx context.Context, tx *sqlx.Tx, notBefore, retireAfter time.Time) error {
	key, err := rsa.GenerateKey(rand.Reader, rsaBits)
	if err != nil {
		return fmt.Errorf("generating signing key: %w", err)
	}
	jwk := publicJWK(&key.PublicKey)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding signing key: %w", err)
	}
	sealed, err := i.sealer.Seal(der, keyAssociation(jwk.KeyID))
	if err != nil {
		return err
	}
	public, _ := json.Marshal(jwk)
	if _, err := tx.ExecContext(ctx, `INSERT INTO oidc_signing_keys (kid, public_jwk, sealed_private_key, not_before, retire_after,
		publish_until) VALUES ($1, $2, $3, $4, $5, $6)`, jwk.KeyID, string(public), sealed, notBefore, retireAfter,
		retireAfter.Add(retiredKeyGrace)); err != nil {
		return fmt.Errorf("storing signing key: %w", err)
	}
	return nil
}

func keyAssociation(kid string) []byte { return []byte("cairn/oidc-signing-key/" + kid) }

// publicJWK is the RSA public key as a JWK, its kid the RFC 7638
// thumbprint.
func publicJWK(pub *rsa.PublicKey) JWK {
	n := base64.RawURLEncoding.EncodeToString(pub.N.Bytes())
	e := base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes())
	thumb := sha256.Sum256([]byte(`{"e":"` + e + `","kty":"RSA","n":"` + n + `"}`))
	return JWK{KeyType: "RSA", Use: "sig", Algorithm: "RS256", KeyID: base64.RawURLEncoding.EncodeToString(thumb[:]), N: n, E: e}
}

// keyRefresh is how long a process signs with the key it loaded before it
// looks again: each look also keeps the rotation going, so a successor is
// published PublishAhead before its predecessor retires.
const keyRefresh = time.Hour

// signer returns the key that signs now, from memory while it is current
// and was loaded within keyRefresh.
func (i *Issuer) signer(ctx context.Context) (*signingKey, error) {
	now := i.now()
	i.mu.Lock()
	cached := i.cached
	i.mu.Unlock()
	if cached != nil && !now.Before(cached.notBefore) && now.Before(cached.retireAfter) && now.Sub(cached.loadedAt) < keyRefresh {
		return cached, nil
	}
	if i.sealer == nil {
		return nil, ErrNoSigningKey
	}
	if err := i.Rotate(ctx); err != nil {
		return nil, err
	}
	// The first key signs from the moment Rotate read the clock, which is
	// after now.
	k, err := i.activeKey(ctx, i.now())
	if err != nil {
		return nil, err
	}
	k.loadedAt = now
	i.mu.Lock()
	i.cached = k
	i.mu.Unlock()
	return k, nil
}

func (i *Issuer) activeKey(ctx context.Context, now time.Time) (*signingKey, error) {
	var row struct {
		KID         string    `db:"kid"`
		Sealed      []byte    `db:"sealed_private_key"`
		NotBefore   time.Time `db:"not_before"`
		RetireAfter time.Time `db:"retire_after"`
	}
	err := i.db.GetContext(ctx, &row, `SELECT kid, sealed_private_key, not_before, retire_after FROM oidc_signing_keys
		WHERE not_before <= $1 AND retire_after > $1 ORDER BY not_before DESC LIMIT 1`, now)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("no signing key in force: %w", ErrNoSigningKey)
		}
		return nil, fmt.Errorf("reading signing key: %w", err)
	}
	der, err := i.sealer.Open(row.Sealed, keyAssociation(row.KID))
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

// Claims are a workload-identity token's claims. The subject is built from
// stable IDs only; names are informative claims beside it.
type Claims struct {
	Issuer           string `json:"iss"`
	Subject          string `json:"sub"`
	Audience         string `json:"aud"`
	IssuedAt         int64  `json:"iat"`
	NotBefore        int64  `json:"nbf"`
	Expiry           int64  `json:"exp"`
	ID               string `json:"jti"`
	OrganizationID   string `json:"organization_id"`
	OrganizationName string `json:"organization_name"`
	ProjectID        string `json:"project_id"`
	ProjectName      string `json:"project_name"`
	WorkspaceID      string `json:"workspace_id"`
	WorkspaceName    string `json:"workspace_name"`
	RunID            string `json:"run_id"`
	RunPhase         string `json:"run_phase"`
	// RunInitiator is who started the run: user, agent, service_account,
	// code_host, operator or trigger. A cloud's trust policy can refuse
	// runs an agent proposed even after a person released them.
	RunInitiator string `json:"run_initiator"`
}

// Mint signs a token for c (its subject and audience set; run facts
// filled) valid for lifetime, capped at MaxTokenLifetime, with a fresh
// jti and iat and nbf backdated by ClockSkew.
func (i *Issuer) Mint(ctx context.Context, c Claims, lifetime time.Duration) (string, error) {
	k, err := i.signer(ctx)
	if err != nil {
		return "", err
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", err
	}
	now := i.now()
	lifetime = min(max(lifetime, time.Minute), MaxTokenLifetime)
	c.Issuer, c.ID = i.url, base64.RawURLEncoding.EncodeToString(jti[:])
	c.IssuedAt, c.NotBefore = now.Add(-ClockSkew).Unix(), now.Add(-ClockSkew).Unix()
	c.Expiry = now.Add(lifetime).Unix()
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": k.kid})
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	digest := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k.key, crypto.SHA256, digest[:])
	if err != nil {
		return "", fmt.Errorf("signing token: %w", err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// Subject is the workload-identity subject of a run phase:
// organization:{org}:project:{project}:workspace:{workspace}:run_phase:{phase}.
// Each ID is its 128 random bits in unpadded base64url (22 characters):
// the IDs as issued would make a subject of up to 149 bytes, and Google
// accepts at most 127. The subject never holds a renamable name.
func Subject(organizationID, projectID, workspaceID, runPhase string) (string, error) {
	var parts []string
	for _, id := range []string{organizationID, projectID, workspaceID} {
		c, err := compactID(id)
		if err != nil {
			return "", err
		}
		parts = append(parts, c)
	}
	switch runPhase {
	case RunPhasePlan, RunPhaseApply, RunPhaseSpeculativePlan:
	default:
		return "", fmt.Errorf("run phase %q has no subject", runPhase)
	}
	sub := "organization:" + parts[0] + ":project:" + parts[1] + ":workspace:" + parts[2] + ":run_phase:" + runPhase
	if len(sub) > MaxSubjectBytes {
		return "", fmt.Errorf("subject of %d bytes", len(sub))
	}
	return sub, nil
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// compactID re-encodes an ID's random part (prefix_ and 26 base32
// characters) in base64url.
func compactID(id string) (string, error) {
	_, rest, ok := strings.Cut(id, "_")
	raw, err := idEncoding.DecodeString(rest)
	if !ok || err != nil || len(raw) != 16 {
		return "", fmt.Errorf("identifier %q is not a Cairn ID", id)
	}
	return base64.RawURLEncoding.EncodeToString(raw), nil
}
