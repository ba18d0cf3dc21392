package workspace

import (
	"fmt"
	"slices"
	"strings"
)

// terraformPrefix marks a pinned tool version as HashiCorp Terraform's:
// OpenTofu and Terraform share version numbers (both have a 1.5.7), so the
// CLI a workspace or run pins is part of the pinned string, and a run keeps
// its CLI whatever the operator lists later.
const terraformPrefix = "terraform-"

// CLI names the program of a pinned tool version, as the toolchain mirror
// and the sandbox's PATH name it.
const (
	CLITofu      = "tofu"
	CLITerraform = "terraform"
)

// ErrToolVersionUnlisted means a tool version the operator does not offer
// was asked for: OpenTofu versions come from CAIRN_TOOL_VERSIONS, Terraform
// versions from CAIRN_TERRAFORM_VERSIONS.
var ErrToolVersionUnlisted = fmt.Errorf("%w: tool version not listed in CAIRN_TOOL_VERSIONS or CAIRN_TERRAFORM_VERSIONS", ErrInvalid)

// ToolOf splits a pinned tool version into its CLI and the CLI's own
// version: "1.10.6" is OpenTofu 1.10.6, "terraform-1.5.7" Terraform 1.5.7.
func ToolOf(toolVersion string) (cli, version string) {
	if v, ok := strings.CutPrefix(toolVersion, terraformPrefix); ok {
		return CLITerraform, v
	}
	return CLITofu, toolVersion
}

// ToolVersions are the versions the operator offers: OpenTofu's
// (CAIRN_TOOL_VERSIONS, the first the default) and Terraform's
// (CAIRN_TERRAFORM_VERSIONS, none by default).
type ToolVersions struct {
	OpenTofu  []string
	Terraform []string
}

// Pinned lists every offered version as it is pinned: OpenTofu's as they
// are, then Terraform's marked as such.
func (o ToolVersions) Pinned() []string {
	out := slices.Clone(o.OpenTofu)
	for _, v := range o.Terraform {
		out = append(out, terraformPrefix+v)
	}
	return out
}

// FromProtocol maps a remote-backend `terraform-version` to the version a
// workspace or run pins. Clients of that protocol send a bare version (the
// terraform CLI its own on creating a workspace): a listed Terraform
// version selects Terraform, a listed OpenTofu version OpenTofu, "latest"
// or nothing the newest OpenTofu; anything else is refused.
func (o ToolVersions) FromProtocol(version string) (string, error) {
	switch {
	case version == "" || version == "latest":
		return o.OpenTofu[len(o.OpenTofu)-1], nil
	case slices.Contains(o.Terraform, version):
		return terraformPrefix + version, nil
	case slices.Contains(o.OpenTofu, version):
		return version, nil
	}
	return "", ErrToolVersionUnlisted
}

// ToProtocol is a pinned tool version as the remote-backend protocol shows
// it: the CLI's bare version, which the terraform CLI compares with its
// own.
func ToProtocol(toolVersion string) string {
	_, v := ToolOf(toolVersion)
	return v
}

// OfferedToolVersions are the versions a workspace may pin here, as they
// are pinned: OpenTofu's first (the first of them the default), then
// Terraform's marked as such.
func (s *Service) OfferedToolVersions() []string { return slices.Clone(s.toolVersions) }
