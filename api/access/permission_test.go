package access

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestUnionIsTheSetUnion: for random pairs of sets drawn from every
// permission, Union holds exactly the permissions of either, sorted and
// without duplicates, whichever side holds the other or neither does.
func TestUnionIsTheSetUnion(t *testing.T) {
	t.Parallel()
	all := AllPermissions()
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func() []Permission {
		var ps []Permission
		for _, p := range all {
			if rng.IntN(3) == 0 {
				ps = append(ps, p)
			}
		}
		return ps
	}
	for range 2000 {
		a, b := draw(), draw()
		if rng.IntN(4) == 0 {
			b = append(slices.Clone(a), b[:len(b)/2]...) // a subset of b, or equal
		}
		want := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(a), b...))))
		got := NewPermissionSet(a...).Union(NewPermissionSet(b...)).List()
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("%v ∪ %v = %v, want %v", a, b, got, want)
		}
	}
}
