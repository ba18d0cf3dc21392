package github_test

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/github/githubfake"
)

// TestAppManifestPinsPermissions pins what the app asks of an
// installation (SPEC §6: Metadata, Contents and Pull requests read,
// Checks write, nothing else), its events, and user authorization during
// installation (the OAuth client credentials the callback needs); the
// setup guide and the fake code host's token answers say the same.
func TestAppManifestPinsPermissions(t *testing.T) {
	t.Parallel()
	m := github.Manifest("Cairn", "https://cairn.example.test/", "https://dash.example.test")
	raw, err := m.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Permissions    map[string]string `json:"default_permissions"`
		Events         []string          `json:"default_events"`
		OAuth          bool              `json:"request_oauth_on_install"`
		SetupURL       string            `json:"setup_url"`
		HookAttributes struct {
			URL string `json:"url"`
		} `json:"hook_attributes"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"metadata": "read", "contents": "read", "pull_requests": "read", "checks": "write"}
	if !maps.Equal(doc.Permissions, want) {
		t.Fatalf("manifest permissions %v, want exactly %v", doc.Permissions, want)
	}
	if !slices.Equal(doc.Events, []string{"push", "pull_request"}) || !doc.OAuth ||
		doc.SetupURL != "https://dash.example.test/api/control-plane/v1/github/installations/callback" ||
		doc.HookAttributes.URL != "https://cairn.example.test/v1/github/webhooks" {
		t.Fatalf("manifest %s", raw)
	}
	guide, err := os.ReadFile("../../docs/using/code-host-app.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"**Permissions**: Metadata read, Contents read, Pull requests read, Checks write.",
		"**Request user authorization (OAuth) during installation**", "`CAIRN_GITHUB_CLIENT_ID`", "`CAIRN_GITHUB_CLIENT_SECRET`"} {
		if !strings.Contains(strings.Join(strings.Fields(string(guide)), " "), line) {
			t.Fatalf("the setup guide does not say %q", line)
		}
	}
	if !maps.Equal(githubfake.TokenPermissions(), want) {
		t.Fatalf("the fake code host grants %v", githubfake.TokenPermissions())
	}
}
