package v1_test

import (
	"net/http"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// TestToolVersionsListWhatWorkspacesMayPin: the list is the operator's
// OpenTofu versions then its Terraform ones, each as a workspace pins it,
// and every version it lists is one a workspace can pin.
func TestToolVersionsListWhatWorkspacesMayPin(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, func(s *apitest.Settings) {
		s.Config.ToolVersions = []string{"1.10.6"}
		s.Config.TerraformVersions = []string{"1.5.7"}
	})
	owner := env.WithOrganization("Tools")
	var tools []struct {
		Version    string `json:"version"`
		CLI        string `json:"cli"`
		CLIVersion string `json:"cli_version"`
	}
	owner.Get("/v1/tool-versions").MustStatus(t, http.StatusOK).Data(t, &tools)
	if len(tools) != 2 || tools[0].Version != "1.10.6" || tools[0].CLI != "tofu" ||
		tools[1].Version != "terraform-1.5.7" || tools[1].CLI != "terraform" || tools[1].CLIVersion != "1.5.7" {
		t.Fatalf("tool versions: %+v", tools)
	}
	proj := newProject(t, owner, "P")
	for _, tool := range tools {
		owner.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": proj, "name": "ws-" + tool.CLI,
			"execution_settings": map[string]string{"tool_version": tool.Version, "region": "us", "platform": "linux_amd64"}}).
			MustStatus(t, http.StatusCreated)
	}
	env.Anonymous().Get("/v1/tool-versions").MustStatus(t, http.StatusUnauthorized)
}
