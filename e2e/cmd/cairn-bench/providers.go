package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// benchProviderConfig uses hashicorp/null, which `make tools` builds into
// the provider mirror; each round changes the trigger so every run plans.
const benchProviderConfig = `resource "null_resource" "r" {
  triggers = { round = "%d" }
}
`

// benchProviderInit measures `tofu init` of a configuration with a real
// provider inside the sandbox with the worker's provider cache cold
// (emptied before the run: verify, unpack, then init) and warm (re-hash,
// then init linking the unpacked package), against direct tofu installing
// from the same mirror with a warm local plugin cache.
func benchProviderInit(ctx context.Context, dbURL string, rounds int) error {
	mirror, err := devstack.EnsureProviderMirror(context.Background(), ".", os.Stderr)
	if err != nil {
		return err
	}
	m, err := startManagedStack(dbURL, "providers", "CAIRN_PROVIDER_MIRROR="+mirror)
	if err != nil {
		return err
	}
	defer m.stop()
	api, c, session := m.api, m.api.Client, m.session
	cache := filepath.Join(api.DataDir, "providercache")
	run := func(round int) (map[string]float64, error) {
		var cfg struct{ ID string }
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces/"+m.workspace+"/configuration-versions", session,
			devstack.TarGz(map[string]string{"main.tf": fmt.Sprintf(benchProviderConfig, round)}), "application/gzip", &cfg); err != nil {
			return nil, err
		}
		var r benchRun
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/runs", session, jsonBody(map[string]string{"workspace_id": m.workspace,
			"configuration_version_id": cfg.ID, "kind": "plan_only"}), "application/json", &r); err != nil {
			return nil, err
		}
		deadline := time.Now().Add(2 * time.Minute)
		for r.Status != "planned_and_finished" {
			if time.Now().After(deadline) || r.Status == "errored" || r.Status == "canceled" {
				return nil, fmt.Errorf("provider bench run %s is %s", r.ID, r.Status)
			}
			time.Sleep(20 * time.Millisecond)
			if _, err := v1(c, http.MethodGet, api.URL+"/v1/runs/"+r.ID, session, nil, "", &r); err != nil {
				return nil, err
			}
		}
		if len(r.Evidence.Attempts) == 0 {
			return nil, fmt.Errorf("provider bench run %s has no attempt", r.ID)
		}
		return r.Evidence.Attempts[0].TimingsMS, nil
	}
	var coldCache, coldInit, warmCache, warmInit []float64
	for round := 0; round <= rounds; round++ {
		if err := os.RemoveAll(cache); err != nil {
			return err
		}
		cold, err := run(2 * round)
		if err != nil {
			return err
		}
		warm, err := run(2*round + 1)
		if err != nil {
			return err
		}
		if round == 0 {
			continue // warm-up: first toolchain verification
		}
		coldCache, coldInit = append(coldCache, cold["provider_cache"]), append(coldInit, cold["tofu_init"])
		warmCache, warmInit = append(warmCache, warm["provider_cache"]), append(warmInit, warm["tofu_init"])
	}
	direct, err := directProviderInit(ctx, mirror, rounds)
	if err != nil {
		return err
	}
	cold, warm := median(coldCache)+median(coldInit), median(warmCache)+median(warmInit)
	fmt.Printf("tofu init with hashicorp/null, median of %d rounds:\n", rounds)
	fmt.Printf("  sandbox, cache cold  %7.1f ms  (cache fill %6.1f ms + init %6.1f ms)\n", cold, median(coldCache), median(coldInit))
	fmt.Printf("  sandbox, cache warm  %7.1f ms  (cache check %6.1f ms + init %6.1f ms)  cold/warm x%.2f\n",
		warm, median(warmCache), median(warmInit), cold/warm)
	fmt.Printf("  direct, plugin cache %7.1f ms  warm sandbox/direct x%.2f\n", direct, warm/direct)
	return nil
}

// directProviderInit times `tofu init` outside any sandbox, installing
// from the mirror through a warm local plugin cache, as an operator's own
// machine would.
func directProviderInit(ctx context.Context, mirror string, rounds int) (float64, error) {
	tofu, err := filepath.Abs(filepath.Join(devstack.ToolchainDir(".", "tofu", "1.10.6"), "tofu"))
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "cairn-bench-providers-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	rc := filepath.Join(dir, "tofurc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("plugin_cache_dir = %q\nprovider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\n",
		filepath.Join(dir, "plugins"), mirror)), 0o644); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "plugins"), 0o755); err != nil {
		return 0, err
	}
	work := filepath.Join(dir, "work")
	env := append(os.Environ(), "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1", "HOME="+dir, "TF_CLI_CONFIG_FILE="+rc)
	var times []float64
	for round := 0; round <= rounds; round++ {
		if err := os.RemoveAll(work); err != nil {
			return 0, err
		}
		if err := os.MkdirAll(work, 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(work, "main.tf"), []byte(fmt.Sprintf(benchProviderConfig, round)), 0o644); err != nil {
			return 0, err
		}
		cmd := tool(ctx, tofu, "init", "-input=false", "-no-color")
		cmd.Dir, cmd.Env = work, env
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("direct tofu init: %v\n%s", err, out)
		}
		if round > 0 {
			times = append(times, ms64(time.Since(start)))
		}
	}
	return median(times), nil
}
