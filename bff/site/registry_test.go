package site

import (
	"encoding/json"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestReadmeRendersWithoutScriptsOrDangerousLinks: a README is the
// publisher's markdown, so neither raw HTML nor a javascript: (or any other
// non-web) link survives rendering, while ordinary markdown and web links
// do.
func TestReadmeRendersWithoutScriptsOrDangerousLinks(t *testing.T) {
	t.Parallel()
	got := string(renderReadme(strings.Join([]string{
		"# Network",
		"<script>alert(1)</script>",
		`<a href="javascript:alert(2)">raw link</a> <img src=x onerror="alert(3)">`,
		"[click](javascript:alert(4)) [CLICK](JaVaScRiPt:alert(5)) [data](data:text/html;base64,PHNjcmlwdD4=) [vb](vbscript:msgbox)",
		"[relative](docs/usage.md) ![logo](https://example.com/logo.png) ![inline](data:image/png;base64,iVBORw0KGgo=)",
		"[docs](https://example.com/docs) <https://example.org/auto> [top](#network) <ops@example.com>",
		"",
		"| a | b |",
		"|---|---|",
		"| 1 | 2 |",
		"",
		"```hcl",
		`module "x" { source = "<script>" }`,
		"```",
	}, "\n")))
	lower := strings.ToLower(got)
	for _, banned := range []string{"<script", "javascript:", "vbscript:", "data:", "onerror", "<img", "raw link</a>", `href="docs/`} {
		if strings.Contains(lower, banned) {
			t.Errorf("the README keeps %q:\n%s", banned, got)
		}
	}
	for _, kept := range []string{"<h1>Network</h1>", `<a href="https://example.com/docs">docs</a>`, `<a href="https://example.org/auto">`,
		`<a href="#network">top</a>`, `href="mailto:ops@example.com"`, "<table>", "click", "relative", "logo",
		"source = &quot;&lt;script&gt;&quot;"} {
		if !strings.Contains(got, kept) {
			t.Errorf("the README lost %q:\n%s", kept, got)
		}
	}
}

func TestAllowedReadmeLink(t *testing.T) {
	t.Parallel()
	for dest, want := range map[string]bool{
		"https://example.com/x": true, "http://example.com": true, "mailto:a@example.com": true, "#usage": true,
		"javascript:alert(1)": false, " javascript:alert(1)": false, "//evil.example/x": false, "docs/x.md": false,
		"/registry": false, "https://user:pw@example.com": false, "https:///x": false, "ftp://example.com": false, "# bad": false,
	} {
		if got := allowedReadmeLink(dest); got != want {
			t.Errorf("allowedReadmeLink(%q) = %v, want %v", dest, got, want)
		}
	}
}

// TestVersionActionsFollowHCPRules: deprecate a published version, restore
// or revoke a deprecated one, lift a revocation; nothing for a version
// that never published.
func TestVersionActionsFollowHCPRules(t *testing.T) {
	t.Parallel()
	var ok, deprecated, revoked, errored moduleVersion
	ok.Status, errored.Status = "ok", "errored"
	deprecated.Status = "ok"
	deprecated.Deprecation = &struct {
		Reason string    `json:"reason"`
		Link   string    `json:"link"`
		At     time.Time `json:"at"`
	}{Reason: "old"}
	revoked = deprecated
	revoked.Revocation = &struct {
		Reason string    `json:"reason"`
		At     time.Time `json:"at"`
	}{Reason: "bad"}
	got := [][]string{ok.Actions(), deprecated.Actions(), revoked.Actions(), errored.Actions()}
	want := [][]string{{"deprecate"}, {"restore", "revoke"}, {"unrevoke"}, nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatal(diff)
	}
}

// samplePage is a module page as the API's answers decode.
func samplePage(t *testing.T, canWrite bool) modulePage {
	t.Helper()
	var page modulePage
	mustDecode(t, `{"id":"mod_1","namespace":"acme","name":"network","provider":"aws","status":"setup_complete","version_count":2,
		"source_address":"cairn.example/acme/network/aws","source":null}`, &page.Module)
	mustDecode(t, `[{"id":"modv_2","module_id":"mod_1","version":"2.0.0-rc.1+b.7","status":"ok","origin":"upload","published_at":"2026-11-29T07:00:00Z",
		"deprecation":{"reason":"Use 1.1.0","link":null,"at":"2026-11-29T07:10:00Z"},"revocation":{"reason":"Leaks the bucket","at":"2026-11-29T07:20:00Z"}},
		{"id":"modv_1","module_id":"mod_1","version":"1.1.0","status":"ok","origin":"upload","archive_sha256":"`+strings.Repeat("a", 64)+`","archive_bytes":512,
		"published_at":"2026-11-29T06:00:00Z","deprecation":null,"revocation":null,"error":null}]`, &page.Versions)
	page.Selected = &page.Versions[1]
	var facts moduleFacts
	mustDecode(t, `{"readme":"# Network\n<script>alert(1)</script>","inputs":[{"name":"cidr","type":"string","description":"The VPC range","default":"10.0.0.0/16","required":false},
		{"name":"name","type":"string","required":true}],"outputs":[{"name":"vpc_id","description":"The VPC"}],
		"resources":[{"type":"terraform_data","name":"vpc","mode":"managed"},{"type":"terraform_remote_state","name":"base","mode":"data"}],
		"providers":[],"submodules":[{"path":"modules/sub","inputs":[{"name":"subnet","type":"string","required":true}],"outputs":[],"resources":[]}]}`, &facts)
	page.Facts, page.Readme, page.CanWrite = &facts, renderReadme(facts.Readme), canWrite
	return page
}

func mustDecode(t *testing.T, raw string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		t.Fatal(err)
	}
}

