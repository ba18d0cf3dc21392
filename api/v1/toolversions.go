package v1

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/workspace"
)

// ToolVersionView is one tool version a workspace may pin.
type ToolVersionView struct {
	ID     string `json:"id" doc:"The version string, as version."`
	Object string `json:"object" enum:"tool_version"`
	// Version is the string a workspace's execution_settings.tool_version
	// takes.
	Version string `json:"version" doc:"What execution_settings.tool_version takes: an OpenTofu version as it is (1.10.6), a Terraform one prefixed (terraform-1.5.7)."`
	CLI     string `json:"cli" enum:"tofu,terraform" doc:"The program runs of a workspace pinning it start in the sandbox."`
	// CLIVersion is the program's own version.
	CLIVersion string `json:"cli_version"`
}

func (a *API) registerToolVersions() {
	register(a, huma.Operation{
		OperationID: "list-tool-versions", Method: http.MethodGet, Path: "/v1/tool-versions",
		Summary: "List the tool versions workspaces may pin", Tags: []string{"Workspaces"},
		Description: "The operator's CAIRN_TOOL_VERSIONS (OpenTofu) and CAIRN_TERRAFORM_VERSIONS (Terraform), in that order.",
	}, operationOptions{}, func(ctx context.Context, _ *struct{}) (*Listed[ToolVersionView], error) {
		return whole(ctx, a, func(access.Principal) ([]ToolVersionView, error) {
			var out []ToolVersionView
			for _, v := range a.deps.Services.Workspaces.OfferedToolVersions() {
				cli, version := workspace.ToolOf(v)
				out = append(out, ToolVersionView{ID: v, Object: "tool_version", Version: v, CLI: cli, CLIVersion: version})
			}
			return out, nil
		})
	})
}
