package rego

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/cairnhq/cairn/api/platform/jsondoc"
)

// Decision bounds (the contract's finding limits, in characters).
const (
	MaxFindings             = 500
	MaxFindingIDChars       = 128
	MaxFindingTitleChars    = 160
	MaxFindingMessageChars  = 4000
	MaxResourceAddressChars = 512
	MaxDetailsDepth         = 8
	MaxDetailsKeys          = 256
	MaxDetailsBytes         = 16 << 10
	MaxDecisionBytes        = 512 << 10
)

// Decision is what a policy returns for one input. An empty Findings
// passes.
type Decision struct {
	Findings []Finding `json:"findings"`
}

// Finding is one thing a policy reports about a plan.
type Finding struct {
	ID              string         `json:"id"`
	Title           string         `json:"title"`
	Message         string         `json:"message"`
	ResourceAddress string         `json:"resource_address,omitempty"`
	Details         map[string]any `json:"details,omitempty"`
}

// Evaluate evaluates the policy's entrypoint against an input from
// ParseInput, within timeout, and validates the decision.
//
// Built-in errors are fatal, as they are in the build's tests, so a policy
// cannot pass by having a check error out quietly. OPA has no memory
// limit; the input's bounds, the timeout and the decision's bounds are
// what limit an evaluation. The decision is validated on OPA's own values
// before anything is converted, so an oversized result is refused without
// being copied.
//
// A verdict is an *EvalError: CodeDecisionUndefined, CodeDecisionInvalid,
// CodeEvaluationTimeout or CodeEvaluatorFailed (built-in errors, conflicting
// rule outputs). If ctx itself ends, the error wraps ctx.Err() instead.
func (p *Policy) Evaluate(ctx context.Context, input ast.Value, timeout time.Duration) (Decision, error) {
	if input == nil {
		return Decision{}, evalErr(CodeInputInvalid, "no input")
	}
	if timeout <= 0 {
		return Decision{}, fmt.Errorf("evaluating policy: timeout %v is not positive", timeout)
	}
	// OPA checks for cancellation only while it works; a short evaluation
	// would finish under a context that had already ended.
	if err := ctx.Err(); err != nil {
		return Decision{}, fmt.Errorf("evaluating policy: %w", err)
	}
	evalCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rs, err := p.query.Eval(evalCtx, rego.EvalParsedInput(input), rego.EvalGenerateJSON(keepTerm))
	if err != nil {
		if ctx.Err() != nil {
			return Decision{}, fmt.Errorf("evaluating policy: %w", ctx.Err())
		}
		if errors.Is(evalCtx.Err(), context.DeadlineExceeded) || topdown.IsCancel(err) {
			return Decision{}, evalErr(CodeEvaluationTimeout, fmt.Sprintf("no decision within %v", timeout))
		}
		return Decision{}, evalErr(CodeEvaluatorFailed, err.Error())
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return Decision{}, evalErr(CodeDecisionUndefined, Entrypoint+" is undefined for this input")
	}
	term, ok := rs[0].Expressions[0].Value.(*ast.Term)
	if !ok {
		return Decision{}, evalErr(CodeEvaluatorFailed, fmt.Sprintf("unexpected result type %T", rs[0].Expressions[0].Value))
	}
	return decisionFrom(term.Value)
}

// DecisionFromJSON validates a decision another process wrote (a sandboxed
// evaluator's), with the same rules Evaluate applies to OPA's result: the
// document must be one JSON object of at most MaxDecisionBytes holding
// exactly the bounded findings. Whatever the other process checked, this is
// the check that counts. Failures are *EvalError with CodeDecisionInvalid.
func DecisionFromJSON(doc []byte) (Decision, error) {
	if len(doc) > MaxDecisionBytes {
		return Decision{}, invalidDecision("decision is over %d bytes", MaxDecisionBytes)
	}
	if !utf8.Valid(doc) || !json.Valid(doc) {
		return Decision{}, invalidDecision("decision is not one valid JSON value")
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Decision{}, invalidDecision("decoding decision: %v", err)
	}
	value, err := ast.InterfaceToValue(v)
	if err != nil {
		return Decision{}, invalidDecision("converting decision: %v", err)
	}
	return decisionFrom(value)
}

