package e2e

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/e2e/devstack"
	"github.com/cairnhq/cairn/jobs/sandbox"
)

// sandboxProfile is an attempt's recorded sandbox profile.
type sandboxProfile struct {
	Driver     string   `json:"driver"`
	Isolation  string   `json:"isolation"`
	Reason     *string  `json:"reason"`
	Namespaces []string `json:"namespaces"`
	Base       *string  `json:"base"`
	BaseDigest *string  `json:"base_digest"`
	User       *string  `json:"user"`
	Memory     struct {
		Limit     uint64 `json:"limit"`
		Mechanism string `json:"mechanism"`
	} `json:"memory"`
	Processes struct {
		Limit     uint64 `json:"limit"`
		Mechanism string `json:"mechanism"`
	} `json:"processes"`
}

// workerSecrets are the values of the stack's environment a sandbox must
// never see.
func (s *Stack) workerSecrets() map[string]string {
	out := map[string]string{}
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "AUTH_SECRET", "CAIRN_MASTER_KEY", "DATABASE_URL", "CAIRN_OPERATOR_TOKEN", "IDEMPOTENCY_HMAC_KEY":
			out[k] = v
		}
	}
	return out
}

// probeConfig is a configuration whose provisioner, at apply, reads every
// process's environment, lists the data directory and tries to write
// outside its sandbox: into the data directory, the sandbox root and
// another directory of the host (outside). It reports each write's fate.
func probeConfig(dataDir, outside string) string {
	return fmt.Sprintf(`resource "terraform_data" "probe" {
  triggers_replace = timestamp()
  provisioner "local-exec" {
    command = <<-EOT
      echo "own-environ-lines: $(tr '\0' '\n' < /proc/self/environ | grep -c =)"
      for f in /proc/[0-9]*/environ; do echo "== $f"; tr '\0' '\n' < "$f"; echo; done 2>&1
      echo "== listing"
      ls -la %[1]s %[1]s/sandboxes 2>&1
      for p in %[1]s/planted %[1]s/sandboxes/planted %[2]s/planted; do
        if echo x > "$p" 2>/dev/null; then echo "planted-on-host $p"; else echo "write-refused $p"; fi
      done
      echo probe-done
    EOT
  }
}
`, dataDir, outside)
}

