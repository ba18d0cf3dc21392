package sso

import (
	"errors"
	"slices"
	"testing"
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
