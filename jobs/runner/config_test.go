package runner

import (
	"strings"
	"testing"
)

// TestCLIConfigNamesTheMirrorAsTheOnlySource: with a mirror the sandbox's
// CLI configuration installs providers from it alone (no direct block, so
// a closed network never reaches for a registry), and a value that could
// break out of its string stays inside it.
func TestCLIConfigNamesTheMirrorAsTheOnlySource(t *testing.T) {
	t.Parallel()
	for mirror, want := range map[string]string{
		"":                            "",
		"/srv/providers":              `filesystem_mirror {` + "\n" + `    path = "/srv/providers"`,
		"https://mirror.example/prov": `network_mirror {` + "\n" + `    url = "https://mirror.example/prov/"`,
	} {
		got := string(cliConfigFile("cairn.example:8443", "rat_\"}\nevil {", mirror))
		if !strings.Contains(got, `credentials "cairn.example:8443" {`) || !strings.Contains(got, `token = "rat_\"}\nevil {"`) {
			t.Fatalf("credentials for %q:\n%s", mirror, got)
		}
		if mirror == "" && strings.Contains(got, "provider_installation") {
			t.Fatalf("no mirror, yet:\n%s", got)
		}
		if mirror != "" && (!strings.Contains(got, want) || strings.Contains(got, "direct")) {
			t.Fatalf("mirror %q:\n%s", mirror, got)
		}
	}
}
