package workspace

import (
	"errors"
	"strings"
	"testing"
)

func TestDerivedNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, slug, cloud string }{
		{"app", "app", "app"},
		{"Networking: Prod (EU)", "networking-prod-eu", "Networking-Prod-EU"},
		{"already_valid-Name", "already-valid-name", "already_valid-Name"},
		{"  ümlaut café ", "mlaut-caf", "mlaut-caf"},
		{"!!!", "workspace", "workspace"},
		{strings.Repeat("ab", 60), strings.Repeat("ab", 45), strings.Repeat("ab", 45)},
	} {
		if got := BaseSlug(tc.name); got != tc.slug {
			t.Errorf("BaseSlug(%q) = %q, want %q", tc.name, got, tc.slug)
		}
		if got := BaseCloudName(tc.name); got != tc.cloud {
			t.Errorf("BaseCloudName(%q) = %q, want %q", tc.name, got, tc.cloud)
		}
	}
	long := strings.Repeat("a", MaxSlugLength)
	if got := WithSuffix(long, 12); len(got) != MaxSlugLength || !strings.HasSuffix(got, "-12") {
		t.Fatalf("WithSuffix on a full-length base = %q", got)
	}
	if WithSuffix("app", 1) != "app" || WithSuffix("app", 2) != "app-2" {
		t.Fatal("suffix numbering")
	}
}

func TestVariableRules(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"", "-abc", "has space", strings.Repeat("k", 129), "a.b", "é"} {
		if ValidateKey(key) == nil {
			t.Errorf("key %q accepted", key)
		}
	}
	if ValidateKey("TF_var-name_1") != nil || !IsIdentifier("TF_var-name_1") || !IsIdentifier("_x") {
		t.Error("valid key refused")
	}
	// HCP's clients write UUIDs as keys: stored, but never an identifier a
	// run passes to tofu.
	if key := "3f2a9c1e-77b0-4c1d-9d52-0e4c8a1b2c3d"; ValidateKey(key) != nil || IsIdentifier(key) {
		t.Errorf("UUID key %q: stored %v, identifier %v", key, ValidateKey(key) == nil, IsIdentifier(key))
	}
	if IsIdentifier("") || IsIdentifier("9") {
		t.Error("a non-identifier passes as one")
	}
	if err := ValidateValue(strings.Repeat("x", MaxValueBytes+1), false); err == nil {
		t.Error("oversized value accepted")
	}
	if ValidateValue(strings.Repeat("x", MaxValueBytes), false) != nil {
		t.Error("value of exactly the limit refused")
	}
	if err := ValidateValue("a\x00b", false); err == nil {
		t.Error("NUL accepted")
	}
	for value, ok := range map[string]bool{`["a", "b"]`: true, `{ x = 1 }`: true, `"str"`: true, `{ x = `: false, `[1,`: false} {
		err := ValidateValue(value, true)
		if (err == nil) != ok || (!ok && !errors.Is(err, ErrInvalidHCL)) {
			t.Errorf("hcl %q: %v", value, err)
		}
	}
}
