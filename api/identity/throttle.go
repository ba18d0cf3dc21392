package identity

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"net/netip"
	"sort"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/db"
)

// throttlePolicy is how a subject's recent attempts slow it down. It is a
// leaky bucket: each counted attempt raises the level by one and the level
// drains by one per drain interval. Below free a subject waits for
// nothing; from there every further attempt doubles the wait after it
// (base at free, twice that one attempt later), up to max. Nothing is ever
// locked: the wait only delays the next try.
type throttlePolicy struct {
	kind  string
	free  float64
	base  time.Duration
	max   time.Duration
	drain time.Duration
}

// The policies. A stranger who guesses at an account from one address only
// slows that pair; the owner signs in from any other address. One address
// guessing across many accounts is slowed as a whole, but only after more
// failures than an office behind one NAT makes, and it drains fast.
var (
	// pairPolicy limits failed sign-ins for one account from one address:
	// five free tries, then 1 s, 2 s, 4 s … up to 15 minutes between tries.
	pairPolicy = throttlePolicy{kind: "pair", free: 5, base: time.Second, max: 15 * time.Minute, drain: time.Hour}
	// addressPolicy limits failed sign-ins from one address, whatever the
	// account: 30 free, then doubling; it drains by one every 30 seconds.
	addressPolicy = throttlePolicy{kind: "address", free: 30, base: time.Second, max: 15 * time.Minute, drain: 30 * time.Second}
	// signUpPolicy limits sign-ups (each costs a password hash) from one
	// address: 20 free, then doubling; it drains by one every 3 minutes.
	signUpPolicy = throttlePolicy{kind: "sign-up", free: 20, base: time.Second, max: time.Hour, drain: 3 * time.Minute}
	// registrationPolicy limits unauthenticated OAuth client registrations
	// (RFC 7591) from one address: 10 free, then doubling; it drains by one
	// every 6 minutes. A person's agent registers once; a flood of
	// registrations from one address is not a person.
	registrationPolicy = throttlePolicy{kind: "client-registration", free: 10, base: time.Second, max: time.Hour, drain: 6 * time.Minute}
)

// AdmitClientRegistration counts one OAuth client registration from the
// client address, or refuses with RateLimitedError when it must wait.
func (s *Service) AdmitClientRegistration(ctx context.Context, client netip.Addr) error {
	return s.admit(ctx, s.subject(registrationPolicy, addressKey(client)))
}

// throttleState is a subject's stored level as of its last counted attempt.
type throttleState struct {
	Subject   string    `db:"subject"`
	Level     float64   `db:"level"`
	UpdatedAt time.Time `db:"updated_at"`
}

// delay is how long after its last counted attempt a subject at level must
// wait before the next.
func (p throttlePolicy) delay(level float64) time.Duration {
	// The level drains continuously, so it is fractional: free attempts in
	// quick succession leave it a hair under free, which must already
	// count. Half an attempt is the tolerance, and the doubling is
	// continuous in the level.
	if level < p.free-0.5 {
		return 0
	}
	d := float64(p.base) * math.Exp2(min(level-p.free, 40))
	return time.Duration(min(d, float64(p.max)))
}

// wait is how much longer the subject must wait at now; zero admits.
func (p throttlePolicy) wait(st throttleState, now time.Time) time.Duration {
	return max(0, p.delay(st.Level)-max(0, now.Sub(st.UpdatedAt)))
}

// counted is the state after one more attempt at now.
func (p throttlePolicy) counted(st throttleState, now time.Time) throttleState {
	elapsed := max(0, now.Sub(st.UpdatedAt))
	st.Level = max(0, st.Level-float64(elapsed)/float64(p.drain)) + 1
	st.UpdatedAt = now
	return st
}

// throttleCheck is one subject under one policy.
type throttleCheck struct {
	policy  throttlePolicy
	subject string
}

// subject is a keyed hash of the policy and its parts, so the table holds
// neither e-mails nor addresses.
func (s *Service) subject(p throttlePolicy, parts ...string) throttleCheck {
	m := hmac.New(sha256.New, s.opts.SubjectKey)
	m.Write([]byte(p.kind))
	for _, part := range parts {
		m.Write([]byte{0})
		m.Write([]byte(part))
	}
	return throttleCheck{policy: p, subject: p.kind + ":" + hex.EncodeToString(m.Sum(nil)[:16])}
}

// addressKey is the unit of per-address throttling: an IPv4 address, or
// the /64 of an IPv6 one, since a single host commonly holds a whole /64.
// An unknown address is one shared bucket: it is throttled, not exempt.
func addressKey(addr netip.Addr) string {
	addr = addr.Unmap()
	switch {
	case !addr.IsValid():
		return "unknown"
	case addr.Is6():
		prefix, _ := addr.Prefix(64)
		return prefix.String()
	}
	return addr.String()
}

func (s *Service) signInChecks(email string, client netip.Addr) []throttleCheck {
	addr := addressKey(client)
	return []throttleCheck{s.subject(pairPolicy, email, addr), s.subject(addressPolicy, addr)}
}

// RateLimitedError is ErrRateLimited with the time the client must wait.
type RateLimitedError struct{ RetryAfter time.Duration }

func (e RateLimitedError) Error() string { return ErrRateLimited.Error() }

// Unwrap makes errors.Is(err, ErrRateLimited) hold.
func (e RateLimitedError) Unwrap() error { return ErrRateLimited }

// admit counts one attempt against every subject, or refuses with the
// longest remaining wait and counts nothing. Counting before the password
// is checked is what bounds parallel guessing: concurrent attempts see each
// other's counts. A refusal is cheap and the same for every e-mail, known
// or not.
func (s *Service) admit(ctx context.Context, checks ...throttleCheck) error {
	// PostgreSQL keeps microseconds; a rounded-up stored time must not
	// look like the future.
	now := s.now().UTC().Truncate(time.Microsecond)
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		states, err := lockThrottles(ctx, tx, subjectsOf(checks), now)
		if err != nil {
			return err
		}
		var wait time.Duration
		for _, c := range checks {
			wait = max(wait, c.policy.wait(states[c.subject], now))
		}
		if wait > 0 {
			return RateLimitedError{RetryAfter: wait}
		}
		for _, c := range checks {
			if err := saveThrottle(ctx, tx, c.policy.counted(states[c.subject], now)); err != nil {
				return err
			}
		}
		return nil
	})
}

// refund takes back one counted attempt from each subject (the attempt
// succeeded or was never checked). The time of the last attempt stays, so
// a refund never opens a wait that another attempt started.
func (s *Service) refund(ctx context.Context, checks ...throttleCheck) error {
	return refundThrottles(context.WithoutCancel(ctx), s.db, subjectsOf(checks))
}

// forget clears subjects: a correct password ends the throttling of its
// own (account, address) pair.
func (s *Service) forget(ctx context.Context, checks ...throttleCheck) error {
	return deleteThrottles(context.WithoutCancel(ctx), s.db, subjectsOf(checks))
}

// subjectsOf returns the subjects in a fixed order, so concurrent attempts
// lock the same rows in the same order.
func subjectsOf(checks []throttleCheck) []string {
	out := make([]string, 0, len(checks))
	for _, c := range checks {
		out = append(out, c.subject)
	}
	sort.Strings(out)
	return out
}
