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
	ToolVersions []string
	Regions      []string
	Platforms    []string
	Modes        []string
	Triggers     runTriggersSection
	// Sharing is the "Remote state sharing" section (sharing.go).
	Sharing sharingSection
}

// supportedToolVersions are the OpenTofu versions the create form offers;
// the API validates the exact version either way.
var supportedToolVersions = []string{"1.10.6"}

func (s *Site) loadSettings(ctx context.Context, _ *http.Request, token string, sh *workspaceShell) (any, error) {
	tools := supportedToolVersions
	if current := sh.Workspace.ExecutionSettings.ToolVersion; current != "" && !slices.Contains(tools, current) {
		tools = append([]string{current}, tools...)
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
