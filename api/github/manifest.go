package github

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// Permissions are everything the app asks of an installation (SPEC §6
// Check runs): reading the repository's metadata, contents and pull
// requests, and writing check runs. No contents write, administration,
// Actions, packages, members, commit statuses or pull-request writes (so
// no comments): a change here is a change of what every installation
// grants, and the manifest test pins it.
var Permissions = map[string]string{"metadata": "read", "contents": "read", "pull_requests": "read", "checks": "write"}

// Events are the deliveries the app subscribes to; installation and
// installation_repositories arrive without a subscription.
var Events = []string{"push", "pull_request"}

// AppManifest is a GitHub App manifest (the provider's "register an app
// from a manifest" flow) for one Cairn deployment. Besides the
// permissions, it turns on user authorization during installation: the
// installation callback proves who installed with the OAuth code, so the
// app's client ID and secret (CAIRN_GITHUB_CLIENT_ID and
// CAIRN_GITHUB_CLIENT_SECRET) are part of its configuration.
type AppManifest struct {
	Name                  string            `json:"name"`
	URL                   string            `json:"url"`
	HookAttributes        map[string]any    `json:"hook_attributes"`
	SetupURL              string            `json:"setup_url"`
	RequestOAuthOnInstall bool              `json:"request_oauth_on_install"`
	SetupOnUpdate         bool              `json:"setup_on_update"`
	Public                bool              `json:"public"`
	DefaultPermissions    map[string]string `json:"default_permissions"`
	DefaultEvents         []string          `json:"default_events"`
}

// Manifest is the app manifest of a deployment whose API answers at
// publicURL and dashboard at dashboardURL.
func Manifest(name, publicURL, dashboardURL string) AppManifest {
	return AppManifest{
		Name: name, URL: strings.TrimSuffix(dashboardURL, "/"),
		HookAttributes:        map[string]any{"url": strings.TrimSuffix(publicURL, "/") + "/v1/github/webhooks", "active": true},
		SetupURL:              strings.TrimSuffix(dashboardURL, "/") + "/api/control-plane/v1/github/installations/callback",
		RequestOAuthOnInstall: true, SetupOnUpdate: false, Public: false,
		DefaultPermissions: maps.Clone(Permissions), DefaultEvents: slices.Clone(Events),
	}
}

// JSON is the manifest as the provider takes it.
func (m AppManifest) JSON() ([]byte, error) { return json.MarshalIndent(m, "", "  ") }
