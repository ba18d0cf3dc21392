package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// providerModule is a real provider the test builds from its Go module:
// the module proxy serves current releases of hashicorp/time, while the
// null and random providers have none it will serve.
const (
	providerModule  = "github.com/hashicorp/terraform-provider-time"
	providerVersion = "0.14.2"
)

// providerMirror builds the provider with go install and lays it out as an
// OpenTofu filesystem mirror (unpacked layout) in a world-readable
// directory.
func providerMirror(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	gobin := t.TempDir()
	cmd := exec.CommandContext(ctx, "go", "install", providerModule+"@v"+providerVersion)
	cmd.Dir = gobin
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s v%s: %v\n%s", providerModule, providerVersion, err, out)
	}
	mirror := filepath.Join(t.TempDir(), "providers")
	pkg := filepath.Join(mirror, "registry.opentofu.org", "hashicorp", "time", providerVersion, "linux_amd64")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(filepath.Join(gobin, "terraform-provider-time"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "terraform-provider-time_v"+providerVersion), body, 0o755); err != nil {
		t.Fatal(err)
	}
	for p := mirror; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755)
	}
	return mirror
}

const providerConfig = `terraform {
  required_providers {
    time = {
      source  = "hashicorp/time"
      version = "` + providerVersion + `"
    }
  }
}

resource "time_static" "created" {}

output "created" {
  value = time_static.created.rfc3339
}
`

// TestSandboxInstallsProvidersFromTheMirror runs a configuration that
// needs a real provider on a worker whose sandboxes have only the
// operator's mirror (and no network), twice: both plan and apply, and the
// sandbox's tofu init time of each is reported.
func TestSandboxInstallsProvidersFromTheMirror(t *testing.T) {
	t.Parallel()
	mirror := providerMirror(t)
	s := runsStack(t, "CAIRN_PROVIDER_MIRROR="+mirror)
	m := s.newMember(t, "providers")
	ws := s.createWorkspace(t, m, "providers", "us")
	for i := range 2 {
		cfg := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": providerConfig})
		st, r := s.createRun(t, m, ws, cfg, "plan_only")
		if st != 201 {
			t.Fatalf("run %d: %d", i, st)
		}
		r = s.waitRun(t, m, r.ID, 3*time.Minute, status("planned_and_finished", "errored"))
		if r.Status != "planned_and_finished" {
			t.Fatalf("run %d %s (%v); plan log:\n%s", i, r.Status, r.TerminalReason, s.logsOf(t, m, r.ID))
		}
		if log := s.logsOf(t, m, r.ID); !strings.Contains(log, "hashicorp/time v"+providerVersion) {
			t.Fatalf("run %d did not install the mirror's provider:\n%s", i, log)
		}
		for _, a := range r.Evidence.Attempts {
			t.Logf("run %d %s attempt: tofu_init %.0f ms", i+1, a.Phase, a.TimingsMS["tofu_init"])
		}
	}
}
