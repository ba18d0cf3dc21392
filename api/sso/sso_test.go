package sso

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestSplitGroupsReadsRepeatedAndCommaSeparatedValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{[]string{"platform"}, []string{"platform"}},
		{[]string{"platform, data", "Data"}, []string{"platform", "data", "Data"}},
		{[]string{" , platform,,platform"}, []string{"platform"}},
		{nil, nil},
	} {
		if got := SplitGroups(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("SplitGroups(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTrustedCallbackOnlyOnTheDashboardOrigin(t *testing.T) {
	t.Parallel()
	const dash = "https://dash.example.com"
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://dash.example.com/sign-in/complete?next=/w", true},
		{"https://DASH.example.com/x", true},
		{"http://dash.example.com/x", false},
		{"https://dash.example.com:8443/x", false},
		{"https://dash.example.com.evil.example/x", false},
		{"https://user@dash.example.com/x", false},
		{"/relative", false},
		{"javascript:alert(1)", false},
	} {
		err := TrustedCallback(dash, tc.url)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrCallbackURL)) {
			t.Errorf("TrustedCallback(%q) = %v, want ok=%t", tc.url, err, tc.ok)
		}
	}
}

func TestFinishRedirectCarriesOneOutcome(t *testing.T) {
	t.Parallel()
	f := Finish{CallbackURL: "https://dash.example.com/done?next=%2Fw", SignInCode: "c0de"}
	if got := f.Redirect(""); got != "https://dash.example.com/done?next=%2Fw&signInCode=c0de" {
		t.Errorf("success: %s", got)
	}
	if got := f.Redirect("ID_TOKEN_INVALID"); got != "https://dash.example.com/done?next=%2Fw&signInError=ID_TOKEN_INVALID" {
		t.Errorf("failure: %s", got)
	}
}

// TestSplitGroupsIsLinear: an identity provider can assert hundreds of
// thousands of groups; reading them must not take quadratic time (with
// deduplication by scanning, this input took minutes of CPU).
func TestSplitGroupsIsLinear(t *testing.T) {
	t.Parallel()
	values := make([]string, 0, 100_000)
	for i := range 100_000 {
		values = append(values, "group-"+strconv.Itoa(i))
	}
	start := time.Now()
	if got := SplitGroups(append(values, "group-7")); len(got) != len(values) {
		t.Fatalf("%d groups, want %d", len(got), len(values))
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("reading 100,000 groups took %s", took)
	}
}
