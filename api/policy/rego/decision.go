package rego

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

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

// DecisionFromJSON is the one set of decision rules: the document must be
// one JSON object of at most MaxDecisionBytes holding exactly the bounded
// findings. The worker applies it to what a sandboxed evaluation wrote,
// and the engine to OPA's own result (written out through a bounded
// writer), so whatever produced a decision, this is the check that counts.
// Failures are *EvalError with CodeDecisionInvalid.
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
	return decisionFrom(v)
}

func invalidDecision(format string, args ...any) error {
	return evalErr(CodeDecisionInvalid, fmt.Sprintf(format, args...))
}

func decisionFrom(v any) (Decision, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return Decision{}, invalidDecision("decision is %s, not an object", jsonKind(v))
	}
	findings, ok := obj["findings"]
	if !ok {
		return Decision{}, invalidDecision("decision has no findings")
	}
	if len(obj) != 1 {
		return Decision{}, invalidDecision("decision has %d keys; only findings is allowed", len(obj))
	}
	items, ok := findings.([]any)
	if !ok {
		return Decision{}, invalidDecision("findings is %s, not an array", jsonKind(findings))
	}
	if len(items) > MaxFindings {
		return Decision{}, invalidDecision("%d findings, over %d", len(items), MaxFindings)
	}
	d := Decision{Findings: make([]Finding, 0, len(items))}
	ids := make(map[string]bool, len(items))
	for i, item := range items {
		f, err := findingFrom(item)
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

func findingFrom(v any) (Finding, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return Finding{}, fmt.Errorf("%s, not an object", jsonKind(v))
	}
	var f Finding
	for key, val := range obj {
		var err error
		switch key {
		case "id":
			f.ID, err = boundedString(val, key, MaxFindingIDChars)
		case "title":
			f.Title, err = boundedString(val, key, MaxFindingTitleChars)
		case "message":
			f.Message, err = boundedString(val, key, MaxFindingMessageChars)
		case "resource_address":
			f.ResourceAddress, err = boundedString(val, key, MaxResourceAddressChars)
		case "details":
			f.Details, err = detailsFrom(val)
		default:
			// Keys are policy text, not input; naming one is safe.
			err = fmt.Errorf("unknown key %q", limitText(key, 64))
		}
		if err != nil {
			return Finding{}, err
		}
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

func boundedString(v any, name string, maxChars int) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s is %s, not a string", name, jsonKind(v))
	}
	// A character is at most 4 bytes; the byte check spares counting
	// runes in a huge string.
	if len(s) > 4*maxChars || utf8.RuneCountInString(s) > maxChars {
		return "", fmt.Errorf("%s is longer than %d characters", name, maxChars)
	}
	return s, nil
}

func limitText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// detailsFrom bounds a finding's details: nesting, keys in all, and their
// exact encoded size.
func detailsFrom(v any) (map[string]any, error) {
	details, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("details is %s, not an object", jsonKind(v))
	}
	keys := 0
	if err := checkDetails(details, 1, &keys); err != nil {
		return nil, err
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

func checkDetails(v any, depth int, keys *int) error {
	switch x := v.(type) {
	case map[string]any:
		if depth > MaxDetailsDepth {
			return fmt.Errorf("details are nested deeper than %d", MaxDetailsDepth)
		}
		*keys += len(x)
		if *keys > MaxDetailsKeys {
			return fmt.Errorf("details have more than %d keys", MaxDetailsKeys)
		}
		for _, val := range x {
			if err := checkDetails(val, depth+1, keys); err != nil {
				return err
			}
		}
	case []any:
		if depth > MaxDetailsDepth {
			return fmt.Errorf("details are nested deeper than %d", MaxDetailsDepth)
		}
		for _, val := range x {
			if err := checkDetails(val, depth+1, keys); err != nil {
				return err
			}
		}
	case string, json.Number, bool, nil:
	default:
		return fmt.Errorf("details hold %s", jsonKind(v))
	}
	return nil
}

// jsonKind names a decoded JSON value's kind for an operator's message.
func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("a %T", v)
}
