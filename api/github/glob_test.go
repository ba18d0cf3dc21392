package github

import "testing"

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
