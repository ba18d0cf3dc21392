package github

import (
	"fmt"
	"path"
	"strings"
)

// Trigger path limits (SPEC §6, §8).
const (
	MaxTriggerPaths     = 100
	maxTriggerPathBytes = 1024
)

// ValidateTriggerPaths checks globs at configuration time: repository
// relative, made of `*`, `**` and `?` wildcards and literal characters,
// without absolute paths, traversal, `.` or `..` segments, backslashes,
// empty segments, duplicates or over-limit input.
func ValidateTriggerPaths(globs []string) error {
	if len(globs) > MaxTriggerPaths {
		return fmt.Errorf("%w: at most %d trigger paths", ErrInvalid, MaxTriggerPaths)
	}
	seen := map[string]bool{}
	for _, g := range globs {
		if err := validGlob(g); err != nil {
			return fmt.Errorf("%w: trigger path %q: %s", ErrInvalid, truncate(g, 64), err.Error())
		}
		if seen[g] {
			return fmt.Errorf("%w: trigger path %q appears twice", ErrInvalid, truncate(g, 64))
		}
		seen[g] = true
	}
	return nil
}

func validGlob(g string) error {
	switch {
	case g == "":
		return fmt.Errorf("empty")
	case len(g) > maxTriggerPathBytes:
		return fmt.Errorf("over %d bytes", maxTriggerPathBytes)
	case strings.HasPrefix(g, "/"):
		return fmt.Errorf("absolute")
	case strings.ContainsAny(g, "\\\x00[]{}"):
		return fmt.Errorf("only *, ** and ? are wildcards; backslashes and brackets are refused")
	}
	for _, seg := range strings.Split(g, "/") {
		switch {
		case seg == "":
			return fmt.Errorf("empty segment")
		case seg == "." || seg == "..":
			return fmt.Errorf("%q segment", seg)
		case strings.Contains(seg, "**") && seg != "**":
			return fmt.Errorf("** must be a whole segment")
		}
		for _, r := range seg {
			if r < 0x20 || r == 0x7f {
				return fmt.Errorf("control character")
			}
		}
	}
	return nil
}

// matcher is a saved glob as it matches today: a legacy pattern with a
// leading "./" matches from the repository root; any other unsafe saved
// pattern never matches, without disabling the others.
type matcher struct {
	segments []string
	never    bool
}

func compileGlob(g string) matcher {
	for strings.HasPrefix(g, "./") {
		g = strings.TrimPrefix(g, "./")
	}
	if validGlob(g) != nil {
		return matcher{never: true}
	}
	return matcher{segments: strings.Split(g, "/")}
}

// MatchAny reports whether any changed path matches any glob; no globs
// match every change.
func MatchAny(globs, paths []string) bool {
	if len(globs) == 0 {
		return true
	}
	ms := make([]matcher, 0, len(globs))
	for _, g := range globs {
		ms = append(ms, compileGlob(g))
	}
	for _, p := range paths {
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		for _, m := range ms {
			if !m.never && matchSegments(m.segments, parts) {
				return true
			}
		}
	}
	return false
}

// matchSegments matches path segments against glob segments, where "**"
// stands for zero or more whole segments and path.Match handles `*` and
// `?` within one. It fills a table of suffix matches (glob[i:] against
// parts[j:]) from the end, so a glob of many "**" against a deep path costs
// len(glob)*len(parts) steps instead of backtracking exponentially: the
// receiver matches pushed paths synchronously.
func matchSegments(glob, parts []string) bool {
	n := len(parts)
	// next is glob[i+1:] against every parts[j:]; cur is glob[i:].
	next := make([]bool, n+1)
	next[n] = true
	cur := make([]bool, n+1)
	for i := len(glob) - 1; i >= 0; i-- {
		if glob[i] == "**" {
			// Zero segments (next[j]) or one more (cur[j+1]).
			cur[n] = next[n]
			for j := n - 1; j >= 0; j-- {
				cur[j] = next[j] || cur[j+1]
			}
		} else {
			cur[n] = false
			for j := n - 1; j >= 0; j-- {
				ok, err := path.Match(glob[i], parts[j])
				cur[j] = err == nil && ok && next[j+1]
			}
		}
		next, cur = cur, next
	}
	return next[0]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
