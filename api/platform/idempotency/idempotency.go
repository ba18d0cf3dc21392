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

	"github.com/cairnhq/cairn/api/platform/seal"
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

// Request identifies one keyed mutation: everything that decides what the
// mutation does is part of its fingerprint, so the same key can never
// stand for two different requests. Route is the path template (kept in
// the record, it names the operation); Path is the resolved path with the
// resource IDs the handler acts on; Query is the canonical query string.
// Body must be the canonical serialization of the decoded input, so that
// equivalent documents (other whitespace or key order) fingerprint the
// same.
type Request struct {
	OrganizationID string
	PrincipalID    string
	Key            string
	Method         string
	Route          string
	Path           string
	Query          string
	Body           []byte
}

// Response is what the first successful request answered.
type Response struct {
	Status int
	Body   []byte
}

// Ledger reserves keys and records responses inside the caller's
// transaction, so the reservation, the mutation and the stored response
// commit or vanish together. Stored responses are sealed: some carry a
// secret shown once (an issued token), and a replay must return it while
// the database never holds it in clear.
type Ledger struct {
	fingerprintKey []byte
	sealer         *seal.Sealer
	now            func() time.Time
}

// NewLedger returns a ledger whose fingerprints are HMACs under
// fingerprintKey and whose stored responses are sealed by sealer. A nil
// sealer makes every reservation fail closed with seal.ErrNoKey.
func NewLedger(fingerprintKey []byte, sealer *seal.Sealer) *Ledger {
	return &Ledger{fingerprintKey: fingerprintKey, sealer: sealer, now: time.Now}
}

func (l *Ledger) fingerprint(r Request) []byte {
	m := hmac.New(sha256.New, l.fingerprintKey)
	for _, part := range []string{r.OrganizationID, r.PrincipalID, r.Method, r.Route, r.Path, r.Query, string(r.Body)} {
		writePart(m, part)
	}
	return m.Sum(nil)
}

// sealingContext binds a stored response to its record: tenant,
// principal, key and the exact request, so a sealed answer copied onto
// another record does not open.
func sealingContext(r Request, fingerprint []byte) []byte {
	h := sha256.New()
	for _, part := range []string{"cairn/idempotency-response", r.OrganizationID, r.PrincipalID, r.Key, string(fingerprint)} {
		writePart(h, part)
	}
	return h.Sum(nil)
}

// writePart writes a length-prefixed part, so that no two part lists
// serialize the same.
func writePart(w interface{ Write([]byte) (int, error) }, part string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(part)))
	_, _ = w.Write(n[:])
	_, _ = w.Write([]byte(part))
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
// Reserve writes nothing, so a reservation that ends without a Record
// leaves no trace.
func (l *Ledger) Reserve(ctx context.Context, tx *sqlx.Tx, r Request) (*Response, error) {
	if l.sealer == nil {
		return nil, fmt.Errorf("reserving idempotency key: %w", seal.ErrNoKey)
	}
	// One round trip: try the lock and read any record together. The
	// record is only trusted when the lock was won.
	var stored struct {
		Locked      bool       `db:"locked"`
		Fingerprint []byte     `db:"fingerprint"`
		Status      *int       `db:"response_status"`
		Sealed      []byte     `db:"response_sealed"`
		ExpiresAt   *time.Time `db:"expires_at"`
	}
	err := tx.QueryRowxContext(ctx, `
		SELECT l.locked, r.fingerprint, r.response_status, r.response_sealed, r.expires_at
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
	if stored.Status == nil || !stored.ExpiresAt.After(l.now()) {
		// Never used, or expired but not yet swept: the key is free, and
		// Record replaces the expired record.
		return nil, nil
	}
	fingerprint := l.fingerprint(r)
	if !hmac.Equal(stored.Fingerprint, fingerprint) {
		return nil, ErrKeyReused
	}
	body, err := l.sealer.Open(stored.Sealed, sealingContext(r, fingerprint))
	if err != nil {
		return nil, fmt.Errorf("opening stored response: %w", err)
	}
	return &Response{Status: *stored.Status, Body: body}, nil
}

// Record stores the successful response of a reserved key in tx, sealed
// to the record's identity. An expired record of the same key is
// replaced; a live one means the key was not reserved by this caller.
func (l *Ledger) Record(ctx context.Context, tx *sqlx.Tx, r Request, resp Response) error {
	fingerprint := l.fingerprint(r)
	sealed, err := l.sealer.Seal(resp.Body, sealingContext(r, fingerprint))
	if err != nil {
		return fmt.Errorf("sealing idempotent response: %w", err)
	}
	now := l.now()
	res, err := tx.ExecContext(ctx, `
		INSERT INTO idempotency_records
			(organization_id, principal_id, idempotency_key, fingerprint, method, route,
			 response_status, response_sealed, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (organization_id, principal_id, idempotency_key) DO UPDATE
		SET fingerprint = EXCLUDED.fingerprint, method = EXCLUDED.method, route = EXCLUDED.route,
		    response_status = EXCLUDED.response_status, response_sealed = EXCLUDED.response_sealed,
		    created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
		WHERE idempotency_records.expires_at <= $9`,
		r.OrganizationID, r.PrincipalID, r.Key, fingerprint, r.Method, r.Route,
		resp.Status, sealed, now, now.Add(TTL))
	if err != nil {
		return fmt.Errorf("recording idempotent response: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("recording idempotent response: %w", ErrInProgress)
	}
	return nil
}

// Hold is a reservation that outlives one transaction, for a use case
// that commits in several (a recovery imports state between taking its
// lease and resolving). The holding transaction keeps the advisory lock,
// so a concurrent retry is ErrInProgress until Release; the use case
// Records the response in its own final transaction, so the answer
// commits exactly when the mutation does. The holding transaction writes
// nothing, so it cannot block that Record.
type Hold struct {
	tx *sqlx.Tx
	// Stored is the earlier answer when this request is a replay.
	Stored *Response
}

// Hold reserves r on a transaction of its own; see Hold. The caller must
// Release it, whatever happens.
func (l *Ledger) Hold(ctx context.Context, db *sqlx.DB, r Request) (*Hold, error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("holding idempotency key: %w", err)
	}
	stored, err := l.Reserve(ctx, tx, r)
	if err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return &Hold{tx: tx, Stored: stored}, nil
}

// Release lets the key go. Whether the use case recorded an answer or
// not, the holding transaction has nothing to commit.
func (h *Hold) Release() { _ = h.tx.Rollback() }

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
