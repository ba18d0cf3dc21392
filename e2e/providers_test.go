package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/e2e/devstack"
)

const nullConfig = `terraform {
  cloud {
    hostname     = %q
    organization = %q
    workspaces {
      name = "providers"
    }
  }
}

resource "null_resource" "a" {}
`

// TestRemoteRunsUseTheVerifiedProviderCache runs a configuration with a real
// provider (hashicorp/null, built from its Go module by `make tools`) in
// sandboxes that have no registry: the worker installs it from the
// operator's mirror into its verified cache once, later runs use the cache
// as it is, a tampered cached package fails the run closed with its own
// classification, and the run after that installs it afresh.
func TestRemoteRunsUseTheVerifiedProviderCache(t *testing.T) {
	t.Parallel()
	mirror := devstack.ProviderMirrorDir(repoRoot(t))
	if _, err := os.Stat(filepath.Join(mirror, filepath.FromSlash(devstack.NullProviderSource), devstack.NullProviderVersion+".json")); err != nil {
		t.Fatalf("the provider mirror lacks hashicorp/null (make tools builds it): %v", err)
	}
	s := runsStack(t, "CAIRN_PROVIDER_MIRROR="+mirror)
	m := s.newMember(t, "providers")
	tf := newTofuDir(t, s, m)
	if err := os.WriteFile(filepath.Join(tf.dir, "main.tf"), []byte(fmt.Sprintf(nullConfig, s.APIHost, m.slug)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The local CLI installs from the same mirror: nothing here reaches a
	// registry.
	var rc string
	for _, e := range tf.env {
		if v, ok := strings.CutPrefix(e, "TF_CLI_CONFIG_FILE="); ok {
			rc = v
		}
	}
	f, err := os.OpenFile(rc, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "provider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\n", mirror)
	f.Close()
	tf.run(t, "init")
	auth := []string{"Authorization", "Bearer " + m.token}
	st, body := call(t, s.Client, http.MethodPatch, s.APIURL+"/api/v2/organizations/"+m.slug+"/workspaces/providers",
		[]byte(`{"data":{"type":"workspaces","attributes":{"execution-mode":"remote"}}}`), append(auth, "Content-Type", "application/vnd.api+json")...)
	if st != http.StatusOK {
		t.Fatalf("switching to remote execution: %d %s", st, body)
	}
	var doc struct{ Data struct{ ID string } }
	_ = json.Unmarshal(body, &doc)
	wsID := doc.Data.ID

	// The first run fills the cache; its apply creates the resource.
	apply := tf.interactive().start(t, "apply")
	first := s.newestRun(t, m, wsID, 90*time.Second, status("awaiting_approval", "errored"))
	if first.Status != "awaiting_approval" {
		t.Fatalf("first run %s:\n%s", first.Status, s.logsOf(t, m, first.ID))
	}
	waitForOutput(t, apply, "Enter a value:")
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+first.ID+"/actions/approve", first.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	if err := apply.wait(t, 90*time.Second); err != nil || !strings.Contains(apply.out.String(), "Apply complete! Resources: 1 added") {
		t.Fatalf("apply (%v):\n%s", err, apply.out.String())
	}
	first = s.waitRun(t, m, first.ID, 10*time.Second, status("applied"))

	// The second run finds it there.
	if out := tf.run(t, "plan"); !strings.Contains(out, "No changes.") {
		t.Fatalf("second plan:\n%s", out)
	}
	second := s.newestRun(t, m, wsID, 10*time.Second, status("planned_and_finished"))
	cold, warm := first.Evidence.Attempts[0].TimingsMS, second.Evidence.Attempts[0].TimingsMS
	// Installing the provider for a sandbox is the cache's preparation
	// (verify and unpack the mirror's package once; then only re-hash it)
	// plus tofu init linking the unpacked package.
	coldInstall, warmInstall := cold["provider_cache"]+cold["tofu_init"], warm["provider_cache"]+warm["tofu_init"]
	t.Logf("plan attempt, cache cold: provider_cache %.1f ms + tofu_init %.1f ms = %.1f ms; warm: provider_cache %.1f ms + tofu_init %.1f ms = %.1f ms",
		cold["provider_cache"], cold["tofu_init"], coldInstall, warm["provider_cache"], warm["tofu_init"], warmInstall)
	if warm["provider_cache"] >= cold["provider_cache"] {
		t.Fatalf("preparing a warm cache (%.1f ms) took no less than filling it (%.1f ms)", warm["provider_cache"], cold["provider_cache"])
	}
	// The sum is logged, not compared: tofu init's own time varies by
	// hundreds of milliseconds on a loaded machine, more than the cache
	// saves on one small provider.

	// A cached package changed behind the worker's back is refused: the
	// run fails before tofu starts, and says why.
	binary := filepath.Join(s.DataDir, "providercache", "packages", filepath.FromSlash(devstack.NullProviderSource),
		devstack.NullProviderVersion, runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-null_v"+devstack.NullProviderVersion)
	cached, err := os.OpenFile(binary, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("the cached package: %v", err)
	}
	cached.WriteString("tampered")
	cached.Close()
	tf.fail(t, "plan")
	refused := s.newestRun(t, m, wsID, 30*time.Second, status("errored"))
	if a := refused.Evidence.Attempts; len(a) != 1 || a[0].TerminalClassification == nil || *a[0].TerminalClassification != "provider_cache_checksum_mismatch" {
		t.Fatalf("run over a tampered cache: %+v", refused.Evidence.Attempts)
	}

	// The next run installs the package afresh from the mirror.
	if out := tf.run(t, "plan"); !strings.Contains(out, "No changes.") {
		t.Fatalf("plan after the tampered package was refused:\n%s", out)
	}

	// A lock file pins what tofu accepts: a package whose hash it does not
	// list fails the run with its own classification.
	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": `resource "null_resource" "a" {}`,
		".terraform.lock.hcl": `provider "registry.opentofu.org/hashicorp/null" {
  version = "1.0.0"
  hashes  = ["h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]
}
`})
	st, pinned := s.createRun(t, m, wsID, cfg, "plan_only")
	if st != http.StatusCreated && st != http.StatusOK {
		t.Fatalf("creating the run with a lock file: %d", st)
	}
	pinned = s.waitRun(t, m, pinned.ID, 60*time.Second, status("errored"))
	if a := pinned.Evidence.Attempts; len(a) != 1 || a[0].TerminalClassification == nil || *a[0].TerminalClassification != "provider_checksum_mismatch" {
		t.Fatalf("run whose lock file pins other hashes: %+v", pinned.Evidence.Attempts)
	}
}
