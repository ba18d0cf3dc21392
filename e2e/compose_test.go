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
			Entrypoint  []string          `yaml:"entrypoint"`
			Volumes     []string          `yaml:"volumes"`
			Deploy      struct {
				Replicas int `yaml:"replicas"`
			} `yaml:"deploy"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("compose.yaml does not parse: %v", err)
	}
	commands := map[string]string{"migrate": "cairn-api migrate", "api": "cairn-api serve", "worker": "cairn-worker", "bff": "cairn-bff",
		"mcp": "cairn-mcp"}
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
		dir := map[string]string{"cairn-api": "api/cmd/cairn-api", "cairn-worker": "jobs/cmd/cairn-worker", "cairn-bff": "bff/cmd/cairn-bff",
			"cairn-mcp": "api/cmd/cairn-mcp"}[binary]
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
	// Scale-out: several API and worker replicas share one object store
	// (the bundled versitygw), never a directory.
	for name, replicas := range map[string]int{"api": 2, "worker": 2} {
		svc := doc.Services[name]
		if svc.Deploy.Replicas < replicas {
			t.Errorf("%s runs %d replicas, want %d", name, svc.Deploy.Replicas, replicas)
		}
		blobURL := svc.Environment["CAIRN_BLOB_URL"]
		if !strings.HasPrefix(blobURL, "s3://") || !strings.Contains(blobURL, "endpoint=http://s3:") {
			t.Errorf("%s stores blobs at %q, not the bundled S3 service", name, blobURL)
		}
		if !strings.Contains(svc.Environment["CAIRN_S3_SECRET_ACCESS_KEY"], ":?") {
			t.Errorf("%s: the S3 secret must be required, never defaulted", name)
		}
		for _, v := range svc.Volumes {
			if strings.HasPrefix(v, "cairn-data:") {
				t.Errorf("%s shares a data volume; replicas must share only PostgreSQL and S3", name)
			}
		}
	}
	s3 := doc.Services["s3"]
	if !strings.Contains(strings.Join(s3.Entrypoint, " "), "versitygw") || s3.Environment["ROOT_ACCESS_KEY_ID"] == "" {
		t.Errorf("the s3 service does not run versitygw with its keys: %v", s3.Entrypoint)
	}
	mirror := doc.Services["worker"].Environment["CAIRN_PROVIDER_MIRROR"]
	mounted := false
	for _, v := range doc.Services["worker"].Volumes {
		parts := strings.Split(v, ":")
		if len(parts) == 3 && parts[1] == mirror && parts[2] == "ro" {
			_, mounted = doc.Volumes[parts[0]]
		}
	}
	if mirror == "" || !mounted {
		t.Errorf("the worker's provider mirror %q is not a read-only named volume", mirror)
	}
}
