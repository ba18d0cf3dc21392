package registry

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// semverPattern is semver.org's grammar, exactly: no leading "v", no
// leading zeros in numeric identifiers, prerelease and build identifiers
// of [0-9A-Za-z-].
var semverPattern = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)` +
	`(?:-((?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*))?` +
	`(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$`)

// MaxVersionBytes bounds a version string.
const MaxVersionBytes = 128

// Semver is a parsed version. The string is kept byte for byte; Key orders
// versions by semver precedence when compared bytewise.
type Semver struct {
	Original   string
	Major      string
	Minor      string
	Patch      string
	Prerelease string // "" when none
	Build      string // "" when none
}

// ParseSemver accepts exactly MAJOR.MINOR.PATCH[-prerelease][+build].
func ParseSemver(s string) (Semver, error) {
	if len(s) > MaxVersionBytes {
		return Semver{}, fmt.Errorf("%w: version is longer than %d bytes", ErrInvalid, MaxVersionBytes)
	}
	m := semverPattern.FindStringSubmatch(s)
	if m == nil {
		return Semver{}, fmt.Errorf("%w: version %q is not a semantic version MAJOR.MINOR.PATCH[-prerelease][+build]", ErrInvalid, s)
	}
	return Semver{Original: s, Major: m[1], Minor: m[2], Patch: m[3], Prerelease: m[4], Build: m[5]}, nil
}

// IsPrerelease reports whether the version has a prerelease part.
func (v Semver) IsPrerelease() bool { return v.Prerelease != "" }

// Key is the version's precedence as bytes: numbers as their length then
// their digits (no leading zeros, so longer is larger), then either 0xFF
// for a release or the prerelease identifiers (numeric 0x01 below
// alphanumeric 0x02, each alphanumeric one ended by 0x00) ended by 0x00,
// so that fewer identifiers sort first. Build metadata has no precedence.
func (v Semver) Key() []byte {
	var b bytes.Buffer
	for _, n := range []string{v.Major, v.Minor, v.Patch} {
		writeNumber(&b, n)
	}
	if v.Prerelease == "" {
		b.WriteByte(0xFF)
		return b.Bytes()
	}
	for _, ident := range strings.Split(v.Prerelease, ".") {
		if isNumeric(ident) {
			b.WriteByte(0x01)
			writeNumber(&b, ident)
			continue
		}
		b.WriteByte(0x02)
		b.WriteString(ident)
		b.WriteByte(0x00)
	}
	b.WriteByte(0x00)
	return b.Bytes()
}

func writeNumber(b *bytes.Buffer, digits string) {
	b.WriteByte(byte(len(digits)))
	b.WriteString(digits)
}

func isNumeric(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// CompareVersions orders two parsed versions: semver precedence, then the
// strings (so versions differing only in build metadata have one order).
func CompareVersions(a, b Semver) int {
	if c := bytes.Compare(a.Key(), b.Key()); c != 0 {
		return c
	}
	return strings.Compare(a.Original, b.Original)
}
