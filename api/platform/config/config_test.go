package config

import (
	"strings"
	"testing"
	"time"
)

func TestSandboxSettings(t *testing.T) {
	t.Parallel()
	cfg, err := LoadFrom(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SandboxIsolation != "namespaces" || cfg.SandboxBwrap != "" || cfg.SandboxMemoryMiB != 4096 ||
		cfg.SandboxMaxProcesses != 1024 || cfg.SandboxCgroup != "auto" || cfg.WorkerHealthAddr != "127.0.0.1:8071" ||
		cfg.SandboxBase != ".tools/sandbox-base" || cfg.SandboxBaseDigest != "" {
		t.Errorf("defaults %+v", cfg)
	}
	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"old auto":             {map[string]string{"CAIRN_SANDBOX_BWRAP": "auto"}, "CAIRN_SANDBOX_ISOLATION"},
		"old never":            {map[string]string{"CAIRN_SANDBOX_BWRAP": "never"}, "CAIRN_SANDBOX_ISOLATION"},
		"relative bwrap":       {map[string]string{"CAIRN_SANDBOX_BWRAP": "bin/bwrap"}, "absolute"},
		"unknown isolation":    {map[string]string{"CAIRN_SANDBOX_ISOLATION": "auto"}, "namespaces or none"},
		"tiny memory":          {map[string]string{"CAIRN_SANDBOX_MEMORY_MIB": "8"}, "MEMORY_MIB"},
		"tiny process ceiling": {map[string]string{"CAIRN_SANDBOX_MAX_PROCESSES": "2"}, "MAX_PROCESSES"},
		"GOGC too low":         {map[string]string{"CAIRN_SANDBOX_GOGC": "10"}, "CAIRN_SANDBOX_GOGC"},
		"API GOGC too high":    {map[string]string{"CAIRN_API_GOGC": "5000"}, "CAIRN_API_GOGC"},
		"API memory limit under the hashing budget": {map[string]string{"CAIRN_API_MEMORY_LIMIT_MIB": "150"}, "CAIRN_API_MEMORY_LIMIT_MIB"},
		"public profiler":       {map[string]string{"CAIRN_PPROF_ADDR": "0.0.0.0:6060"}, "CAIRN_PPROF_ADDR"},
		"profiler, no port":     {map[string]string{"CAIRN_PPROF_ADDR": "127.0.0.1"}, "CAIRN_PPROF_ADDR"},
		"relative cgroup":       {map[string]string{"CAIRN_SANDBOX_CGROUP": "cairn"}, "CAIRN_SANDBOX_CGROUP"},
		"root's user IDs":       {map[string]string{"CAIRN_SANDBOX_UID_BASE": "0"}, "UID_BASE"},
		"health without a port": {map[string]string{"CAIRN_WORKER_HEALTH_ADDR": "localhost"}, "HEALTH_ADDR"},
		"hasty sweeps":          {map[string]string{"CAIRN_SANDBOX_SWEEP_INTERVAL": "1s"}, "SWEEP_INTERVAL"},
		"no phase timeout":      {map[string]string{"CAIRN_PHASE_TIMEOUT": "0s"}, "CAIRN_PHASE_TIMEOUT"},
		"mirror over the data":  {map[string]string{"CAIRN_DATA_DIR": "/srv/cairn/data", "CAIRN_PROVIDER_MIRROR": "/srv/cairn"}, "outside CAIRN_DATA_DIR"},
		"mirror in the data":    {map[string]string{"CAIRN_DATA_DIR": "/srv/cairn/data", "CAIRN_PROVIDER_MIRROR": "/srv/cairn/data/mirror"}, "outside CAIRN_DATA_DIR"},
	} {
		if _, err := LoadFrom(tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", name, err, tc.want)
		}
	}
	for _, env := range []map[string]string{
		{"CAIRN_SANDBOX_ISOLATION": "none"},
		{"CAIRN_SANDBOX_BWRAP": "/usr/local/bin/bwrap", "CAIRN_SANDBOX_CGROUP": "/sys/fs/cgroup/cairn.slice"},
		{"CAIRN_WORKER_HEALTH_ADDR": "off", "CAIRN_SANDBOX_CGROUP": "off"},
		{"CAIRN_DATA_DIR": "/srv/cairn/data", "CAIRN_PROVIDER_MIRROR": "/srv/cairn/data-mirror"},
	} {
		if _, err := LoadFrom(env); err != nil {
			t.Errorf("%v: %v", env, err)
		}
	}
}

