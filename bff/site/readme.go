package site

import (
	"bytes"
	"html/template"
	"net/url"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	gmtext "github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// maxReadme bounds the markdown rendered; the API stores at most 256 KiB.
const maxReadme = 256 << 10

// goldmark's cost grows with the square of some inputs, and a README is
// rendered on every view of its module: 64 KiB of '>' (nested quotes)
// takes seconds, as do 16,000 unclosed links. A README past these bounds
// is shown as plain text, which costs nothing to render and is still
// readable; real READMEs stay far inside them.
const (
	maxReadmeBrackets = 2048
	maxReadmeNesting  = 16
)

// readmeMarkdown renders a module's README. A README is written by whoever
// publishes the module, so it is untrusted: raw HTML is left out (goldmark
// renders it only WithUnsafe), no heading gets an ID or attributes (either
// could shadow the page's own elements), and links are kept only to
// http(s), mailto and fragments (readmeLinks).
var readmeMarkdown = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(readmeLinks{}, 1000))),
)

// renderReadme returns a README's markdown as HTML safe to put in the page.
func renderReadme(markdown string) template.HTML {
	if len(markdown) > maxReadme {
		markdown = markdown[:maxReadme]
	}
	if readmeTooComplex(markdown) {
		return template.HTML("<pre class=\"readme-plain\">" + template.HTMLEscapeString(markdown) + "</pre>")
	}
	var out bytes.Buffer
	if err := readmeMarkdown.Convert([]byte(markdown), &out); err != nil {
		return template.HTML("<p>" + template.HTMLEscapeString(markdown) + "</p>")
	}
	// The output is goldmark's own rendering without raw HTML, and every
	// link in it passed readmeLinks.
	return template.HTML(out.String())
}

// readmeLinks drops every link and image whose destination is not an
// absolute http(s) or mailto URL or a fragment, keeping its text: goldmark
// already drops javascript:, vbscript:, file: and data: destinations, but
// a relative one would point into the dashboard, and an image could only
// be a request the page's content security policy refuses anyway.
type readmeLinks struct{}

func (readmeLinks) Transform(doc *ast.Document, reader gmtext.Reader, _ parser.Context) {
	source := reader.Source()
	var unwrap []ast.Node
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			if !allowedReadmeLink(string(n.Destination)) {
				unwrap = append(unwrap, n)
			}
		case *ast.Image:
			unwrap = append(unwrap, n)
		case *ast.AutoLink:
			if n.AutoLinkType != ast.AutoLinkEmail && !allowedReadmeLink(string(n.URL(source))) {
				unwrap = append(unwrap, n)
			}
		}
		return ast.WalkContinue, nil
	})
	for _, n := range unwrap {
		parent := n.Parent()
		if parent == nil {
			continue
		}
		if auto, ok := n.(*ast.AutoLink); ok {
			parent.ReplaceChild(parent, n, ast.NewString(auto.Label(source)))
			continue
		}
		for c := n.FirstChild(); c != nil; {
			next := c.NextSibling()
			parent.InsertBefore(parent, n, c)
			c = next
		}
		parent.RemoveChild(parent, n)
	}
}

// allowedReadmeLink reports whether a README link may stay a link.
func allowedReadmeLink(dest string) bool {
	if strings.HasPrefix(dest, "#") {
		return !strings.ContainsAny(dest, " \t\r\n")
	}
	u, err := url.Parse(dest)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "https", "http":
		return u.Host != "" && u.User == nil
	case "mailto":
		return u.Opaque != ""
	}
	return false
}

// readmeTooComplex reports whether rendering markdown as markdown could
// cost far more than its length: too many link openers, or a line nested
// deeper than maxReadmeNesting quotes and list levels.
func readmeTooComplex(markdown string) bool {
	if strings.Count(markdown, "[") > maxReadmeBrackets {
		return true
	}
	for line := range strings.Lines(markdown) {
		depth, indent := 0, 0
	prefix:
		for _, c := range line {
			switch c {
			case '>':
				depth++
			case ' ':
				indent++
			case '\t':
				indent += 4
			case '-', '*', '+':
				depth++
			default:
				break prefix
			}
		}
		if depth+indent/2 > maxReadmeNesting {
			return true
		}
	}
	return false
}
