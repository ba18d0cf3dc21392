package run

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// ErrAutoApply means a request asked for auto-apply: Cairn never
	// applies without a human decision.
	ErrAutoApply = fmt.Errorf("%w: auto_apply is not supported; every apply needs an approval", fault.ErrValidation)
	// ErrDestroy means a request asked for a destroy-mode run.
	ErrDestroy = fmt.Errorf("%w: destroy-mode runs are not supported", fault.ErrValidation)
	// ErrInvalid wraps fault.ErrValidation for run inputs.
	ErrInvalid = fmt.Errorf("run input: %w", fault.ErrValidation)
	// ErrStaleBinding means an approval or rejection named a review that is
	// not the run's current one.
	ErrStaleBinding = errors.New("review binding is stale")
	// ErrActionNotAllowed means the run is not in a status where the action
	// applies (approve after apply, cancel of a finished run, ...).
	ErrActionNotAllowed = errors.New("action not allowed in the run's status")
	// ErrQueueNotDiscardable means a force-execute found a run ahead of
	// its target that cannot be discarded: it is planning, applying,
	// approved or in recovery.
	ErrQueueNotDiscardable = errors.New("a run ahead in the workspace's queue cannot be discarded")
	// ErrConfigurationNotReady means the configuration version has no
	// validated archive yet.
	ErrConfigurationNotReady = errors.New("configuration version not uploaded")
	// ErrConfigurationCurrent means an archive request named the
	// workspace's current configuration version.
	ErrConfigurationCurrent = errors.New("configuration version is current")
	// ErrConfigurationNotArchivable means a version that is not uploaded,
	// or that an unfinished run uses, was asked to be archived.
	ErrConfigurationNotArchivable = errors.New("configuration version cannot be archived")
	// ErrConfigurationUploaded means a second upload to a finished version.
	ErrConfigurationUploaded = errors.New("configuration version already uploaded")
	// ErrArchiveTooLarge means the archive crossed 100,000,000 bytes.
	ErrArchiveTooLarge = errors.New("configuration archive over its limit")
	// ErrRecoveryLeaseHeld means another principal holds the recovery lease.
	ErrRecoveryLeaseHeld = errors.New("recovery lease held by another principal")
	// ErrRecoveryEvidence means the recovery request's evidence does not
	// match what is recorded (or changed since preparation).
	ErrRecoveryEvidence = errors.New("recovery evidence does not match")
	// ErrRecoveryConfirmation means a required confirmation flag is missing.
	ErrRecoveryConfirmation = fmt.Errorf("%w: recovery confirmation required", fault.ErrValidation)
	// ErrPolicyGateClosed means an approval came while the policy gate is
	// closed: a blocking outcome, or soft failures without valid overrides.
	ErrPolicyGateClosed = errors.New("policy gate closed")
	// ErrApprovalNotDue means an expiry came before the run's approval
	// deadline on this process's clock: the run still waits, and the expiry
	// must come again.
	ErrApprovalNotDue = errors.New("approval deadline not reached")
	// ErrArtifactUnavailable means a run artifact is not recorded (yet).
	ErrArtifactUnavailable = errors.New("artifact not recorded")
	// ErrStateMoved means a new state became current after the plan read
	// the one it was made against.
	ErrStateMoved = errors.New("state changed during plan")
	// ErrAlreadyReleased means an agent's run was released before: a
	// person's run with its credentials exists already.
	ErrAlreadyReleased = errors.New("run already released")
	// ErrNotReleasable means a release named a run that no agent started.
	ErrNotReleasable = errors.New("only a run an agent started can be released")
	// ErrUntrustedInputs means an untrusted or speculative run's snapshot
	// names something secret it must never get (a sensitive variable, a
	// credential): it fails closed rather than plan with it.
	ErrUntrustedInputs = errors.New("an untrusted run's inputs name a secret")
)

// ArchiveError is a rejected configuration archive with its safe code.
type ArchiveError struct{ Code string }

func (e ArchiveError) Error() string { return "invalid configuration archive: " + e.Code }
