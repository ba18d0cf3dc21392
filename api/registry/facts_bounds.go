package registry

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Bounds on the configuration terraform-config-inspect parses in this
// process. Its HCL parser recurses once per nesting level and keeps every
// file's syntax tree, so an archive within the archive rules could
// otherwise exhaust memory, or overflow the stack, which no recover
// survives, with a few kilobytes of brackets.
const (
	// maxConfigFileBytes bounds one configuration file.
	maxConfigFileBytes = 1 << 20
	// maxConfigBytes bounds all configuration files read for one
	// version's facts, root and submodules together.
	maxConfigBytes = 8 << 20
	// maxConfigNesting bounds how deeply an expression or block may
	// nest: brackets, braces, parentheses, strings and template
	// sequences, plus the operators and template directives that nest
	// within one of them.
	maxConfigNesting = 500
)

// Codes of versions whose configuration is over those bounds.
const (
	CodeConfigTooLarge = "module_configuration_too_large"
	CodeConfigTooDeep  = "module_configuration_too_deep"
)

// configBudget is what is left of maxConfigBytes for the facts of one
// version.
type configBudget struct{ left int64 }

func newConfigBudget() *configBudget { return &configBudget{left: maxConfigBytes} }

// check reads the configuration files of dir as terraform-config-inspect
// will, and refuses them before they are parsed when one is too large,
// all of them together are, or one nests too deeply.
func (b *configBudget) check(t tofuFS, dir string) error {
	infos, err := t.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing module configuration: %w", err)
	}
	for _, info := range infos {
		name := path.Join(dir, info.Name())
		if info.Size() > maxConfigFileBytes || info.Size() > b.left {
			return &factsError{CodeConfigTooLarge, fmt.Sprintf(
				"the module's configuration files are over %d bytes each or %d bytes together", maxConfigFileBytes, maxConfigBytes)}
		}
		b.left -= info.Size()
		src, err := t.ReadFile(name)
		if err != nil {
			return fmt.Errorf("reading module configuration: %w", err)
		}
		if int64(len(src)) > maxConfigFileBytes {
			return &factsError{CodeConfigTooLarge, "a module configuration file grew while it was read"}
		}
		depth := nativeNesting(src, false)
		if strings.HasSuffix(name, ".json") {
			depth = jsonNesting(src)
		}
		if depth > maxConfigNesting {
			return &factsError{CodeConfigTooDeep, fmt.Sprintf(
				"%s nests more than %d levels deep", strconv.QuoteToASCII(clip(t.real(name), 200)), maxConfigNesting)}
		}
	}
	return nil
}

// nestingOperators nest one more level per occurrence within one list
// item, attribute or argument: unary and binary operators build trees as
// deep as their chain, a conditional nests its false branch, a splat
// (".*") its follower.
var nestingOperators = map[hclsyntax.TokenType]bool{
	hclsyntax.TokenStar: true, hclsyntax.TokenSlash: true, hclsyntax.TokenPlus: true, hclsyntax.TokenMinus: true,
	hclsyntax.TokenPercent: true, hclsyntax.TokenEqualOp: true, hclsyntax.TokenNotEqual: true,
	hclsyntax.TokenLessThan: true, hclsyntax.TokenLessThanEq: true, hclsyntax.TokenGreaterThan: true,
	hclsyntax.TokenGreaterThanEq: true, hclsyntax.TokenAnd: true, hclsyntax.TokenOr: true, hclsyntax.TokenBang: true,
	hclsyntax.TokenQuestion: true,
}

var openers = map[hclsyntax.TokenType]bool{
	hclsyntax.TokenOBrace: true, hclsyntax.TokenOBrack: true, hclsyntax.TokenOParen: true, hclsyntax.TokenOQuote: true,
	hclsyntax.TokenOHeredoc: true,
}

var closers = map[hclsyntax.TokenType]bool{
	hclsyntax.TokenCBrace: true, hclsyntax.TokenCBrack: true, hclsyntax.TokenCParen: true, hclsyntax.TokenCQuote: true,
	hclsyntax.TokenCHeredoc: true, hclsyntax.TokenTemplateSeqEnd: true,
}

// nativeNesting is an upper bound of how deeply HCL's parser recurses on
// src (native syntax, or a template when template is set), read from its
// tokens, which the lexer produces without recursion. It stops counting
// once over maxConfigNesting.
func nativeNesting(src []byte, template bool) int {
	var tokens hclsyntax.Tokens
	if template {
		tokens, _ = hclsyntax.LexTemplate(src, "", hcl.InitialPos)
	} else {
		tokens, _ = hclsyntax.LexConfig(src, "", hcl.InitialPos)
	}
	// Each open level costs one, plus what nests within its current
	// item; a body's or object's items end at a newline, any item at a
	// comma.
	type level struct {
		items bool // newlines end items (a body or an object)
		ops   int
	}
	stack := []level{{items: true}}
	depth, deepest := 1, 1
	for i, tok := range tokens {
		top := &stack[len(stack)-1]
		switch {
		case tok.Type == hclsyntax.TokenTemplateControl:
			// Directives nest from if/for to endif/endfor.
			if i+1 < len(tokens) {
				switch string(tokens[i+1].Bytes) {
				case "if", "for":
					top.ops++
					depth++
				case "endif", "endfor":
					if top.ops > 0 {
						top.ops--
						depth--
					}
				}
			}
			stack = append(stack, level{})
			depth++
		case tok.Type == hclsyntax.TokenTemplateInterp:
			// Interpolations are a template's parts, side by side.
			stack = append(stack, level{})
			depth++
		case openers[tok.Type]:
			top.ops++
			stack = append(stack, level{items: tok.Type == hclsyntax.TokenOBrace})
			depth += 2
		case closers[tok.Type] && len(stack) > 1:
			depth -= 1 + top.ops
			stack = stack[:len(stack)-1]
		case tok.Type == hclsyntax.TokenComma, tok.Type == hclsyntax.TokenNewline && top.items:
			depth -= top.ops
			top.ops = 0
		case nestingOperators[tok.Type]:
			top.ops++
			depth++
		}
		deepest = max(deepest, depth)
		if deepest > maxConfigNesting {
			break
		}
	}
	return deepest
}

// jsonNesting is an upper bound of how deeply HCL's JSON parser recurses
// on src: arrays and objects, plus, within a string that holds a template
// sequence, the template's own nesting.
func jsonNesting(src []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(src) && deepest <= maxConfigNesting; i++ {
		switch src[i] {
		case '[', '{':
			depth++
		case ']', '}':
			depth = max(depth-1, 0)
		case '"':
			end := i + 1
			for end < len(src) && src[end] != '"' {
				if src[end] == '\\' {
					end++
				}
				end++
			}
			s := src[i+1 : min(end, len(src))]
			if bytes.Contains(s, []byte("${")) || bytes.Contains(s, []byte("%{")) {
				deepest = max(deepest, depth+nativeNesting(s, true))
			}
			i = end
		}
		deepest = max(deepest, depth)
	}
	return deepest
}
