package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestComposeFileIsCoherent parses compose.yaml (Docker cannot run here) and
// checks that it starts what Cairn needs: PostgreSQL, migrations before the
// processes, every process with the required secrets, and commands that
// exist in this source tree.
func TestComposeFileIsCoherent(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			DependsOn   yaml.Node         `yaml:"depends_on"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("compose.yaml does not parse: %v", err)
	}
	commands := map[string]string{"migrate": "cairn-api migrate", "api": "cairn-api serve", "worker": "cairn-worker", "bff": "cairn-bff"}
	if _, ok := doc.Services["postgres"]; !ok {
		t.Fatal("no postgres service")
	}
	for name, want := range commands {
		svc, ok := doc.Services[name]
		if !ok {
			t.Fatalf("no %s service", name)
		}
		if got := strings.Join(svc.Command, " "); got != want {
			t.Errorf("%s runs %q, want %q", name, got, want)
		}
		binary := strings.Fields(want)[0]
		dir := map[string]string{"cairn-api": "api/cmd/cairn-api", "cairn-worker": "jobs/cmd/cairn-worker", "cairn-bff": "bff/cmd/cairn-bff"}[binary]
		if _, err := os.Stat(filepath.Join(repoRoot(t), dir, "main.go")); err != nil {
			t.Errorf("%s: no source for %s", name, binary)
		}
		for _, v := range []string{"DATABASE_URL", "AUTH_SECRET", "CAIRN_MASTER_KEY", "IDEMPOTENCY_HMAC_KEY"} {
			if svc.Environment[v] == "" {
				t.Errorf("%s lacks %s", name, v)
			}
		}
		if !strings.Contains(svc.Environment["AUTH_SECRET"], ":?") {
			t.Errorf("%s: AUTH_SECRET must be required, never defaulted", name)
		}
	}
	for _, name := range []string{"api", "worker"} {
		var deps map[string]struct {
			Condition string `yaml:"condition"`
		}
		node := doc.Services[name].DependsOn
		if err := node.Decode(&deps); err != nil || deps["migrate"].Condition != "service_completed_successfully" {
			t.Errorf("%s must start after migrations completed", name)
		}
	}
}
