package runner

import (
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"golang.org/x/text/unicode/norm"
)

// parsedString parses doc as HCL and returns attribute name's string value
// in block path (types only), as tofu would read it.
func parsedString(t testing.TB, doc []byte, name string, path ...string) string {
	t.Helper()
	file, diags := hclsyntax.ParseConfig(doc, "test.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("the written HCL does not parse: %s\n%s", diags.Error(), doc)
	}
	body := file.Body.(*hclsyntax.Body)
	for _, typ := range path {
		var next *hclsyntax.Body
		for _, b := range body.Blocks {
			if b.Type == typ {
				next = b.Body
			}
		}
		if next == nil {
			t.Fatalf("no %s block in\n%s", typ, doc)
		}
		body = next
	}
	if len(body.Attributes) != 1 {
		t.Fatalf("want exactly one attribute, got %d in\n%s", len(body.Attributes), doc)
	}
	attr, ok := body.Attributes[name]
	if !ok {
		t.Fatalf("no attribute %s in\n%s", name, doc)
	}
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() {
		t.Fatalf("attribute %s does not evaluate without context (a template escaped?): %s\n%s", name, diags.Error(), doc)
	}
	return v.AsString()
}

// FuzzQuotedStringsReadBackAsWritten: whatever a value holds, the HCL the
// runner writes reads back as exactly that value (in the normal form and
// UTF-8 HCL reads) and as nothing else: no quote ends the string early, no
// "${" or "%{" becomes a template, no newline starts another attribute.
func FuzzQuotedStringsReadBackAsWritten(f *testing.F) {
	for _, s := range []string{"", "plain", `a"b`, `back\slash`, "line\nbreak\r\t", "${var.x}", "%{ if true }x%{ endif }",
		"$${literal}", "%%{", "$", "%", "{", "end$", "\x00\x01\x7f", "\xff\xfe", "é", "e\u0301", `"}` + "\nevil {"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var file hclFile
		file.block("outer", []string{s}, func() { file.str("value", s) })
		got := parsedString(t, file.Bytes(), "value", "outer")
		// Each byte that is not UTF-8 reads back as one U+FFFD.
		want := norm.NFC.String(string([]rune(s)))
		if got != want {
			t.Fatalf("wrote %q, read back %q (want %q)\n%s", s, got, want, file.Bytes())
		}
		if !utf8.ValidString(string(file.Bytes())) {
			t.Fatalf("written HCL is not UTF-8:\n%q", file.Bytes())
		}
	})
}

// TestRunnerFilesReadBackAsHCL: each document the runner writes is HCL
// tofu reads, holding the values it was given.
func TestRunnerFilesReadBackAsHCL(t *testing.T) {
	t.Parallel()
	odd := "x\"}\n${oops} %{ if } \\"
	if got := parsedString(t, backendOverride("cairn.example", "org"+odd, "ws"), "name", "terraform", "backend", "workspaces"); got != "ws" {
		t.Fatalf("workspace name %q", got)
	}
	if got := parsedString(t, emptyStateOverride("/private/"+odd), "path", "terraform", "backend"); got != "/private/"+odd {
		t.Fatalf("state path %q", got)
	}
	if got := parsedString(t, cliConfigFile("cairn.example", "rat_"+odd, ""), "token", "credentials"); got != "rat_"+odd {
		t.Fatalf("token %q", got)
	}
	if got := parsedString(t, cliConfigFile("h", "", "https://mirror.example/x"), "url", "provider_installation", "network_mirror"); got != "https://mirror.example/x/" {
		t.Fatalf("mirror %q", got)
	}
}
