package engine

import (
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/cairnhq/cairn/api/policy/rego"
)

// ParseInput validates a cairn.policy.input/v1 document (rego.CheckInput:
// bounds on the raw bytes, then the schema) and converts it to an OPA value
// once, so it can be evaluated against every attached policy without
// converting it again. Failures are *rego.EvalError with CodeInputInvalid
// or CodeInputTooLarge.
func ParseInput(doc []byte) (ast.Value, error) {
	m, err := rego.CheckInput(doc)
	if err != nil {
		return nil, err
	}
	v, err := ast.InterfaceToValue(m)
	if err != nil {
		return nil, invalidInput("converting input: %v", err)
	}
	return v, nil
}