// TestSandboxedProvisionerSeesNoWorkerSecrets drives the tofu CLI in remote
// mode through an apply whose provisioner hunts for the worker's secrets:
// the run log holds none of them, its writes outside the sandbox fail, and
// the evidence names the namespaces it ran in. The same configuration on a
// worker the operator runs without namespaces does leak (the check can
// fail), and that run's evidence says it was unisolated.
func TestSandboxedProvisionerSeesNoWorkerSecrets(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "probe")
	outside := t.TempDir()
	tf := newTofuDir(t, s, m)
	main := fmt.Sprintf(`terraform {
  cloud {
    hostname     = %q
    organization = %q
    workspaces {
      name = "probe"
    }
  }
}
`, s.APIHost, m.slug) + probeConfig(s.DataDir, outside)
	if err := os.WriteFile(filepath.Join(tf.dir, "main.tf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	tf.run(t, "init")
	auth := []string{"Authorization", "Bearer " + m.token}
	st, body := call(t, s.Client, http.MethodPatch, s.APIURL+"/api/v2/organizations/"+m.slug+"/workspaces/probe",
		[]byte(`{"data":{"type":"workspaces","attributes":{"execution-mode":"remote"}}}`), append(auth, "Content-Type", "application/vnd.api+json")...)
	if st != http.StatusOK {
		t.Fatalf("switching to remote execution: %d %s", st, body)
	}
	var doc struct{ Data struct{ ID string } }
	_ = json.Unmarshal(body, &doc)
	wsID := doc.Data.ID

	apply := tf.interactive().start(t, "apply")
	waitForOutput(t, apply, "Enter a value:")
	_, _ = io.WriteString(apply.stdin, "yes\n")
	if err := apply.wait(t, 120*time.Second); err != nil || !strings.Contains(apply.out.String(), "Apply complete!") {
		t.Fatalf("apply (%v):\n%s", err, apply.out.String())
	}
	r := s.newestRun(t, m, wsID, 10*time.Second, status("applied"))
	log := s.logsOf(t, m, r.ID)
	for _, text := range []string{log, apply.out.String()} {
		out := provisionerOutput(text)
		// The provisioner ran and could read its own environment.
		if !strings.Contains(out, "probe-done\n") || !strings.Contains(out, "own-environ-lines: ") {
			t.Fatalf("the probe did not run:\n%s", text)
		}
		for name, secret := range s.workerSecrets() {
			if strings.Contains(text, secret) {
				t.Errorf("the sandbox saw the worker's %s", name)
			}
		}
		if strings.Contains(out, "planted-on-host") || strings.Count(out, "write-refused") != 3 {
			t.Errorf("a write outside the sandbox was not refused:\n%s", out)
		}
		for _, name := range []string{"blobs", "toolcache", "tls"} {
			if strings.Contains(out, " "+name+"\n") {
				t.Errorf("the sandbox lists the data directory's %s:\n%s", name, out)
			}
		}
	}
	for _, p := range []string{filepath.Join(s.DataDir, "planted"), filepath.Join(s.DataDir, "sandboxes", "planted"), filepath.Join(outside, "planted")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists on the host", p)
			_ = os.Remove(p)
		}
	}
	r = s.readRun(t, m, r.ID)
	if r.Evidence.SandboxBaseProfile == nil || *r.Evidence.SandboxBaseProfile != "local-namespaces" {
		t.Errorf("sandbox_base_profile %v, want local-namespaces", r.Evidence.SandboxBaseProfile)
	}
	base, err := sandbox.OpenBase(devstack.SandboxBaseDir(repoRoot(t)), "")
	if err != nil {
		t.Fatal(err)
	}
	s.checkWorkerEvidence(t, r)
	for _, a := range r.Evidence.Attempts {
		t.Logf("%s attempt: sandbox_create %.1f ms, toolchain_install %.1f ms, tofu_init %.1f ms", a.Phase,
			a.TimingsMS["sandbox_create"], a.TimingsMS["toolchain_install"], a.TimingsMS["tofu_init"])
		p := a.SandboxProfile
		if p == nil || p.Isolation != "namespaces" || !contains(p.Namespaces, "pid") || !contains(p.Namespaces, "mount") ||
			p.Memory.Limit == 0 || p.Processes.Limit == 0 || p.Processes.Mechanism == "none" {
			t.Errorf("%s attempt profile %+v", a.Phase, p)
		}
		// SPEC §1 rule 10: the evidence names the managed base it started
		// from, as its BASE.json records it.
		if p != nil && (p.Base == nil || *p.Base != base.Version || p.BaseDigest == nil || *p.BaseDigest != base.Digest) {
			t.Errorf("%s attempt base %v %v, want %s %s", a.Phase, p.Base, p.BaseDigest, base.Version, base.Digest)
		}
	}

	// Control: the same configuration on a worker without namespaces.
	s.KillWorker(t)
	s.StartWorker(t, "CAIRN_SANDBOX_ISOLATION=none")
	direct := s.createWorkspace(t, m, "unisolated", "us")
	cfg := s.uploadConfiguration(t, m, direct, map[string]string{"main.tf": probeConfig(s.DataDir, outside)})
	st, open := s.createRun(t, m, direct, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	open = s.waitRun(t, m, open.ID, 60*time.Second, status("awaiting_approval"))
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+open.ID+"/actions/approve", open.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	open = s.waitRun(t, m, open.ID, 60*time.Second, status("applied"))
	if leaked := provisionerOutput(s.logsOf(t, m, open.ID)); !strings.Contains(leaked, s.workerSecrets()["AUTH_SECRET"]) || !strings.Contains(leaked, "planted-on-host") {
		t.Errorf("control: an unisolated sandbox should read the worker's environment and write the host:\n%s", leaked)
	}
	if open.Evidence.SandboxBaseProfile == nil || *open.Evidence.SandboxBaseProfile != "local-unisolated" {
		t.Errorf("unisolated run's sandbox_base_profile %v", open.Evidence.SandboxBaseProfile)
	}
}

// provisionerOutput is what local-exec provisioners printed, without the
// command lines tofu echoes before running them.
func provisionerOutput(log string) string {
	var out strings.Builder
	for _, line := range strings.Split(log, "\n") {
		_, after, ok := strings.Cut(line, "(local-exec): ")
		if ok && !strings.HasPrefix(after, "Executing: ") {
			out.WriteString(after + "\n")
		}
	}
	return out.String()
}

// workerHealth reads the worker's /health.
func (s *Stack) workerHealth(t *testing.T) (int, map[string]any) {
	t.Helper()
	st, body := call(t, http.DefaultClient, http.MethodGet, s.WorkerHealthURL, nil)
	var h map[string]any
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("worker health %d: %s", st, body)
	}
	return st, h
}