// keepTerm leaves results as OPA values; the default converts the whole
// result to Go values before anyone can look at its size.
func keepTerm(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }

func invalidDecision(format string, args ...any) error {
	return evalErr(CodeDecisionInvalid, fmt.Sprintf(format, args...))
}

var findingsKey = ast.StringTerm("findings")

func decisionFrom(v ast.Value) (Decision, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return Decision{}, invalidDecision("decision is a %s, not an object", ast.ValueName(v))
	}
	findings := obj.Get(findingsKey)
	if findings == nil {
		return Decision{}, invalidDecision("decision has no findings")
	}
	if obj.Len() != 1 {
		return Decision{}, invalidDecision("decision has %d keys; only findings is allowed", obj.Len())
	}
	// A set is accepted as well as an array: "findings contains f if" is
	// how Rego collects findings, and a set's order is deterministic.
	var items []*ast.Term
	switch f := findings.Value.(type) {
	case *ast.Array:
		if f.Len() > MaxFindings {
			return Decision{}, invalidDecision("%d findings, over %d", f.Len(), MaxFindings)
		}
		items = make([]*ast.Term, 0, f.Len())
		f.Foreach(func(t *ast.Term) { items = append(items, t) })
	case ast.Set:
		if f.Len() > MaxFindings {
			return Decision{}, invalidDecision("%d findings, over %d", f.Len(), MaxFindings)
		}
		items = f.Slice()
	default:
		return Decision{}, invalidDecision("findings is a %s, not an array", ast.ValueName(findings.Value))
	}

	d := Decision{Findings: make([]Finding, 0, len(items))}
	ids := make(map[string]bool, len(items))
	for i, t := range items {
		f, err := findingFrom(t.Value)
		if err != nil {
			return Decision{}, invalidDecision("finding %d: %v", i, err)
		}
		if ids[f.ID] {
			return Decision{}, invalidDecision("finding %d: id is not unique", i)
		}
		ids[f.ID] = true
		d.Findings = append(d.Findings, f)
	}
	encoded, err := json.Marshal(d)
	if err != nil {
		return Decision{}, invalidDecision("encoding decision: %v", err)
	}
	if len(encoded) > MaxDecisionBytes {
		return Decision{}, invalidDecision("decision is %d bytes, over %d", len(encoded), MaxDecisionBytes)
	}
	// Findings are stored as jsonb, which refuses NUL; refusing here makes
	// it the policy's invalid decision rather than a failed commit.
	if err := jsondoc.CheckText(encoded); err != nil {
		return Decision{}, invalidDecision("decision holds a NUL character")
	}
	return d, nil
}

func findingFrom(v ast.Value) (Finding, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return Finding{}, fmt.Errorf("a %s, not an object", ast.ValueName(v))
	}
	var f Finding
	err := obj.Iter(func(k, val *ast.Term) error {
		key, ok := k.Value.(ast.String)
		if !ok {
			return fmt.Errorf("key %v is not a string", k)
		}
		var err error
		switch key {
		case "id":
			f.ID, err = boundedString(val.Value, string(key), MaxFindingIDChars)
		case "title":
			f.Title, err = boundedString(val.Value, string(key), MaxFindingTitleChars)
		case "message":
			f.Message, err = boundedString(val.Value, string(key), MaxFindingMessageChars)
		case "resource_address":
			f.ResourceAddress, err = boundedString(val.Value, string(key), MaxResourceAddressChars)
		case "details":
			f.Details, err = detailsFrom(val.Value)
		default:
			// Keys are policy text, not input; naming one is safe.
			err = fmt.Errorf("unknown key %q", limitText(string(key), 64))
		}
		return err
	})
	if err != nil {
		return Finding{}, err
	}
	switch {
	case f.ID == "":
		return Finding{}, errors.New("id is missing or empty")
	case f.Title == "":
		return Finding{}, errors.New("title is missing or empty")
	case f.Message == "":
		return Finding{}, errors.New("message is missing or empty")
	}
	return f, nil
}

