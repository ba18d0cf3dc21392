package runner

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// hclFile writes the few HCL documents the runner gives tofu: blocks with
// quoted labels, quoted string attributes and raw expressions a person
// wrote. It stands in for hclwrite, whose node comparisons link go-cmp,
// and go-cmp's calls of reflect's Method by a computed index make the
// linker keep every exported method of every type in the worker (all of
// the S3 client's operations among them): megabytes an idle worker maps.
type hclFile struct {
	buf   bytes.Buffer
	depth int
}

// block writes `typ "label" ... {`, the body fill writes, and `}`.
func (f *hclFile) block(typ string, labels []string, fill func()) {
	f.indent()
	f.buf.WriteString(typ)
	for _, l := range labels {
		f.buf.WriteByte(' ')
		f.buf.WriteString(hclQuote(l))
	}
	f.buf.WriteString(" {\n")
	f.depth++
	fill()
	f.depth--
	f.indent()
	f.buf.WriteString("}\n")
}

// str writes `name = "value"` with value quoted so that nothing in it is
// read as HCL: no quote ends it and no "${" or "%{" starts a template.
func (f *hclFile) str(name, value string) { f.attr(name, hclQuote(value)) }

// raw writes `name = expr` with expr as written: an HCL value a workspace
// variable marked as HCL holds, which tofu parses as its author meant.
func (f *hclFile) raw(name, expr string) { f.attr(name, expr) }

// strMap writes `name = { "key" = "value" ... }` with every key and value
// quoted as str quotes them, in key order.
func (f *hclFile) strMap(name string, m map[string]string) {
	f.indent()
	f.buf.WriteString(name)
	f.buf.WriteString(" = {\n")
	f.depth++
	for _, k := range slices.Sorted(maps.Keys(m)) {
		f.attr(hclQuote(k), hclQuote(m[k]))
	}
	f.depth--
	f.indent()
	f.buf.WriteString("}\n")
}

func (f *hclFile) attr(name, expr string) {
	f.indent()
	f.buf.WriteString(name)
	f.buf.WriteString(" = ")
	f.buf.WriteString(expr)
	f.buf.WriteByte('\n')
}

func (f *hclFile) indent() { f.buf.WriteString(strings.Repeat("  ", f.depth)) }

func (f *hclFile) Bytes() []byte { return f.buf.Bytes() }

// hclQuote is s as an HCL quoted string literal: the escapes HCL's quoted
// strings know, "$${" and "%%{" for a literal "${" and "%{", \u escapes for
// other control characters, and U+FFFD for bytes that are not UTF-8 (tofu
// reads only UTF-8).
func hclQuote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		next := ""
		if i+size < len(s) {
			next = s[i+size : i+size+1]
		}
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case (r == '$' || r == '%') && next == "{":
			// Doubling the sign is HCL's escape for a literal "${" or "%{".
			b.WriteRune(r)
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&0xf])
		default:
			// A byte that is not UTF-8 decodes to utf8.RuneError, which is
			// written as U+FFFD.
			b.WriteRune(r)
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}