// TestModulePageRendersFactsAndMarksVersions: the README (without its
// script), inputs with their defaults, outputs, resources, the submodule,
// the usage snippet with the exact source and version, and the revoked
// and deprecated marks with their reasons.
func TestModulePageRendersFactsAndMarksVersions(t *testing.T) {
	t.Parallel()
	page := samplePage(t, true)
	out := renderPage(t, "registry-module.html", page)
	usage := "module \"network\" {\n  source  = \"cairn.example/acme/network/aws\"\n  version = \"1.1.0\"\n}\n"
	if page.Usage() != usage || !strings.Contains(out, html.EscapeString(usage)) {
		t.Fatalf("usage snippet %q:\n%s", page.Usage(), out)
	}
	for _, want := range []string{"<h1>Network</h1>", "<code>cidr</code>", html.EscapeString(`"10.0.0.0/16"`), "<code>vpc_id</code>",
		"<code>data.terraform_remote_state.base</code>", "<code>modules/sub</code>", "<code>subnet</code>",
		"Revoked: Leaks the bucket", "Deprecated: Use 1.1.0", `id="deprecate-version"`, `id="upload-version"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the module page lacks %q", want)
		}
	}
	if strings.Contains(out, "<script>alert") {
		t.Error("the README's script reached the page")
	}
}

// TestModulePageOffersNoActionsToReaders: a reader sees the module but no
// form that changes it.
func TestModulePageOffersNoActionsToReaders(t *testing.T) {
	t.Parallel()
	out := renderPage(t, "registry-module.html", samplePage(t, false))
	if strings.Contains(out, `method="post" action="/registry`) || !strings.Contains(out, `id="module-readonly"`) {
		t.Fatalf("a reader is offered registry actions:\n%s", out)
	}
	list := renderPage(t, "registry.html", registryPage{})
	if strings.Contains(list, `id="publish-module"`) || !strings.Contains(list, `id="registry-readonly"`) {
		t.Fatalf("a reader is offered the publish form:\n%s", list)
	}
	if list = renderPage(t, "registry.html", registryPage{CanWrite: true}); !strings.Contains(list, `id="publish-module"`) {
		t.Fatal("a writer is not offered the publish form")
	}
}

// TestDefaultVersionPrefersResolvableReleases: the page opens on the
// newest published, unrevoked release, then a prerelease, then anything.
func TestDefaultVersionPrefersResolvableReleases(t *testing.T) {
	t.Parallel()
	page := samplePage(t, false)
	rc, stable := page.Versions[0], page.Versions[1]
	rc.Revocation = nil
	pending := moduleVersion{Version: "3.0.0", Status: "pending"}
	for _, c := range []struct {
		versions []moduleVersion
		want     string
	}{
		{[]moduleVersion{pending, rc, stable}, "1.1.0"},
		{[]moduleVersion{pending, rc}, "2.0.0-rc.1+b.7"},
		{[]moduleVersion{pending, page.Versions[0]}, "3.0.0"},
		{nil, ""},
	} {
		got := ""
		if v := defaultVersion(c.versions); v != nil {
			got = v.Version
		}
		if got != c.want {
			t.Errorf("defaultVersion = %q, want %q", got, c.want)
		}
	}
}

// TestReadmeWhoseRenderingWouldCostSecondsIsShownAsText: inputs on which
// goldmark's cost grows with the square of their size (deep quotes, deep
// lists, thousands of unclosed links) are shown escaped as plain text; an
// ordinary README with links, quotes and lists still renders as markdown.
// Without the bound the first two take seconds each at 64 KiB.
func TestReadmeWhoseRenderingWouldCostSecondsIsShownAsText(t *testing.T) {
	t.Parallel()
	var nested strings.Builder
	for i := range 40 {
		nested.WriteString(strings.Repeat("  ", i) + "- item\n")
	}
	hostile := map[string]string{
		"quotes":      strings.Repeat(">", 64<<10),
		"links":       strings.Repeat("[a](", 16<<10),
		"nested list": nested.String(),
		"script":      strings.Repeat("> ", 20) + "<script>alert(1)</script>",
	}
	for name, md := range hostile {
		start := time.Now()
		got := string(renderReadme(md))
		if !strings.HasPrefix(got, `<pre class="readme-plain">`) || strings.Contains(got, "<script>") {
			t.Errorf("%s: rendered as markdown or unescaped: %.120q", name, got)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s: took %v", name, took)
		}
	}
	ordinary := "# network\n\n> a note\n> > quoted twice\n\n- one\n  - two\n    - three\n\n" +
		strings.Repeat("See [the docs](https://example.com/docs).\n", 50)
	got := string(renderReadme(ordinary))
	if strings.Contains(got, "readme-plain") || !strings.Contains(got, "<blockquote>") ||
		strings.Count(got, `<a href="https://example.com/docs">`) != 50 {
		t.Errorf("an ordinary README did not render as markdown: %.300q", got)
	}
}
