package registry_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/registry"
)

func TestParseSemverKeepsPrereleaseAndBuildExactly(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]registry.Semver{
		"1.2.3":                    {Original: "1.2.3", Major: "1", Minor: "2", Patch: "3"},
		"1.2.3-alpha+feature":      {Original: "1.2.3-alpha+feature", Major: "1", Minor: "2", Patch: "3", Prerelease: "alpha", Build: "feature"},
		"0.0.0-0.a-b.--+001.Z-9":   {Original: "0.0.0-0.a-b.--+001.Z-9", Major: "0", Minor: "0", Patch: "0", Prerelease: "0.a-b.--", Build: "001.Z-9"},
		"10.20.30+build.1":         {Original: "10.20.30+build.1", Major: "10", Minor: "20", Patch: "30", Build: "build.1"},
		"2.0.0-rc.1":               {Original: "2.0.0-rc.1", Major: "2", Minor: "0", Patch: "0", Prerelease: "rc.1"},
		"99999999999999999999.0.0": {Original: "99999999999999999999.0.0", Major: "99999999999999999999", Minor: "0", Patch: "0"},
	} {
		got, err := registry.ParseSemver(in)
		if err != nil || got != want {
			t.Errorf("ParseSemver(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
}

func TestParseSemverRefusesWhatIsNotStrictSemver(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"", "v1.2.3", "V1.2.3", "1.2", "1", "1.2.3.4", "01.2.3", "1.02.3", "1.2.03", "1.2.3-01", "1.2.3-", "1.2.3+",
		"1.2.3-alpha..1", "1.2.3+build..1", "1.2.3-al_pha", "1.2.3 ", " 1.2.3", "1.2.3\n", "1.2.3-é", "-1.2.3",
		"1.2.3-alpha+build+more", "1.2.3-" + string(make([]byte, 130)),
	} {
		if _, err := registry.ParseSemver(in); !errors.Is(err, fault.ErrValidation) {
			t.Errorf("ParseSemver(%q) = %v, want a validation error", in, err)
		}
	}
}

// TestCompareVersionsFollowsSemverPrecedence checks the precedence
// example of semver.org §11 and the numeric cases a string order gets
// wrong.
func TestCompareVersionsFollowsSemverPrecedence(t *testing.T) {
	t.Parallel()
	ascending := []string{
		"0.9.0", "1.0.0-0", "1.0.0-1", "1.0.0-2", "1.0.0-10", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta",
		"1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.0+a", "1.0.0+b", "1.0.1",
		"1.2.0", "1.10.0", "2.0.0-rc.1", "2.0.0", "10.0.0",
	}
	parsed := make([]registry.Semver, len(ascending))
	for i, s := range ascending {
		v, err := registry.ParseSemver(s)
		if err != nil {
			t.Fatal(err)
		}
		parsed[i] = v
	}
	shuffled := slices.Clone(parsed)
	slices.Reverse(shuffled)
	slices.SortFunc(shuffled, registry.CompareVersions)
	for i := range shuffled {
		if shuffled[i].Original != ascending[i] {
			t.Fatalf("position %d: %s, want %s", i, shuffled[i].Original, ascending[i])
		}
	}
	a, _ := registry.ParseSemver("1.0.0+a")
	b, _ := registry.ParseSemver("1.0.0+b")
	if string(a.Key()) != string(b.Key()) {
		t.Error("build metadata changed the precedence key")
	}
}

func TestFlagTransitionsFollowHCP(t *testing.T) {
	t.Parallel()
	ok := registry.Version{Status: registry.VersionOK}
	deprecated := ok
	deprecated.Deprecation = &registry.Deprecation{Reason: "old"}
	revoked := deprecated
	revoked.Revocation = &registry.Revocation{}
	pending := registry.Version{Status: registry.VersionPending}
	for name, tc := range map[string]struct {
		check func(registry.Version) error
		v     registry.Version
		want  error
	}{
		"deprecate ok":              {registry.CanDeprecate, ok, nil},
		"deprecate again":           {registry.CanDeprecate, deprecated, nil},
		"deprecate pending":         {registry.CanDeprecate, pending, registry.ErrNotPublished},
		"deprecate revoked":         {registry.CanDeprecate, revoked, registry.ErrRevoked},
		"revoke ok":                 {registry.CanRevoke, ok, registry.ErrNotDeprecated},
		"revoke deprecated":         {registry.CanRevoke, deprecated, nil},
		"revoke revoked":            {registry.CanRevoke, revoked, registry.ErrRevoked},
		"restore deprecated":        {registry.CanRestore, deprecated, nil},
		"restore ok":                {registry.CanRestore, ok, registry.ErrNotDeprecated},
		"restore revoked":           {registry.CanRestore, revoked, registry.ErrRevoked},
		"unrevoke revoked":          {registry.CanUnrevoke, revoked, nil},
		"unrevoke deprecated":       {registry.CanUnrevoke, deprecated, registry.ErrNotRevoked},
		"revoked is not resolvable": {func(v registry.Version) error { return boolErr(v.Resolvable()) }, revoked, errNo},
		"deprecated is resolvable":  {func(v registry.Version) error { return boolErr(v.Resolvable()) }, deprecated, nil},
	} {
		if got := tc.check(tc.v); !errors.Is(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

var errNo = errors.New("no")

func boolErr(b bool) error {
	if b {
		return nil
	}
	return errNo
}

func TestModuleNamesFollowHCP(t *testing.T) {
	t.Parallel()
	for _, good := range []string{"a", "network", "my-module_2", "A9"} {
		if err := registry.ValidateName(good); err != nil {
			t.Errorf("name %q refused: %v", good, err)
		}
	}
	for _, bad := range []string{"", "-a", "a-", "a_", "a.b", "a/b", "é", string(make([]byte, 65))} {
		if err := registry.ValidateName(bad); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	for _, bad := range []string{"", "AWS", "aws-x", "a_b", "0123456789012345678901234567890123456789012345678901234567890123x"} {
		if err := registry.ValidateProvider(bad); err == nil {
			t.Errorf("provider %q accepted", bad)
		}
	}
}
