package registry

import (
	"strings"
	"testing"
)

// TestTagVersion: a tag publishes the version after its binding's prefix
// and an optional "v", kept byte for byte; anything else publishes
// nothing.
func TestTagVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefix, tag, want string
		ok                bool
	}{
		{"", "v1.2.3", "1.2.3", true},
		{"", "1.2.3", "1.2.3", true},
		{"", "v1.2.3-alpha.1+feature.7", "1.2.3-alpha.1+feature.7", true},
		{"", "2.0.0-rc.1", "2.0.0-rc.1", true},
		{"network/", "network/v0.1.0", "0.1.0", true},
		{"network/", "network/1.0.0+build", "1.0.0+build", true},
		{"", "network/v0.1.0", "", false},
		{"network/", "compute/v0.1.0", "", false},
		{"network/", "v0.1.0", "", false},
		{"", "simple-tag", "", false},
		{"", "v1.2", "", false},
		{"", "v01.2.3", "", false},
		{"", "vv1.2.3", "", false},
		{"", "V1.2.3", "", false},
		{"", "v1.2.3-", "", false},
		{"", "release-1.2.3", "", false},
		{"", "v" + strings.Repeat("1", 200) + ".0.0", "", false},
	} {
		got, ok := TagVersion(tc.prefix, tc.tag)
		if got != tc.want || ok != tc.ok {
			t.Errorf("TagVersion(%q, %q) = %q, %v; want %q, %v", tc.prefix, tc.tag, got, ok, tc.want, tc.ok)
		}
	}
}

// TestValidateTagPrefix: a prefix is at most 100 bytes of what a git tag
// name may hold.
func TestValidateTagPrefix(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "network/", "modules/aws-vpc-", "a.b/", strings.Repeat("x", 100)} {
		if err := validateTagPrefix(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{strings.Repeat("x", 101), "/abs", "-x", ".hidden", "a..b", "a//b", "a b", "a\tb",
		"x~", "x^", "x:", "x?", "x*", "x[", "x\\", "a@{b", "a/.b", "é/"} {
		if err := validateTagPrefix(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
