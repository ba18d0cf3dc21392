package dispatch

import (
	"time"
)

// Reconciliation bounds (SPEC §8): every five minutes at most 25 due
// records, each claimed for 60 seconds, redelivered with a backoff from
// 5 s to 5 min.
const (
	ReconcileBatch    = 25
	ReconcileClaim    = 60 * time.Second
	ReconcileInterval = 5 * time.Minute
	backoffFirst      = 5 * time.Second
	backoffMax        = 5 * time.Minute
)

// Record is one durable workflow dispatch.
type Record struct {
	ID             string     `db:"id"`
	Kind           string     `db:"kind"`
	OrganizationID string     `db:"organization_id"`
	SubjectID      string     `db:"subject_id"`
	Status         string     `db:"status"`
	Deliveries     int        `db:"deliveries"`
	Starts         int        `db:"starts"`
	Checks         int        `db:"checks"`
	NextAttemptAt  time.Time  `db:"next_attempt_at"`
	ClaimedUntil   *time.Time `db:"claimed_until"`
	CreatedAt      time.Time  `db:"created_at"`
	CompletedAt    *time.Time `db:"completed_at"`
}

// Record statuses.
const (
	StatusPending   = "pending"
	StatusCompleted = "completed"
)

// ID is the deterministic identity of a kind's dispatch for a subject.
func ID(kind, subjectID string) string { return kind + "-" + subjectID }

// Backoff is the delay before the nth visit of a dispatch: 5 s doubling up
// to 5 min.
func Backoff(n int) time.Duration {
	d := backoffFirst
	for i := 1; i < n && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// Outcome is what a kind's handler found when the reconciler visited one
// of its records.
type Outcome int

const (
	// Settled: the subject no longer needs its job; the record completes.
	Settled Outcome = iota
	// Redelivered: no job was live, and one was inserted afresh.
	Redelivered
	// Waiting: the job is still queued, scheduled, retrying or running;
	// the record is looked at again after its backoff.
	Waiting
	// Failed: the handler gave up on the subject (and settled it in the
	// reconciler's transaction); the record completes.
	Failed
)

// Report says what one reconciler tick did.
type Report struct {
	// Claimed is how many due records the tick took (at most ReconcileBatch).
	Claimed int
	// Redelivered counts jobs inserted afresh because none was live.
	Redelivered int
	// Waiting counts records whose job is still queued or running: checked
	// again after the backoff, not counted as a delivery.
	Waiting int
	// Closed counts records whose subject had already settled.
	Closed int
	// Failed counts subjects a handler gave up on.
	Failed int
}
