package engine

import (
	"encoding/json"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/internal/jsonscan"
)

// InputValue converts an input document that BuildInput or ParseInput has
// already checked into the value Evaluate takes, for a process that
// received the document from one that checked it (an evaluation process
// from its worker). It checks only what keeps the conversion itself sound
// (at most MaxInputBytes, one valid JSON object, nested at most
// MaxInputDepth) and builds OPA's value straight from the bytes, without
// the map of Go values ParseInput goes through: about twice as fast, which
// matters when every evaluation of a run converts the same input in its
// own process. Failures are *EvalError with CodeInputInvalid or
// CodeInputTooLarge.
func InputValue(doc []byte) (ast.Value, error) {
	if len(doc) > rego.MaxInputBytes {
		return nil, inputTooLarge("input is %d bytes, over %d", len(doc), rego.MaxInputBytes)
	}
	if !json.Valid(doc) {
		return nil, invalidInput("input is not a single valid JSON value")
	}
	p := valueParser{doc: doc}
	p.space()
	if p.doc[p.i] != '{' {
		return nil, invalidInput("input is not a JSON object")
	}
	t, err := p.value(0)
	if err != nil {
		return nil, err
	}
	return t.Value, nil
}

// valueParser walks a document json.Valid accepted, so it checks nesting
// and nothing else.
type valueParser struct {
	doc []byte
	i   int
}

func (p *valueParser) space() {
	for p.i < len(p.doc) && slices.Contains([]byte(" \t\n\r"), p.doc[p.i]) {
		p.i++
	}
}

func (p *valueParser) value(depth int) (*ast.Term, error) {
	p.space()
	switch p.doc[p.i] {
	case '{':
		if depth >= rego.MaxInputDepth {
			return nil, inputTooLarge("input is nested deeper than %d", rego.MaxInputDepth)
		}
		p.i++
		var pairs [][2]*ast.Term
		for p.space(); p.doc[p.i] != '}'; p.space() {
			if p.doc[p.i] == ',' {
				p.i++
				p.space()
			}
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			p.space()
			p.i++ // the colon
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			pairs = append(pairs, [2]*ast.Term{k, v})
		}
		p.i++
		return ast.ObjectTerm(pairs...), nil
	case '[':
		if depth >= rego.MaxInputDepth {
			return nil, inputTooLarge("input is nested deeper than %d", rego.MaxInputDepth)
		}
		p.i++
		var items []*ast.Term
		for p.space(); p.doc[p.i] != ']'; p.space() {
			if p.doc[p.i] == ',' {
				p.i++
			}
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		p.i++
		return ast.ArrayTerm(items...), nil
	case '"':
		return p.str()
	case 't':
		p.i += len("true")
		return ast.BooleanTerm(true), nil
	case 'f':
		p.i += len("false")
		return ast.BooleanTerm(false), nil
	case 'n':
		p.i += len("null")
		return ast.NullTerm(), nil
	}
	start := p.i
	for p.i < len(p.doc) && !slices.Contains([]byte(",]} \t\n\r"), p.doc[p.i]) {
		p.i++
	}
	// The number's own text, as ParseInput keeps it (json.Number).
	return ast.NumberTerm(json.Number(p.doc[start:p.i])), nil
}

// str reads the string at p.i; most have no escapes and need no decoding.
func (p *valueParser) str() (*ast.Term, error) {
	end := jsonscan.StringEnd(p.doc, p.i)
	quoted := p.doc[p.i : end+1]
	p.i = end + 1
	raw := quoted[1 : len(quoted)-1]
	if !slices.Contains(raw, '\\') {
		return ast.StringTerm(string(raw)), nil
	}
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return nil, invalidInput("input has a bad string: %v", err)
	}
	return ast.StringTerm(s), nil
}
