package rego

import "errors"

// Failure codes of a build. They are safe to show to clients and match the
// failure codes a policy version records.
const (
	CodeCompileFailed        = "policy_compile_failed"
	CodeTestsFailed          = "policy_tests_failed"
	CodeBundleFailed         = "policy_bundle_failed"
	CodeOutputBoundExceeded  = "policy_output_bound_exceeded"
	CodeToolchainUnavailable = "policy_toolchain_unavailable"
)

// Error codes of input preparation and evaluation. They are safe to persist
// with an evaluation result; each one makes the outcome "error".
const (
	CodeInputInvalid        = "policy_input_invalid"
	CodeInputTooLarge       = "policy_input_too_large"
	CodeInputSecretDetected = "policy_input_secret_detected"
	CodeDecisionUndefined   = "policy_decision_undefined"
	CodeDecisionInvalid     = "policy_decision_invalid"
	CodeEvaluationTimeout   = "policy_evaluation_timeout"
	CodeEvaluatorFailed     = "policy_evaluator_failed"
	// CodeEvaluationCPULimit and CodeEvaluationMemoryLimit are an
	// evaluation stopped by its process's CPU-time or memory ceiling:
	// work a timeout cannot interrupt, such as one built-in call that
	// loops or allocates without end.
	CodeEvaluationCPULimit    = "policy_evaluation_cpu_limit"
	CodeEvaluationMemoryLimit = "policy_evaluation_memory_limit"
	// CodeBundleUnavailable and CodeBundleMismatch are a snapshotted
	// bundle that could not be read, or whose bytes are not the ones the
	// run captured.
	CodeBundleUnavailable = "policy_bundle_unavailable"
	CodeBundleMismatch    = "policy_bundle_digest_mismatch"
)

// BuildError is a build that reached a verdict: the policy set is at fault
// (or, for CodeToolchainUnavailable, this binary's manifest), not the
// machine running the build, so retrying cannot help.
type BuildError struct {
	// Code is one of the Code* build constants; the only part a client
	// ever sees.
	Code string
	// Detail explains the failure for operators' logs: compiler messages,
	// file names, failing tests. It may quote policy source, so it never
	// goes into an API response, an audit event or a stored result.
	Detail string
}

func (e *BuildError) Error() string { return "policy build failed: " + e.Code + ": " + e.Detail }

// EvalError is an input or evaluation that failed closed. Code is one of
// the input and evaluation Code* constants.
type EvalError struct {
	// Code is the safe code recorded with the evaluation result.
	Code string
	// Detail explains the failure for operators' logs only. It may quote
	// policy source or input values, so it never goes into an API response
	// or a stored result.
	Detail string
}

func (e *EvalError) Error() string { return "policy evaluation failed: " + e.Code + ": " + e.Detail }

// CodeOf returns the safe code of a *BuildError or *EvalError in err's
// chain, or "" if there is none (a cancelled context or a failing reader,
// which are not verdicts on the policy or its input).
func CodeOf(err error) string {
	var be *BuildError
	if errors.As(err, &be) {
		return be.Code
	}
	var ee *EvalError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ""
}

func evalErr(code, detail string) *EvalError { return &EvalError{Code: code, Detail: detail} }
