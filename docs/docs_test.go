// Package docs holds Cairn's documentation and the tests that keep it
// honest: every relative link and anchor resolves, the README stays short
// and opens with the two commands, and the documentation paths the code
// names in its error messages exist.
package docs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

// pendingPages are linked from the README and the index but written in
// other branches; until they land a missing one is not a broken link (and
// once present it is checked like every page).
var pendingPages = map[string]bool{
	"docs/operating/backup-and-restore.md": true,
	"docs/operating/upgrades.md":           true,
}

const root = ".."

// markdownFiles lists README.md and every Markdown file under docs/, as
// paths relative to the repository root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found only %v; the walk is wrong", files)
	}
	return files
}

// prose returns a Markdown file's lines outside fenced code blocks, with
// inline code spans blanked, so that neither code nor examples count as
// links or headings.
func prose(text string) []string {
	var out []string
	fence := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			out = append(out, "")
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			out = append(out, "")
			continue
		}
		out = append(out, line)
	}
	return out
}

var (
	heading  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	link     = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan = regexp.MustCompile("`[^`]*`")
	// GitHub keeps letters, digits, spaces, hyphens and underscores of a
	// heading's text, lower-cased, with spaces turned into hyphens.
	anchorDrop = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	mdLink     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// anchors returns the anchors GitHub generates for a file's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(text) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		title := mdLink.ReplaceAllString(m[1], "$1")
		slug := strings.ReplaceAll(anchorDrop.ReplaceAllString(strings.ToLower(title), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// resolve checks one relative target (path and optional #anchor) named
// from the file at `from`; it returns what is wrong, or "".
func resolve(from, target string) string {
	path, anchor, _ := strings.Cut(target, "#")
	dest := from
	if path != "" {
		dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(from), path)))
	}
	body, err := os.ReadFile(filepath.Join(root, dest))
	if err != nil {
		if info, statErr := os.Stat(filepath.Join(root, dest)); statErr == nil && info.IsDir() && anchor == "" {
			return ""
		}
		if pendingPages[dest] {
			return ""
		}
		return fmt.Sprintf("%s does not exist", dest)
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	if !anchors(string(body))[anchor] {
		return fmt.Sprintf("%s has no heading with anchor #%s", dest, anchor)
	}
	return ""
}

// TestRelativeLinksResolve checks every relative link and image in
// README.md and docs/, and every #anchor into a Markdown file, as GitHub
// renders them.
func TestRelativeLinksResolve(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, file := range markdownFiles(t) {
		body, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range prose(string(body)) {
			for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				if problem := resolve(file, target); problem != "" {
					t.Errorf("%s:%d: link %s: %s", file, i+1, target, problem)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked only %d links; the link pattern is wrong", checked)
	}
}

// TestReadmeIsShortAndOpensWithTheTwoCommands keeps the README a front
// page: at most 250 lines, and its first block is `make run` and
// `make test`.
func TestReadmeIsShortAndOpensWithTheTwoCommands(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(body), "\n"), "\n")
	if len(lines) > 250 {
		t.Errorf("README.md has %d lines; keep it at most 250 and move detail into docs/", len(lines))
	}
	// The title, then the first fenced block: make run, then make test.
	var block []string
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			for _, l := range lines[i+1:] {
				if strings.HasPrefix(l, "```") {
					break
				}
				block = append(block, l)
			}
			if i > 4 {
				t.Errorf("the first code block starts on line %d; the two commands come first", i+1)
			}
			break
		}
	}
	if len(block) < 2 || !strings.HasPrefix(block[0], "make run") || !strings.HasPrefix(block[1], "make test") {
		t.Errorf("README.md's first block is %q; it must open with `make run` then `make test`", block)
	}
}

// docPath is a documentation page named in code, such as an error
// message's pointer docs/operating/sandboxes.md#when-isolation-is-unavailable.
var docPath = regexp.MustCompile(`docs/[a-z0-9/_-]+\.md(?:#[a-z0-9_-]+)?`)

// TestDocumentationNamedInCodeExists checks the documentation pages and
// sections that error messages and pages of the processes point people to.
func TestDocumentationNamedInCodeExists(t *testing.T) {
	t.Parallel()
	found := 0
	for _, dir := range []string{"api", "jobs", "bff", "web", "e2e/cmd/cairn-dev"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(path, "_test.go") {
				return err
			}
			if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".html") {
				return nil
			}
			body, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, ref := range docPath.FindAllString(string(body), -1) {
				found++
				// Named from the repository root.
				if problem := resolve("README.md", ref); problem != "" {
					t.Errorf("%s names %s: %s", path, ref, problem)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if found == 0 {
		t.Error("no code names a documentation page; the scan is wrong or the errors lost their pointers")
	}
}

// TestPolicyExampleBuilds builds the worked example of policy-as-code.md
// (its two rego blocks, the policy and its tests) the way a policy build
// does: strict Rego v1 under Cairn's capabilities, then the set's tests,
// which must all pass.
func TestPolicyExampleBuilds(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile(filepath.Join(root, "docs", "using", "policy-as-code.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	lines := strings.Split(string(body), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```rego" {
			continue
		}
		var block []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			block = append(block, lines[i])
		}
		blocks = append(blocks, strings.Join(block, "\n")+"\n")
	}
	if len(blocks) != 2 {
		t.Fatalf("policy-as-code.md has %d rego blocks, want the policy and its tests", len(blocks))
	}
	src := t.TempDir()
	for name, text := range map[string]string{"policy.rego": blocks[0], "policy_test.rego": blocks[1]} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var bundle, results bytes.Buffer
	report, err := engine.Build(context.Background(), src, &bundle, &results)
	if err != nil {
		t.Fatalf("the worked example does not build: %v\n%s", err, results.String())
	}
	if report.Passed != 2 || report.Tests != 2 {
		t.Fatalf("the worked example's tests: %+v\n%s", report, results.String())
	}
}