func boundedString(v ast.Value, name string, maxChars int) (string, error) {
	s, ok := v.(ast.String)
	if !ok {
		return "", fmt.Errorf("%s is a %s, not a string", name, ast.ValueName(v))
	}
	// A character is at most 4 bytes; the byte check spares counting
	// runes in a huge string.
	if len(s) > 4*maxChars || utf8.RuneCountInString(string(s)) > maxChars {
		return "", fmt.Errorf("%s is longer than %d characters", name, maxChars)
	}
	return string(s), nil
}

func limitText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// detailsFrom bounds a finding's details on OPA's values first (depth,
// keys, and a running lower bound of the encoded size, so a huge value is
// refused without being converted), then converts it and checks its exact
// encoded size.
func detailsFrom(v ast.Value) (map[string]any, error) {
	if _, ok := v.(ast.Object); !ok {
		return nil, fmt.Errorf("details is a %s, not an object", ast.ValueName(v))
	}
	var keys, size int
	if err := checkDetails(v, 1, &keys, &size); err != nil {
		return nil, err
	}
	converted, err := ast.JSON(v)
	if err != nil {
		return nil, fmt.Errorf("converting details: %w", err)
	}
	details, ok := converted.(map[string]any)
	if !ok {
		return nil, errors.New("details did not convert to an object")
	}
	encoded, err := json.Marshal(details)
	if err != nil {
		return nil, fmt.Errorf("encoding details: %w", err)
	}
	if len(encoded) > MaxDetailsBytes {
		return nil, fmt.Errorf("details are %d bytes encoded, over %d", len(encoded), MaxDetailsBytes)
	}
	return details, nil
}

func checkDetails(v ast.Value, depth int, keys, size *int) error {
	if *size > MaxDetailsBytes {
		return fmt.Errorf("details are over %d bytes encoded", MaxDetailsBytes)
	}
	switch x := v.(type) {
	case ast.Object:
		if depth > MaxDetailsDepth {
			return fmt.Errorf("details are nested deeper than %d", MaxDetailsDepth)
		}
		*keys += x.Len()
		if *keys > MaxDetailsKeys {
			return fmt.Errorf("details have more than %d keys", MaxDetailsKeys)
		}
		*size += 2
		return x.Iter(func(k, val *ast.Term) error {
			key, ok := k.Value.(ast.String)
			if !ok {
				return fmt.Errorf("details key %v is not a string", k)
			}
			*size += len(key) + 4 // quotes, colon, comma
			return checkDetails(val.Value, depth+1, keys, size)
		})
	case *ast.Array:
		if depth > MaxDetailsDepth {
			return fmt.Errorf("details are nested deeper than %d", MaxDetailsDepth)
		}
		*size += 2
		return x.Iter(func(t *ast.Term) error {
			*size++
			return checkDetails(t.Value, depth+1, keys, size)
		})
	case ast.Set:
		if depth > MaxDetailsDepth {
			return fmt.Errorf("details are nested deeper than %d", MaxDetailsDepth)
		}
		*size += 2
		return x.Iter(func(t *ast.Term) error {
			*size++
			return checkDetails(t.Value, depth+1, keys, size)
		})
	case ast.String:
		*size += len(x) + 2
	case ast.Number:
		*size += len(x)
	case ast.Boolean:
		*size += 4
	case ast.Null:
		*size += 4
	default:
		return fmt.Errorf("details hold a %s", ast.ValueName(v))
	}
	if *size > MaxDetailsBytes {
		return fmt.Errorf("details are over %d bytes encoded", MaxDetailsBytes)
	}
	return nil
}
