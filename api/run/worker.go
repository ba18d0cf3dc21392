package run

import (
	"context"
	"database/sql/driver"
	"fmt"
	"regexp"
)

// WorkerIdentity is what the worker that ran an attempt was, as that worker
// recorded it when the attempt started (RecordWorker). The run review's
// evidence identities come from these records only; a field a worker could
// not tell is left empty and reported as not recorded.
type WorkerIdentity struct {
	// WorkflowID names the job that ran the attempt: its kind and ID.
	WorkflowID string `json:"workflow_id,omitempty"`
	// DefinitionSHA is the full commit ID of the source the worker, and so
	// the runner's phase workflow, was built from.
	DefinitionSHA string `json:"definition_sha,omitempty"`
	// BuildSHA is the SHA-256 of the worker's executable, which is also the
	// program its sandboxed policy evaluations run.
	BuildSHA string `json:"build_sha,omitempty"`
	// Version is the worker's build version.
	Version string `json:"version,omitempty"`
	// Protocol is the state protocol the runner's sandboxed CLI speaks.
	Protocol string `json:"protocol,omitempty"`
	// PolicyEngine is the policy engine linked into the worker, which
	// evaluates the plan phase's policies.
	PolicyEngine string `json:"policy_engine,omitempty"`
}

// Scan reads a jsonb column.
func (w *WorkerIdentity) Scan(src any) error { return scanJSON(src, w) }

// Value writes a jsonb column.
func (w WorkerIdentity) Value() (driver.Value, error) { return valueJSON(w) }

var (
	workflowIDPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}-[0-9]{1,19}$`)
	commitPattern     = regexp.MustCompile(`^[0-9a-f]{40}$`)
	sha256Pattern     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	buildNamePattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+/-]{0,127}$`)
)

// wellFormed is w without the fields that are not what they claim to be,
// so a review never shows free text as evidence: a malformed field counts
// as one the worker could not tell.
func (w WorkerIdentity) wellFormed() WorkerIdentity {
	keep := func(value string, pattern *regexp.Regexp) string {
		if pattern.MatchString(value) {
			return value
		}
		return ""
	}
	return WorkerIdentity{WorkflowID: keep(w.WorkflowID, workflowIDPattern), DefinitionSHA: keep(w.DefinitionSHA, commitPattern),
		BuildSHA: keep(w.BuildSHA, sha256Pattern), Version: keep(w.Version, buildNamePattern), Protocol: keep(w.Protocol, buildNamePattern),
		PolicyEngine: keep(w.PolicyEngine, buildNamePattern)}
}

// RecordWorker records the worker that runs an attempt (its well-formed
// fields), once, while the attempt runs under workerID;
// ErrAttemptNotCurrent otherwise.
func (s *Service) RecordWorker(ctx context.Context, attemptID, workerID string, w WorkerIdentity) error {
	res, err := s.db.ExecContext(ctx, `UPDATE run_attempts SET worker_identity = $3
		WHERE id = $1 AND worker_id = $2 AND status = 'running' AND worker_identity IS NULL`, attemptID, workerID, w.wellFormed())
	if err != nil {
		return fmt.Errorf("recording the attempt's worker: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return ErrAttemptNotCurrent
	}
	return nil
}

// RecordedWorkers picks, from a run's attempts in the order they were
// queued, the newest that recorded its worker, and the newest plan attempt
// that did: the policy stage is evaluated in the plan phase, by its
// worker's engine. Either is nil while no such record exists.
func RecordedWorkers(attempts []Attempt) (latest, plan *WorkerIdentity) {
	for _, a := range attempts {
		if a.Worker == nil {
			continue
		}
		latest = a.Worker
		if a.Phase == PhasePlan {
			plan = a.Worker
		}
	}
	return latest, plan
}