func (s *Stack) waitWorkerHealth(t *testing.T, want int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.WorkerHealthURL)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				_, h := s.workerHealth(t)
				return h
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker health never answered %d (%v)", want, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWorkerWithoutBwrapRefusesPhases replaces the worker with one that
// finds no bwrap (a PATH without it) and default settings: it says why in
// its log and /health, an approved apply ends errored with
// sandbox_isolation_unavailable instead of going to recovery (nothing ran),
// and a new plan ends the same way.
func TestWorkerWithoutBwrapRefusesPhases(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "nobwrap")
	if h := s.waitWorkerHealth(t, http.StatusOK); h["status"] != "ok" {
		t.Fatalf("health of a worker with bwrap: %v", h)
	}
	wsID := s.createWorkspace(t, m, "nobwrap", "us")
	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": `resource "terraform_data" "x" { input = "x" }`})
	st, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	r = s.waitRun(t, m, r.ID, 60*time.Second, status("awaiting_approval"))

	s.KillWorker(t)
	s.StartWorker(t, "PATH=/nonexistent-for-this-test")
	h := s.waitWorkerHealth(t, http.StatusServiceUnavailable)
	sb, _ := h["sandbox"].(map[string]any)
	if h["status"] != "unavailable" || sb == nil || sb["ready"] != false || sb["reason"] != "bwrap_not_found" ||
		!strings.Contains(fmt.Sprint(sb["detail"]), "bwrap") {
		t.Fatalf("health without bwrap: %v", h)
	}
	t.Logf("worker health without bwrap: %v", h)
	if !strings.Contains(s.Logs(), "sandbox isolation unavailable") {
		t.Error("the worker did not log why it refuses phases")
	}

	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	refused := s.waitRun(t, m, r.ID, 30*time.Second, status("errored", "recovery_required"))
	checkRefused := func(r runView, phase string) {
		t.Helper()
		if r.Status != "errored" || r.TerminalReason == nil || *r.TerminalReason != "sandbox_isolation_unavailable" {
			t.Fatalf("refused %s: status %s, reason %v", phase, r.Status, r.TerminalReason)
		}
		last := r.Evidence.Attempts[len(r.Evidence.Attempts)-1]
		if last.Phase != phase || last.TerminalClassification == nil || *last.TerminalClassification != "sandbox_isolation_unavailable" ||
			last.SandboxProfile == nil || last.SandboxProfile.Isolation != "unavailable" || last.SandboxID != nil {
			t.Fatalf("refused %s attempt %+v (profile %+v)", phase, last, last.SandboxProfile)
		}
		if log := s.logsOf(t, m, r.ID); !strings.Contains(log, "cannot isolate sandboxes") || !strings.Contains(log, "nothing was changed") ||
			!strings.Contains(log, "docs/operating/sandboxes.md#when-isolation-is-unavailable") {
			t.Errorf("the run log does not say why:\n%s", log)
		}
	}
	checkRefused(refused, "apply")
	if refused.ApplyStatus != "errored" || contains(refused.AvailableActions, "recover") {
		t.Errorf("refused apply: apply status %s, actions %v", refused.ApplyStatus, refused.AvailableActions)
	}
	// The plan ran on the first worker, namespaced; the refusal is recorded
	// too, and the base profile names the isolation that ran user code.
	if refused.Evidence.SandboxBaseProfile == nil || *refused.Evidence.SandboxBaseProfile != "local-namespaces" {
		t.Errorf("sandbox_base_profile %v", refused.Evidence.SandboxBaseProfile)
	}

	st, plan := s.createRun(t, m, wsID, cfg, "plan_only")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	plan = s.waitRun(t, m, plan.ID, 30*time.Second, status("errored", "planned_and_finished"))
	checkRefused(plan, "plan")
	if plan.Evidence.SandboxBaseProfile == nil || *plan.Evidence.SandboxBaseProfile != "local-isolation-unavailable" {
		t.Errorf("refused plan's sandbox_base_profile %v", plan.Evidence.SandboxBaseProfile)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.DataDir, "sandboxes")); len(sandboxDirs(entries)) != 0 {
		t.Errorf("a refusing worker left sandbox directories: %v", sandboxDirs(entries))
	}

	// SPEC §1 rule 10: a worker whose managed base changed after it was
	// built (one file of it edited) refuses phases the same way, with bwrap
	// working: no sandbox starts from a base that is not the one recorded.
	s.KillWorker(t)
	changed := filepath.Join(t.TempDir(), "base")
	if out, err := exec.Command("cp", "-a", devstack.SandboxBaseDir(repoRoot(t)), changed).CombinedOutput(); err != nil {
		t.Fatalf("copying the base: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(changed, "rootfs", "etc", "passwd"), []byte("root:x:0:0::/:/bin/sh\nintruder:x:0:0::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.StartWorker(t, "CAIRN_SANDBOX_BASE="+changed)
	h = s.waitWorkerHealth(t, http.StatusServiceUnavailable)
	if sb, _ := h["sandbox"].(map[string]any); sb == nil || sb["reason"] != "sandbox_base_unavailable" ||
		!strings.Contains(fmt.Sprint(sb["detail"]), "changed after it was built") {
		t.Fatalf("health with a changed base: %v", h)
	}
	st, plan = s.createRun(t, m, wsID, cfg, "plan_only")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	plan = s.waitRun(t, m, plan.ID, 30*time.Second, status("errored", "planned_and_finished"))
	if plan.Status != "errored" || plan.TerminalReason == nil || *plan.TerminalReason != "sandbox_isolation_unavailable" {
		t.Fatalf("plan on a changed base: status %s, reason %v", plan.Status, plan.TerminalReason)
	}
	last := plan.Evidence.Attempts[len(plan.Evidence.Attempts)-1]
	if last.SandboxID != nil || last.SandboxProfile == nil || last.SandboxProfile.Reason == nil || *last.SandboxProfile.Reason != "sandbox_base_unavailable" {
		t.Fatalf("plan attempt on a changed base %+v (profile %+v)", last, last.SandboxProfile)
	}
	if log := s.logsOf(t, m, plan.ID); !strings.Contains(log, "sandbox_base_unavailable") || !strings.Contains(log, "#the-managed-base") {
		t.Errorf("the run log does not say why:\n%s", log)
	}
}

func sandboxDirs(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "sbx_") || strings.HasPrefix(e.Name(), ".new-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestMemoryHungryProvisionerIsStopped runs a provisioner that needs about
// 3 GiB under a 2 GiB ceiling: the hog is stopped, the attempt ends with a
// recorded result, the worker stays healthy and runs the next run.
func TestMemoryHungryProvisionerIsStopped(t *testing.T) {
	t.Parallel()
	s := runsStack(t, "CAIRN_SANDBOX_MEMORY_MIB=2048")
	m := s.newMember(t, "hog")
	wsID := s.createWorkspace(t, m, "hog", "us")
	hog := `resource "terraform_data" "hog" {
  input = "hog"
  provisioner "local-exec" {
    command = <<-EOT
      awk 'BEGIN { s = "x"; for (i = 0; i < 31; i++) s = s s; print "hog-finished", length(s) }'
      echo "hog-exit=$?"
    EOT
  }
}
`
	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": hog})
	st, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	r = s.waitRun(t, m, r.ID, 60*time.Second, status("awaiting_approval"))
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	start := time.Now()
	r = s.waitRun(t, m, r.ID, 90*time.Second, status("applied", "errored", "recovery_required"))
	log := provisionerOutput(s.logsOf(t, m, r.ID))
	if strings.Contains(log, "hog-finished") || !strings.Contains(log, "hog-exit=") || strings.Contains(log, "hog-exit=0") {
		t.Fatalf("the hog was not stopped by the ceiling:\n%s", log)
	}
	if r.Status != "applied" {
		t.Errorf("the attempt did not end cleanly: %s (%v)", r.Status, r.TerminalReason)
	}
	apply := r.Evidence.Attempts[len(r.Evidence.Attempts)-1]
	if apply.SandboxProfile == nil || apply.SandboxProfile.Memory.Limit != 2048<<20 {
		t.Errorf("apply profile %+v", apply.SandboxProfile)
	}
	t.Logf("hog stopped by %s (%d MiB) in an apply of %s: %s", apply.SandboxProfile.Memory.Mechanism,
		apply.SandboxProfile.Memory.Limit>>20, time.Since(start).Round(time.Millisecond), hogLine(log))
	if h := s.waitWorkerHealth(t, http.StatusOK); h["status"] != "ok" {
		t.Errorf("worker health after the hog: %v", h)
	}
	after := s.createWorkspace(t, m, "after-hog", "us")
	st, next := s.createRun(t, m, after,
		s.uploadConfiguration(t, m, after, map[string]string{"main.tf": `resource "terraform_data" "x" { input = "x" }`}), "plan_only")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	s.waitRun(t, m, next.ID, 60*time.Second, status("planned_and_finished"))
}

func hogLine(log string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "hog-exit=") || strings.Contains(l, "out of memory") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// sandboxProcesses lists processes whose environment places them in a
// sandbox under root, by PID.
func sandboxProcesses(root string) map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !strings.Contains(string(env), "HOME="+root+"/") {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if len(cmdline) > 0 {
			out[pid] = strings.ReplaceAll(string(cmdline), "\x00", " ")
		}
	}
	return out
}

// TestApplyLeftoversAreReadOnlyInsideTheSandbox plants, from an apply's
// provisioner, an errored.tfstate that links to a state file of the host
// outside the sandbox, then fails the apply. The worker must not follow the
// link: what it seals as the emergency state (which recovery could import
// into the workspace, where the tenant reads it) comes from the sandbox
// only, so the host file's content never becomes the run's evidence.
func TestApplyLeftoversAreReadOnlyInsideTheSandbox(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "leftover")
	victim := filepath.Join(t.TempDir(), "terraform.tfstate")
	body := `{"version":4,"terraform_version":"1.10.6","serial":7,"lineage":"another-tenants-lineage","outputs":{"db_password":{"value":"another-tenants-secret","type":"string"}},"resources":[]}`
	if err := os.WriteFile(victim, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	victimSum := fmt.Sprintf("%x", sha256.Sum256([]byte(body)))
	wsID := s.createWorkspace(t, m, "leftover", "us")
	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": fmt.Sprintf(`resource "terraform_data" "plant" {
  provisioner "local-exec" {
    command = "ln -s %s errored.tfstate && echo planted-link && exit 1"
  }
}
`, victim)})
	st, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	r = s.waitRun(t, m, r.ID, 90*time.Second, status("awaiting_approval"))
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	r = s.waitRun(t, m, r.ID, 90*time.Second, status("errored", "recovery_required"))
	logs := s.logsOf(t, m, r.ID)
	if !strings.Contains(logs, "planted-link") {
		t.Fatalf("the provisioner did not plant its link:\n%s", logs)
	}
	rec := s.readRecovery(t, m, r.ID)
	if d := rec.Apply.EmergencyStateDigest; d != nil && *d == victimSum {
		t.Fatalf("the worker sealed a host file outside the sandbox as the run's emergency state (sha256 %s)", *d)
	}
	if !strings.Contains(logs, "errored.tfstate that is not a regular file of its sandbox") {
		t.Errorf("the log does not say the planted errored.tfstate was not kept:\n%s", logs)
	}
}

// TestTamperedToolchainEndsTheAttemptWithItsEvidence: a toolchain whose
// binary does not hash to its SHA256SUMS entry never runs. The attempt
// ends toolchain_checksum_mismatch before any tofu command, yet, like any
// attempt that got a sandbox, with that sandbox's evidence recorded and a
// log that says which phase, tool and sandbox it was: the worker enters
// the sandbox early, and a failure there must not skip either.
func TestTamperedToolchainEndsTheAttemptWithItsEvidence(t *testing.T) {
	t.Parallel()
	binary := tofuBinary(t)
	mirror := t.TempDir()
	dir := filepath.Join(mirror, "tofu", "1.10.6")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(binary, filepath.Join(dir, "tofu")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(strings.Repeat("0", 64)+"  tofu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := StartStack(t, WithTLS(), WithEnv("CAIRN_TOOLCHAIN_DIR="+mirror))
	m := s.newMember(t, "tampered")
	wsID := s.createWorkspace(t, m, "tampered", "us")
	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": `resource "terraform_data" "x" { input = "x" }`})
	st, r := s.createRun(t, m, wsID, cfg, "plan_only")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	r = s.waitRun(t, m, r.ID, 60*time.Second, status("errored", "planned_and_finished"))
	if r.Status != "errored" || len(r.Evidence.Attempts) == 0 {
		t.Fatalf("run over a tampered toolchain: %s, attempts %+v", r.Status, r.Evidence.Attempts)
	}
	last := r.Evidence.Attempts[len(r.Evidence.Attempts)-1]
	if last.TerminalClassification == nil || *last.TerminalClassification != "toolchain_checksum_mismatch" {
		t.Fatalf("attempt classification %v, want toolchain_checksum_mismatch", last.TerminalClassification)
	}
	if last.SandboxID == nil || last.SandboxProfile == nil || last.SandboxProfile.Isolation != "namespaces" {
		t.Errorf("the attempt's sandbox evidence: id %v, profile %+v", last.SandboxID, last.SandboxProfile)
	}
	log := s.logsOf(t, m, r.ID)
	if !strings.Contains(log, "Cairn plan phase of "+r.ID) || !strings.Contains(log, "OpenTofu 1.10.6") ||
		last.SandboxID == nil || !strings.Contains(log, "Sandbox "+*last.SandboxID) {
		t.Errorf("the run log lacks its banner:\n%s", log)
	}
	if strings.Contains(log, "Initializing") {
		t.Errorf("tofu ran from a tampered toolchain:\n%s", log)
	}
}
