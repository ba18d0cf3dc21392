package github

import (
	"strings"
	"testing"
	"time"
)

func TestTriggerPathGlobs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		globs []string
		path  string
		want  bool
	}{
		{nil, "anything", true},
		{[]string{"infra/**"}, "infra/a/b.tf", true},
		{[]string{"infra/**"}, "infra", true},
		{[]string{"infra/**"}, "other/infra/a.tf", false},
		{[]string{"**/*.tf"}, "a/b/c.tf", true},
		{[]string{"**/*.tf"}, "c.tf", true},
		{[]string{"*.tf"}, "a/c.tf", false},
		{[]string{"a?.tf"}, "ab.tf", true},
		{[]string{"a?.tf"}, "a/.tf", false},
		{[]string{"./infra/*"}, "infra/x", true},       // legacy: from the root
		{[]string{"../x", "infra/*"}, "infra/x", true}, // unsafe never matches, the rest still do
		{[]string{"../x"}, "x", false},
		{[]string{"/abs"}, "abs", false},
	} {
		if got := MatchAny(c.globs, []string{c.path}); got != c.want {
			t.Errorf("MatchAny(%q, %q) = %v", c.globs, c.path, got)
		}
	}
	for _, bad := range [][]string{{"/a"}, {"a/../b"}, {"."}, {"a\\b"}, {"a", "a"}, {"a**b"}, {""}, {"a//b"}, {"[ab]"}} {
		if ValidateTriggerPaths(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := ValidateTriggerPaths([]string{"infra/**", "**/*.tf", "a?/b*"}); err != nil {
		t.Error(err)
	}
}

// A saved glob of many ** segments against a deep pushed path must not
// backtrack exponentially: the receiver matches synchronously, so one
// tenant's glob and push could otherwise pin the API's CPU for everyone.
func TestTriggerPathGlobDoesNotBacktrackExponentially(t *testing.T) {
	t.Parallel()
	glob := strings.Repeat("**/*/", 30) + "z"
	deep := strings.Repeat("a/", 400) + "b"
	if len(glob) > maxTriggerPathBytes || ValidateTriggerPaths([]string{glob}) != nil {
		t.Fatalf("the glob must be one a workspace admin can save")
	}
	done := make(chan bool, 1)
	go func() { done <- MatchAny([]string{glob}, []string{deep}) }()
	select {
	case got := <-done:
		if got {
			t.Fatal("matched a path without z")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("MatchAny did not finish within 5s")
	}
	if !MatchAny([]string{glob}, []string{strings.Repeat("a/", 60) + "z"}) {
		t.Fatal("did not match a deep enough path ending in z")
	}
	if MatchAny([]string{glob}, []string{strings.Repeat("a/", 29) + "z"}) {
		t.Fatal("matched a path too shallow for 30 * segments")
	}
}