// TestPolicyBuildLifetimeIs15MinutesByDefault: a policy build's sandbox
// (and with it the build job, which gets a minute more to store outputs)
// lives 15 minutes unless configured (SPEC §8); e2e TestPolicyLimitsOfARun
// shows the configured lifetime ending a build.
func TestPolicyBuildLifetimeIs15MinutesByDefault(t *testing.T) {
	t.Parallel()
	cfg, err := LoadFrom(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PolicyBuildTimeout != 15*time.Minute {
		t.Errorf("PolicyBuildTimeout %s, want 15m", cfg.PolicyBuildTimeout)
	}
	if _, err := LoadFrom(map[string]string{"CAIRN_POLICY_BUILD_TIMEOUT": "0s"}); err == nil {
		t.Error("a zero build lifetime was accepted")
	}
}

func TestIdempotencyKeyMustBeStrong(t *testing.T) {
	t.Parallel()
	for value, strong := range map[string]bool{
		"HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=": true,  // 32 distinct bytes
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=": false, // 32 zero bytes
		"YWJhYmFiYWJhYmFiYWJhYmFiYWJhYmFiYWJhYmFiYWI=": false, // "ab" repeated
		"c2hvcnQ=": false, // too short
		"":         false,
	} {
		cfg, err := LoadFrom(map[string]string{"IDEMPOTENCY_HMAC_KEY": value})
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.IdempotencyKeyBytes() != nil; got != strong {
			t.Errorf("IDEMPOTENCY_HMAC_KEY %q accepted = %v, want %v", value, got, strong)
		}
		if cfg.Bindings()["idempotency_hmac_key"] != strong {
			t.Errorf("health binding for %q disagrees", value)
		}
	}
}

func TestBlobPrefixIsARelativePathNormalised(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{"": "", "cairn": "cairn", "teams/cairn-prod/": "teams/cairn-prod"} {
		cfg, err := LoadFrom(map[string]string{"CAIRN_BLOB_PREFIX": raw})
		if err != nil || cfg.BlobPrefix != want {
			t.Errorf("CAIRN_BLOB_PREFIX=%q: %q, %v; want %q", raw, cfg.BlobPrefix, err, want)
		}
	}
	for _, raw := range []string{"/cairn", "../cairn", "cairn/../other", "cairn//", "a//b", "a b", strings.Repeat("a", 257)} {
		if _, err := LoadFrom(map[string]string{"CAIRN_BLOB_PREFIX": raw}); err == nil || !strings.Contains(err.Error(), "CAIRN_BLOB_PREFIX") {
			t.Errorf("CAIRN_BLOB_PREFIX=%q: %v, want an error naming the variable", raw, err)
		}
	}
}

func TestTerraformVersionsAreExactAndNoneByDefault(t *testing.T) {
	t.Parallel()
	cfg, err := LoadFrom(map[string]string{})
	if err != nil || len(cfg.TerraformVersions) != 0 {
		t.Fatalf("default = %v, %v", cfg.TerraformVersions, err)
	}
	cfg, err = LoadFrom(map[string]string{"CAIRN_TERRAFORM_VERSIONS": "1.5.7"})
	if err != nil || len(cfg.TerraformVersions) != 1 || cfg.TerraformVersions[0] != "1.5.7" {
		t.Fatalf("parsed = %v, %v", cfg.TerraformVersions, err)
	}
	for _, env := range []map[string]string{
		{"CAIRN_TERRAFORM_VERSIONS": "~> 1.5"},
		{"CAIRN_TERRAFORM_VERSIONS": "latest"},
		// A bare version must name one CLI on the remote-backend protocol.
		{"CAIRN_TERRAFORM_VERSIONS": "1.10.6"},
	} {
		if _, err := LoadFrom(env); err == nil || !strings.Contains(err.Error(), "CAIRN_TERRAFORM_VERSIONS") {
			t.Errorf("%v accepted or not named: %v", env, err)
		}
	}
}
