package identity

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/sync/semaphore"
)

// PasswordParams are argon2id's cost parameters.
type PasswordParams struct {
	MemoryKiB   uint32
	Iterations  uint32
	Parallelism uint8
}

const (
	saltBytes = 16
	keyBytes  = 32
)

var errMalformedHash = errors.New("malformed password hash")

// HashPassword returns an argon2id hash in PHC string form, which carries
// its own parameters so they can be raised later without breaking old hashes.
func HashPassword(password string, p PasswordParams) (string, error) {
	salt := make([]byte, saltBytes)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("generating salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, p.Iterations, p.MemoryKiB, p.Parallelism, keyBytes)
	return encodeHash(p, salt, key), nil
}

func encodeHash(p PasswordParams, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.MemoryKiB, p.Iterations, p.Parallelism,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

// decoyHash is a well-formed hash with the given parameters that no
// password matches (its key is random, not derived). Verifying against it
// costs what verifying a real hash costs, which is all an unknown e-mail
// needs to take as long as a known one.
func decoyHash(p PasswordParams) (string, error) {
	raw := make([]byte, saltBytes+keyBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generating decoy hash: %w", err)
	}
	return encodeHash(p, raw[:saltBytes], raw[saltBytes:]), nil
}

// storedHash is an argon2id PHC string taken apart.
type storedHash struct {
	params PasswordParams
	salt   []byte
	key    []byte
}

func decodeHash(encoded string) (storedHash, error) {
	var h storedHash
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return h, errMalformedHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return h, errMalformedHash
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &h.params.MemoryKiB, &h.params.Iterations, &h.params.Parallelism); err != nil ||
		h.params.MemoryKiB == 0 || h.params.Iterations == 0 || h.params.Parallelism == 0 {
		return h, errMalformedHash
	}
	var err error
	if h.salt, err = base64.RawStdEncoding.DecodeString(parts[4]); err != nil {
		return h, errMalformedHash
	}
	if h.key, err = base64.RawStdEncoding.DecodeString(parts[5]); err != nil || len(h.key) == 0 {
		return h, errMalformedHash
	}
	return h, nil
}

// matches derives the key for password in time that does not depend on
// where it differs from the stored one.
func (h storedHash) matches(password string) bool {
	got := argon2.IDKey([]byte(password), h.salt, h.params.Iterations, h.params.MemoryKiB, h.params.Parallelism, uint32(len(h.key)))
	return subtle.ConstantTimeCompare(got, h.key) == 1
}

// VerifyPassword reports whether password matches an argon2id PHC hash.
func VerifyPassword(password, encoded string) (bool, error) {
	h, err := decodeHash(encoded)
	if err != nil {
		return false, err
	}
	return h.matches(password), nil
}

// hashGate bounds the memory of the password hashes running at once: each
// hash holds its whole argon2id memory cost (64 MiB by default) while it
// runs, so without a bound a burst of sign-ups allocates gigabytes. A hash
// waits a short while for its share, then the request is refused as busy.
type hashGate struct {
	slots     *semaphore.Weighted
	budgetKiB int64
	wait      time.Duration
}

func newHashGate(budgetKiB int64, wait time.Duration) *hashGate {
	return &hashGate{slots: semaphore.NewWeighted(budgetKiB), budgetKiB: budgetKiB, wait: wait}
}

// run calls fn once memoryKiB of the budget is free. A hash larger than the
// whole budget (an old hash with a higher cost) waits for all of it.
func (g *hashGate) run(ctx context.Context, memoryKiB uint32, fn func()) error {
	weight := min(int64(memoryKiB), g.budgetKiB)
	if err := g.acquire(ctx, weight); err != nil {
		return err
	}
	defer g.slots.Release(weight)
	fn()
	return nil
}

// acquire takes weight of the budget, waiting at most g.wait. A zero wait
// takes a free share at once and never waits (an expired context would
// refuse even a free budget).
func (g *hashGate) acquire(ctx context.Context, weight int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if g.wait <= 0 {
		if !g.slots.TryAcquire(weight) {
			return ErrBusy
		}
		return nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, g.wait)
	defer cancel()
	if err := g.slots.Acquire(waitCtx, weight); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrBusy
	}
	return nil
}

// hashPassword hashes a new password under the gate.
func (s *Service) hashPassword(ctx context.Context, password string) (string, error) {
	var hash string
	var err error
	if gateErr := s.hashes.run(ctx, s.opts.Password.MemoryKiB, func() { hash, err = HashPassword(password, s.opts.Password) }); gateErr != nil {
		return "", gateErr
	}
	return hash, err
}

// verifyPassword checks a password against a stored hash under the gate.
func (s *Service) verifyPassword(ctx context.Context, password, encoded string) (bool, error) {
	h, err := decodeHash(encoded)
	if err != nil {
		return false, err
	}
	var ok bool
	if err := s.hashes.run(ctx, h.params.MemoryKiB, func() { ok = h.matches(password) }); err != nil {
		return false, err
	}
	return ok, nil
}
