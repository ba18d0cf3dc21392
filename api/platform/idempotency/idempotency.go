package idempotency

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// TTL is how long a key is remembered, counted from its first reservation.
const TTL = 24 * time.Hour

// MaxKeyLength is the longest accepted Idempotency-Key.
const MaxKeyLength = 255

// Header is the request header carrying the key.
const Header = "Idempotency-Key"

var (
	ErrKeyMissing = errors.New("idempotency key missing")
	ErrKeyInvalid = errors.New("idempotency key malformed")
	ErrKeyReused  = errors.New("idempotency key reused with different input")
	ErrInProgress = errors.New("idempotency key reserved by an unfinished request")
)

// ValidateKey accepts 1–255 visible ASCII characters.
func ValidateKey(key string) error {
	if key == "" {
		return ErrKeyMissing
	}
	if len(key) > MaxKeyLength {
		return ErrKeyInvalid
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return ErrKeyInvalid
		}
	}
	return nil
}

// Request identifies one keyed mutation. Body must be the canonical
// serialization of the decoded input, so that equivalent documents (other
// whitespace or key order) fingerprint the same.
type Request struct {
	OrganizationID string
	PrincipalID    string
	Key            string
	Method         string
	Route          string
	Body           []byte
}

// Response is what the first successful request answered.
type Response struct {
	Status int
	Body   []byte
}

// Ledger reserves keys and records responses inside the caller's
// transaction, so the reservation, the mutation and the stored response
// commit or vanish together.
type Ledger struct {
	fingerprintKey []byte
	now            func() time.Time
}

// NewLedger returns a ledger whose fingerprints are HMACs under key.
func NewLedger(fingerprintKey []byte) *Ledger {
	return &Ledger{fingerprintKey: fingerprintKey, now: time.Now}
}

func (l *Ledger) fingerprint(r Request) []byte {
	m := hmac.New(sha256.New, l.fingerprintKey)
	for _, part := range []string{r.OrganizationID, r.PrincipalID, r.Method, r.Route, string(r.Body)} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		m.Write(n[:])
		m.Write([]byte(part))
	}
	return m.Sum(nil)
}

// lockID maps a scoped key to a 64-bit advisory lock. The lock lives as long
// as the reserving transaction, which is what "in progress" means.
func lockID(r Request) int64 {
	sum := sha256.Sum256([]byte("cairn/idempotency\x00" + r.OrganizationID + "\x00" + r.PrincipalID + "\x00" + r.Key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// Reserve claims the key for the transaction tx. It returns the stored
// response when the same input already succeeded under this key (replay),
// ErrKeyReused when the key succeeded with other input, and ErrInProgress
// when another transaction holds the key right now. A nil response and nil
// error mean the caller should perform the mutation and then Record it.
func (l *Ledger) Reserve(ctx context.Context, tx *sqlx.Tx, r Request) (*Response, error) {
	// One round trip: try the lock and read any record together. The
	// record is only trusted when the lock was won.
	var stored struct {
		Locked      bool       `db:"locked"`
		Fingerprint []byte     `db:"fingerprint"`
		Status      *int       `db:"response_status"`
		Body        []byte     `db:"response_body"`
		ExpiresAt   *time.Time `db:"expires_at"`
	}
	err := tx.QueryRowxContext(ctx, `
		SELECT l.locked, r.fingerprint, r.response_status, r.response_body, r.expires_at
		FROM (SELECT pg_try_advisory_xact_lock($1) AS locked) l
		LEFT JOIN idempotency_records r
		  ON l.locked AND r.organization_id = $2 AND r.principal_id = $3 AND r.idempotency_key = $4`,
		lockID(r), r.OrganizationID, r.PrincipalID, r.Key).StructScan(&stored)
	if err != nil {
		return nil, fmt.Errorf("reserving idempotency key: %w", err)
	}
	if !stored.Locked {
		return nil, ErrInProgress
	}
	if stored.Status == nil {
		return nil, nil
	}
	if !stored.ExpiresAt.After(l.now()) {
		// Expired but not yet swept: the key is free again.
		if _, err := tx.ExecContext(ctx, `
			DELETE FROM idempotency_records
			WHERE organization_id = $1 AND principal_id = $2 AND idempotency_key = $3`,
			r.OrganizationID, r.PrincipalID, r.Key); err != nil {
			return nil, fmt.Errorf("releasing expired idempotency record: %w", err)
		}
		return nil, nil
	}
	if !hmac.Equal(stored.Fingerprint, l.fingerprint(r)) {
		return nil, ErrKeyReused
	}
	return &Response{Status: *stored.Status, Body: stored.Body}, nil
}

// Record stores the successful response of a reserved key in tx.
func (l *Ledger) Record(ctx context.Context, tx *sqlx.Tx, r Request, resp Response) error {
	now := l.now()
	_, err := tx.ExecContext(ctx, `
		INSERT INTO idempotency_records
			(organization_id, principal_id, idempotency_key, fingerprint, method, route,
			 response_status, response_body, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		r.OrganizationID, r.PrincipalID, r.Key, l.fingerprint(r), r.Method, r.Route,
		resp.Status, resp.Body, now, now.Add(TTL))
	if err != nil {
		return fmt.Errorf("recording idempotent response: %w", err)
	}
	return nil
}

// SweepExpired deletes up to batch expired records and reports how many it
// removed; callers loop until it returns fewer than batch.
func SweepExpired(ctx context.Context, db sqlx.ExecerContext, batch int) (int64, error) {
	res, err := db.ExecContext(ctx, `
		DELETE FROM idempotency_records
		WHERE id IN (
			SELECT id FROM idempotency_records
			WHERE expires_at <= now()
			ORDER BY expires_at
			LIMIT $1
			FOR UPDATE SKIP LOCKED)`, batch)
	if err != nil {
		return 0, fmt.Errorf("sweeping idempotency records: %w", err)
	}
	return res.RowsAffected()
}
