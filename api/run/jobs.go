package run

import (
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
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

// TriggerArgs fans an applied run out to the workspaces whose run triggers
// name its workspace (jobs/runtrigger). Its identity is the run's
// (run-trigger-{run_id}, unique by its arguments): one job per applied run, and the runs it creates
// are unique per (run, destination), so a retry creates none twice.
type TriggerArgs struct {
	RunID string `json:"run_id"`
}

// Kind names the job.
func (TriggerArgs) Kind() string { return "run_trigger" }

// InsertOpts makes the fan-out unique per run, whatever state an earlier
// insert's job is in.
func (TriggerArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 10, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStateCompleted, rivertype.JobStatePending, rivertype.JobStateRetryable,
		rivertype.JobStateRunning, rivertype.JobStateScheduled, rivertype.JobStateCancelled, rivertype.JobStateDiscarded}}}
}
