package site

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// settingsPage is the settings tab: name and execution settings.
type settingsPage struct {
	*workspaceShell
	ToolVersions []toolOption
	Regions      []string
	Platforms    []string
	Modes        []string
	Triggers     runTriggersSection
	// Sharing is the "Remote state sharing" section (sharing.go).
	Sharing sharingSection
}

// toolOption is a tool version a workspace may pin, as a form offers it.
type toolOption struct {
	Version    string `json:"version"`
	CLI        string `json:"cli"`
	CLIVersion string `json:"cli_version"`
}

// Label names the program and its version: "OpenTofu 1.10.6",
// "Terraform 1.5.7".
func (t toolOption) Label() string {
	if t.CLI == "terraform" {
		return "Terraform " + t.CLIVersion
	}
	return "OpenTofu " + t.CLIVersion
}

// toolVersions are the versions the operator offers (CAIRN_TOOL_VERSIONS
// and CAIRN_TERRAFORM_VERSIONS), read from the API so the forms offer what
// the API accepts; current, when set and no longer offered, stays first so
// that saving other settings does not change it by accident.
func (s *Site) toolVersions(ctx context.Context, token, current string) ([]toolOption, error) {
	var tools []toolOption
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/tool-versions", nil, &tools); err != nil {
		return nil, err
	}
	if current != "" && !slices.ContainsFunc(tools, func(t toolOption) bool { return t.Version == current }) {
		cli, version := "tofu", current
		if v, ok := strings.CutPrefix(current, "terraform-"); ok {
			cli, version = "terraform", v
		}
		tools = append([]toolOption{{Version: current, CLI: cli, CLIVersion: version}}, tools...)
	}
	return tools, nil
}

func (s *Site) loadSettings(ctx context.Context, _ *http.Request, token string, sh *workspaceShell) (any, error) {
	tools, err := s.toolVersions(ctx, token, sh.Workspace.ExecutionSettings.ToolVersion)
	if err != nil {
		return nil, err
	}
	return settingsPage{workspaceShell: sh, ToolVersions: tools, Regions: []string{"us", "eu"},
		Platforms: []string{"linux_amd64", "linux_arm64"}, Modes: []string{"remote", "local"},
		Triggers: s.loadRunTriggers(ctx, token, sh),
		Sharing:  s.loadSharing(ctx, token, sh.Workspace.ID, sh.Caller.Can("workspace:admin"))}, nil
}

// updateWorkspaceSettings renames the workspace and replaces its execution
// settings and mode in one update; runs already created keep the settings
// version they pinned.
func (s *Site) updateWorkspaceSettings(w http.ResponseWriter, r *http.Request, token string) {
	body := map[string]any{
		"execution_settings": map[string]string{"tool_version": r.PostFormValue("tool_version"),
			"region": r.PostFormValue("region"), "platform": r.PostFormValue("platform")},
		"execution_mode": r.PostFormValue("execution_mode"),
	}
	if name := strings.TrimSpace(r.PostFormValue("name")); name != "" {
		body["name"] = name
	}
	err := s.api.Mutate(r.Context(), token, http.MethodPatch, "/v1/workspaces/"+url.PathEscape(r.PathValue("id")), newKey(), body, nil)
	if err != nil {
		s.refused(w, r, token, "settings", s.loadSettings, err)
		return
	}
	backTo(w, r, "settings", "settings-saved")
}
