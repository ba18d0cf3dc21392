package workspace

import (
	"errors"
	"testing"
)

func TestToolVersionsPinAndShowTheirCLI(t *testing.T) {
	t.Parallel()
	offered := ToolVersions{OpenTofu: []string{"1.9.1", "1.10.6"}, Terraform: []string{"1.5.7"}}
	for _, tc := range []struct {
		sent, pinned, shown string
		err                 error
	}{
		{"1.10.6", "1.10.6", "1.10.6", nil},
		{"1.9.1", "1.9.1", "1.9.1", nil},
		{"latest", "1.10.6", "1.10.6", nil},
		{"", "1.10.6", "1.10.6", nil},
		{"1.5.7", "terraform-1.5.7", "1.5.7", nil},
		{"terraform-1.5.7", "", "", ErrToolVersionUnlisted},
		{"1.6.0", "", "", ErrToolVersionUnlisted},
		{"~> 1.5", "", "", ErrToolVersionUnlisted},
	} {
		pinned, err := offered.FromProtocol(tc.sent)
		if pinned != tc.pinned || !errors.Is(err, tc.err) {
			t.Errorf("FromProtocol(%q) = %q, %v; want %q, %v", tc.sent, pinned, err, tc.pinned, tc.err)
		}
		if err == nil && ToProtocol(pinned) != tc.shown {
			t.Errorf("ToProtocol(%q) = %q", pinned, ToProtocol(pinned))
		}
	}
	for pinned, want := range map[string][2]string{
		"1.10.6": {CLITofu, "1.10.6"}, "terraform-1.5.7": {CLITerraform, "1.5.7"},
	} {
		if cli, v := ToolOf(pinned); cli != want[0] || v != want[1] {
			t.Errorf("ToolOf(%q) = %s %s", pinned, cli, v)
		}
	}
	// Without Terraform versions listed, Terraform is never selected.
	if _, err := (ToolVersions{OpenTofu: []string{"1.10.6"}}).FromProtocol("1.5.7"); !errors.Is(err, ErrToolVersionUnlisted) {
		t.Errorf("an unlisted Terraform version: %v", err)
	}
	settings := ExecutionSettings{ToolVersion: "terraform-1.5.7", Region: "us", Platform: "linux_amd64"}
	if err := settings.Validate(offered.Pinned()); err != nil {
		t.Errorf("a listed Terraform version: %v", err)
	}
	if err := settings.Validate([]string{"1.10.6"}); !errors.Is(err, ErrToolVersionUnlisted) {
		t.Errorf("an unlisted Terraform version validates: %v", err)
	}
}
