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
		// The host's services are named, so no command asks for them.
		if !strings.Contains(got, `host "cairn.example:8443" {`+"\n"+`  services = {`) || !strings.Contains(got, `"tfe.v2.1" = "/api/v2/"`) {
			t.Fatalf("host services for %q:\n%s", mirror, got)
		}
		if mirror == "" && strings.Contains(got, "provider_installation") {
			t.Fatalf("no mirror, yet:\n%s", got)
		}
		if mirror != "" && (!strings.Contains(got, want) || strings.Contains(got, "direct")) {
			t.Fatalf("mirror %q:\n%s", mirror, got)
		}
	}
}

// TestPublisherTextStaysOnOneLine: a deprecation reason cannot start a
// log line of its own that would pass for the runner's or the CLI's.
func TestPublisherTextStaysOnOneLine(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"use 2.x":                          "use 2.x",
		"use 2.x\nWarning: forged":         "use 2.x Warning: forged",
		"a\r\nb\tc\x1b[31md\u2028e\u0085f": "a  b c [31md e f",
	} {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}
