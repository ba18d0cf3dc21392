package policy

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// ErrInvalid wraps fault.ErrValidation for policy inputs.
	ErrInvalid = fmt.Errorf("policy input: %w", fault.ErrValidation)
	// ErrSetNameTaken means another set of the organization has the name.
	ErrSetNameTaken = errors.New("policy set name taken")
	// ErrVersionNotPublished means an attachment named a version that is
	// pending or failed; only published versions can be attached.
	ErrVersionNotPublished = errors.New("policy version not published")
	// ErrAlreadyAttached means the set is already active at that scope.
	ErrAlreadyAttached = errors.New("policy set already attached at this scope")
	// ErrAttachmentDetached means a detach named an attachment that is no
	// longer active.
	ErrAttachmentDetached = errors.New("policy attachment already detached")
	// ErrCompletionConflict means a build completion disagrees with what is
	// committed: a changed digest, artifact, tenant, version or terminal
	// state. Publication never happens on a conflict.
	ErrCompletionConflict = errors.New("policy build completion conflicts with committed evidence")
	// ErrOverrideStale means an override named a result digest that is not
	// a current soft failure of the run.
	ErrOverrideStale = errors.New("policy result digest is not a current soft failure of this run")
	// ErrSourceMismatch means a rebuild named a source artifact with a
	// digest other than the committed one.
	ErrSourceMismatch = errors.New("policy source digest does not match the committed artifact")
	// ErrBuildNotAdmitted means launch control refused a build's start
	// (gate, suspension, region or policy release): the job waits.
	ErrBuildNotAdmitted = errors.New("launch control refused the policy build")
	// ErrBuildNoCapacity means the build region is at its sandbox
	// ceiling: the job waits.
	ErrBuildNoCapacity = errors.New("region at its sandbox ceiling")
	// ErrCheckCompleted means a plan commit found the run's policy check
	// already completed: its evaluation is bound and is never reserved
	// again.
	ErrCheckCompleted = errors.New("policy check already completed")
	// ErrEvaluationConflict means an evaluation was recorded for a check
	// that is bound to another one: another input digest, plan or attempt.
	// The check keeps what it has (SPEC §3: a different digest fails
	// closed).
	ErrEvaluationConflict = errors.New("policy evaluation conflicts with the check's bound evidence")
)

// SourceError is a refused policy source archive with its safe code.
type SourceError struct{ Code string }

func (e SourceError) Error() string { return "invalid policy source archive: " + e.Code }

// Failure codes of a version whose build did not publish (SPEC §3). They
// are the only build detail clients ever see.
const (
	FailureCompile       = "policy_compile_failed"
	FailureTests         = "policy_tests_failed"
	FailureBundle        = "policy_bundle_failed"
	FailureOutputBound   = "policy_output_bound_exceeded"
	FailureToolchain     = "policy_toolchain_unavailable"
	FailureOrchestration = "policy_orchestration_failed"
	// FailureLimit is a build stopped by its process's CPU-time, memory
	// or wall-clock limit, such as a test that loops or allocates forever
	// inside one built-in call.
	FailureLimit = "policy_build_limit_exceeded"
)

// FailureCodes lists every failure code.
var FailureCodes = []string{FailureCompile, FailureTests, FailureBundle, FailureOutputBound, FailureToolchain, FailureOrchestration,
	FailureLimit}
