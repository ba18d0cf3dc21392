package trigger

import (
	"slices"
	"testing"
)

func TestCyclePath(t *testing.T) {
	t.Parallel()
	e := func(src, dst string) Edge { return Edge{Source: src, Destination: dst} }
	for _, tc := range []struct {
		name        string
		edges       []Edge
		source, dst string
		want        []string
	}{
		{"no edges", nil, "a", "b", nil},
		{"self", nil, "a", "a", []string{"a", "a"}},
		{"direct back edge", []Edge{e("b", "a")}, "a", "b", []string{"a", "b", "a"}},
		{"chain of three", []Edge{e("a", "b"), e("b", "c")}, "c", "a", []string{"c", "a", "b", "c"}},
		{"longer chain", []Edge{e("b", "c"), e("c", "d"), e("d", "e"), e("e", "a")}, "a", "b", []string{"a", "b", "c", "d", "e", "a"}},
		{"same direction is no cycle", []Edge{e("a", "b"), e("b", "c")}, "a", "c", nil},
		{"diamond without a way back", []Edge{e("a", "b"), e("a", "c"), e("b", "d"), e("c", "d")}, "a", "d", nil},
		{"shortest of two loops", []Edge{e("b", "c"), e("c", "a"), e("b", "a")}, "a", "b", []string{"a", "b", "a"}},
		{"unrelated loop elsewhere is no concern", []Edge{e("x", "y"), e("y", "x")}, "a", "b", nil},
	} {
		if got := CyclePath(tc.edges, tc.source, tc.dst); !slices.Equal(got, tc.want) {
			t.Errorf("%s: CyclePath = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMessageNamesTheSourceRun(t *testing.T) {
	t.Parallel()
	if got, want := Message("run_123", "network"), "Triggered by run run_123 of workspace network"; got != want {
		t.Fatalf("Message = %q, want %q", got, want)
	}
}
