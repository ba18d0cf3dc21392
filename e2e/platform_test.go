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

// TestBootstrapAndLaunchCommands runs the operator commands `make run` uses.
func TestBootstrapAndLaunchCommands(t *testing.T) {
	t.Parallel()
	s := StartStack(t)
	first := s.Run(t, "bootstrap")
	if !strings.Contains(first, "password:") || !strings.Contains(first, `open for organization "local" only`) {
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
	if !strings.Contains(show, "version 1") || !strings.Contains(show, `"public_gate": false`) {
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
}
