package engine

import (
	"fmt"

	"github.com/cairnhq/cairn/api/policy/rego"
)

// The engine's verdicts are package rego's typed errors, so the processes
// that read them (the worker, the API) need not link the engine.

func buildErr(code, detail string) *rego.BuildError {
	return &rego.BuildError{Code: code, Detail: detail}
}

func evalErr(code, detail string) *rego.EvalError { return &rego.EvalError{Code: code, Detail: detail} }

func invalidInput(format string, args ...any) error {
	return evalErr(rego.CodeInputInvalid, fmt.Sprintf(format, args...))
}

func inputTooLarge(format string, args ...any) error {
	return evalErr(rego.CodeInputTooLarge, fmt.Sprintf(format, args...))
}

func invalidDecision(format string, args ...any) error {
	return evalErr(rego.CodeDecisionInvalid, fmt.Sprintf(format, args...))
}
