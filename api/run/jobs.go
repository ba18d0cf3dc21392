package run

import (
	"time"

	"github.com/riverqueue/river"
)

// QueueRuns is the River queue of run phases.
const QueueRuns = "runs"

// PhaseArgs is one phase attempt's job. The attempt row, not the job, is
// the authority: a job whose attempt is no longer queued does nothing, so a
// rescued or replayed job can never run a phase twice.
type PhaseArgs struct {
	RunID     string `json:"run_id"`
	AttemptID string `json:"attempt_id"`
	Phase     string `json:"phase"`
}

// Kind names the job.
func (PhaseArgs) Kind() string { return "run_phase" }

// InsertOpts routes phases to their queue. Retries of the job itself are
// for infrastructure hiccups before a sandbox starts; the attempt fence
// keeps them safe.
func (PhaseArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueRuns, MaxAttempts: 10}
}

// ExpiryArgs ends a run whose approval deadline passed.
type ExpiryArgs struct {
	RunID string `json:"run_id"`
}

// Kind names the job.
func (ExpiryArgs) Kind() string { return "run_approval_expiry" }

// InsertOpts keeps expiries on the default queue.
func (ExpiryArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 25} }

// ReapArgs finds attempts whose worker stopped heartbeating.
type ReapArgs struct{}

// Kind names the job.
func (ReapArgs) Kind() string { return "run_attempt_reaper" }

// InsertOpts keeps one reaper at a time.
func (ReapArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByPeriod: time.Second}}
}
