package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	opa "github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/cairnhq/cairn/api/policy/rego"
)

// Evaluate evaluates the policy's entrypoint against an input from
// ParseInput or InputValue, within timeout, and validates the decision.
//
// Built-in errors are fatal, as they are in the build's tests, so a policy
// cannot pass by having a check error out quietly. OPA has no memory
// limit; the input's bounds, the timeout and the decision's bounds are
// what limit an evaluation. The decision is written out as JSON from OPA's
// own values through a writer bounded at rego.MaxDecisionBytes, so an
// oversized result is refused without being copied, and then judged by
// rego.DecisionFromJSON: the rules a worker applies to a sandboxed
// evaluation's output are the rules applied here.
//
// A verdict is a *rego.EvalError: CodeDecisionUndefined,
// CodeDecisionInvalid, CodeEvaluationTimeout or CodeEvaluatorFailed
// (built-in errors, conflicting rule outputs). If ctx itself ends, the
// error wraps ctx.Err() instead.
func (p *Policy) Evaluate(ctx context.Context, input ast.Value, timeout time.Duration) (rego.Decision, error) {
	if input == nil {
		return rego.Decision{}, evalErr(rego.CodeInputInvalid, "no input")
	}
	if timeout <= 0 {
		return rego.Decision{}, fmt.Errorf("evaluating policy: timeout %v is not positive", timeout)
	}
	// OPA checks for cancellation only while it works; a short evaluation
	// would finish under a context that had already ended.
	if err := ctx.Err(); err != nil {
		return rego.Decision{}, fmt.Errorf("evaluating policy: %w", err)
	}
	evalCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rs, err := p.query.Eval(evalCtx, opa.EvalParsedInput(input), opa.EvalGenerateJSON(keepTerm))
	if err != nil {
		if ctx.Err() != nil {
			return rego.Decision{}, fmt.Errorf("evaluating policy: %w", ctx.Err())
		}
		if errors.Is(evalCtx.Err(), context.DeadlineExceeded) || topdown.IsCancel(err) {
			return rego.Decision{}, evalErr(rego.CodeEvaluationTimeout, fmt.Sprintf("no decision within %v", timeout))
		}
		return rego.Decision{}, evalErr(rego.CodeEvaluatorFailed, err.Error())
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return rego.Decision{}, evalErr(rego.CodeDecisionUndefined, rego.Entrypoint+" is undefined for this input")
	}
	term, ok := rs[0].Expressions[0].Value.(*ast.Term)
	if !ok {
		return rego.Decision{}, evalErr(rego.CodeEvaluatorFailed, fmt.Sprintf("unexpected result type %T", rs[0].Expressions[0].Value))
	}
	return decisionOf(term.Value)
}

// keepTerm leaves results as OPA values; the default converts the whole
// result to Go values before anyone can look at its size.
func keepTerm(t *ast.Term, _ *opa.EvalContext) (any, error) { return t, nil }

// maxDecisionNesting is the deepest a valid decision's containers go: the
// decision, its findings, a finding and its details, then the details' own
// rego.MaxDetailsDepth levels. Anything deeper is refused before it is
// walked further.
const maxDecisionNesting = 3 + rego.MaxDetailsDepth

// decisionOf writes OPA's result as one JSON document of at most
// rego.MaxDecisionBytes and validates it with rego.DecisionFromJSON.
func decisionOf(v ast.Value) (rego.Decision, error) {
	var buf bytes.Buffer
	if err := writeJSON(&boundedWriter{w: &buf, limit: rego.MaxDecisionBytes}, v, 0); err != nil {
		if errors.Is(err, errBound) {
			return rego.Decision{}, invalidDecision("decision is over %d bytes", rego.MaxDecisionBytes)
		}
		return rego.Decision{}, invalidDecision("%v", err)
	}
	return rego.DecisionFromJSON(buf.Bytes())
}

// writeJSON writes an OPA value as JSON, stopping at the writer's first
// error. A set is written as an array in its sorted order ("findings
// contains f if" is how Rego collects findings); an object key must be a
// string, where encoding it as JSON would quietly turn 1 into "1".
func writeJSON(w io.Writer, v ast.Value, depth int) error {
	switch v.(type) {
	case ast.Object, *ast.Array, ast.Set:
		if depth > maxDecisionNesting {
			return fmt.Errorf("decision is nested deeper than %d", maxDecisionNesting)
		}
	}
	var err error
	write := func(s string) {
		if err == nil {
			_, err = io.WriteString(w, s)
		}
	}
	switch x := v.(type) {
	case ast.Object:
		write("{")
		first := true
		iterErr := x.Iter(func(k, val *ast.Term) error {
			key, ok := k.Value.(ast.String)
			if !ok {
				return fmt.Errorf("object key %v is a %s, not a string", limitTerm(k), ast.ValueName(k.Value))
			}
			if !first {
				write(",")
			}
			first = false
			if len(key) > rego.MaxDecisionBytes {
				return errBound
			}
			write(jsonString(string(key)))
			write(":")
			if err != nil {
				return err
			}
			return writeJSON(w, val.Value, depth+1)
		})
		if iterErr != nil {
			return iterErr
		}
		write("}")
	case *ast.Array:
		write("[")
		for i := range x.Len() {
			if i > 0 {
				write(",")
			}
			if err != nil {
				return err
			}
			if err := writeJSON(w, x.Elem(i).Value, depth+1); err != nil {
				return err
			}
		}
		write("]")
	case ast.Set:
		write("[")
		for i, t := range x.Slice() {
			if i > 0 {
				write(",")
			}
			if err != nil {
				return err
			}
			if err := writeJSON(w, t.Value, depth+1); err != nil {
				return err
			}
		}
		write("]")
	case ast.String:
		// Quoting copies the string: one past the bound is refused first.
		if len(x) > rego.MaxDecisionBytes {
			return errBound
		}
		write(jsonString(string(x)))
	case ast.Number:
		write(string(x))
	case ast.Boolean:
		write(fmt.Sprint(bool(x)))
	case ast.Null:
		write("null")
	default:
		return fmt.Errorf("decision holds a %s", ast.ValueName(v))
	}
	return err
}

// jsonString quotes s as JSON without HTML escaping, which would only make
// "<" count six bytes against the bound instead of one.
func jsonString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// limitTerm shows at most 64 bytes of a key, which is policy text.
func limitTerm(t *ast.Term) string {
	s := t.String()
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
}
