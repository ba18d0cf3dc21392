package e2e

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealBinariesServeHealthReadinessAndContract is what `make run`
// promises: the processes come up against a migrated database, /health and
// /ready answer 200, and /v1/openapi.json is the committed contract.
func TestRealBinariesServeHealthReadinessAndContract(t *testing.T) {
	t.Parallel()
	s := StartStack(t)
	if status, body := get(t, s.APIURL+"/health"); status != http.StatusOK || !strings.Contains(string(body), `"database":true`) {
		t.Fatalf("health %d %s", status, body)
	}
	if status, body := get(t, s.APIURL+"/ready"); status != http.StatusOK {
		t.Fatalf("ready %d %s", status, body)
	}
	status, spec := get(t, s.APIURL+"/v1/openapi.json")
	committed, err := os.ReadFile(filepath.Join(repoRoot(t), "contracts", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusOK || !bytes.Equal(spec, committed) {
		t.Fatalf("served contract differs from contracts/openapi.json (status %d)", status)
	}
	if status, body := get(t, s.DashboardURL+"/"); status != http.StatusOK || !strings.Contains(string(body), "is up") {
		t.Fatalf("dashboard %d %s", status, body)
	}
}

// TestBootstrapAndLaunchCommands runs the operator commands `make run` uses:
// a fresh installation's bootstrap opens the public gate as the first
// control version, and the launch commands change it with evidence.
func TestBootstrapAndLaunchCommands(t *testing.T) {
	t.Parallel()
	s := StartStack(t, WithoutLaunchControl())
	first := s.Run(t, "bootstrap")
	if !strings.Contains(first, "password:") || !strings.Contains(first, "open for every organization (launch control version 1)") {
		t.Fatalf("first bootstrap said:\n%s", first)
	}
	second := s.Run(t, "bootstrap")
	if strings.Contains(second, "password:") || !strings.Contains(second, "already exists") {
		t.Fatalf("second bootstrap said:\n%s", second)
	}
	var dataDir string
	for _, kv := range s.Env {
		if v, ok := strings.CutPrefix(kv, "CAIRN_DATA_DIR="); ok {
			dataDir = v
		}
	}
	creds, err := os.ReadFile(filepath.Join(dataDir, "dev-credentials"))
	if err != nil || !strings.Contains(string(creds), "email=owner@cairn.localhost") {
		t.Fatalf("credentials file: %v %s", err, creds)
	}
	if info, _ := os.Stat(filepath.Join(dataDir, "dev-credentials")); info.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode %v", info.Mode().Perm())
	}
	show := s.Run(t, "launch", "show")
	if !strings.Contains(show, "version 1") || !strings.Contains(show, `"public_gate": true`) || strings.Contains(show, "launched_organizations") {
		t.Fatalf("launch show:\n%s", show)
	}
	// The operator API reads the same control with its token only.
	if status, _ := get(t, s.APIURL+"/operator/v1/launch-control"); status != http.StatusUnauthorized {
		t.Fatalf("operator API without token = %d", status)
	}
	status, body := get(t, s.APIURL+"/operator/v1/launch-control", "Authorization", "Bearer e2e-operator-token-0123456789abcdef0123456789")
	if status != http.StatusOK || !strings.Contains(string(body), `"version":1`) {
		t.Fatalf("operator API = %d %s", status, body)
	}

	// Suspend and lift name the version they replace; a retry with the
	// key replays, and a stale version is refused.
	suspend := []string{"launch", "suspend", "-organization", "local", "-expected-version", "0", "-reason", "e2e check", "-key", "e2e-s1"}
	if out := s.Run(t, suspend...); !strings.Contains(out, "suspension version 1 recorded: suspended true") || !strings.Contains(out, "replayed false") {
		t.Fatalf("suspend:\n%s", out)
	}
	if out := s.Run(t, suspend...); !strings.Contains(out, "replayed true") {
		t.Fatalf("suspend retried:\n%s", out)
	}
	if out, err := s.RunErr("launch", "lift", "-organization", "local", "-expected-version", "0", "-reason", "done", "-key", "e2e-l1"); err == nil ||
		!strings.Contains(out, "suspension version conflict") {
		t.Fatalf("stale lift: %v\n%s", err, out)
	}
	s.Run(t, "launch", "lift", "-organization", "local", "-expected-version", "1", "-reason", "done", "-key", "e2e-l2")
	if out := s.Run(t, "launch", "suspensions", "-organization", "local"); !strings.Contains(out, `"version": 2`) ||
		!strings.Contains(out, `"suspended": false`) || !strings.Contains(out, "e2e check") {
		t.Fatalf("suspensions:\n%s", out)
	}
}
