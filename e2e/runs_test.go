package e2e

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// runsStack is a TLS stack whose worker runs sandboxed tofu from the
// repository's toolchain mirror.
func runsStack(t *testing.T, env ...string) *Stack {
	t.Helper()
	tofuBinary(t)
	mirror := filepath.Dir(filepath.Dir(devstack.ToolchainDir(repoRoot(t), "tofu", "1.10.6")))
	return StartStack(t, WithTLS(), WithEnv(append([]string{"CAIRN_TOOLCHAIN_DIR=" + mirror}, env...)...))
}

// runView is the part of a run review the tests read.
type runView struct {
	ID               string   `json:"id"`
	Kind             string   `json:"kind"`
	Status           string   `json:"status"`
	PlanStatus       string   `json:"plan_status"`
	ApplyStatus      string   `json:"apply_status"`
	AvailableActions []string `json:"available_actions"`
	TerminalReason   *string  `json:"terminal_reason"`
	Plan             struct {
		HasChanges                *bool   `json:"has_changes"`
		ResourceAdditions         *int    `json:"resource_additions"`
		PlanDigest                *string `json:"plan_digest"`
		PredecessorStateVersionID *string `json:"predecessor_state_version_id"`
	} `json:"plan"`
	Policy struct {
		ResultDigest *string `json:"result_digest"`
	} `json:"policy"`
	Pinned struct {
		DependencyLockDigest string `json:"dependency_lock_digest"`
	} `json:"pinned"`
	Apply struct {
		StateVersionID *string `json:"state_version_id"`
	} `json:"apply"`
	Decision *struct {
		Action string `json:"action"`
	} `json:"decision"`
	Evidence struct {
		SandboxBaseProfile *string `json:"sandbox_base_profile"`
		workerIdentity
		WorkflowBuild *string `json:"workflow_build"`
		Attempts      []struct {
			Phase                  string             `json:"phase"`
			Status                 string             `json:"status"`
			TerminalClassification *string            `json:"terminal_classification"`
			SandboxID              *string            `json:"sandbox_id"`
			SandboxProfile         *sandboxProfile    `json:"sandbox_profile"`
			Worker                 *workerIdentity    `json:"worker"`
			TimingsMS              map[string]float64 `json:"timings_ms"`
		} `json:"attempts"`
	} `json:"evidence"`
	NotRecorded []string `json:"not_recorded"`
}

// workerIdentity is what a worker recorded of itself on an attempt.
type workerIdentity struct {
	WorkflowID    *string `json:"workflow_id"`
	DefinitionSHA *string `json:"definition_sha"`
	BuildSHA      *string `json:"build_sha"`
	Version       *string `json:"version"`
	Protocol      *string `json:"protocol"`
	PolicyEngine  *string `json:"policy_engine"`
}

// checkWorkerEvidence: every attempt of r, and the run's evidence, name the
// build that really ran: the SHA-256 of the stack's cairn-worker, the
// version and source revision stamped into it (none: reported as not
// recorded), its runner's protocol, its OPA and the River job.
func (s *Stack) checkWorkerEvidence(t *testing.T, r runView) {
	t.Helper()
	exe := filepath.Join(s.bin, "cairn-worker")
	body, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	build, version, revision := hex.EncodeToString(sum[:]), "dev", ""
	for _, setting := range info.Settings {
		switch {
		case setting.Key == "-ldflags":
			for _, flag := range strings.Fields(setting.Value) {
				if v, ok := strings.CutPrefix(flag, "github.com/cairnhq/cairn/api/platform/buildinfo.Version="); ok {
					version = v
				}
				if v, ok := strings.CutPrefix(flag, "github.com/cairnhq/cairn/api/platform/buildinfo.Revision="); ok {
					revision = v
				}
			}
		case setting.Key == "vcs.revision" && revision == "":
			revision = setting.Value
		}
	}
	value := func(p *string) string {
		if p == nil {
			return "<not recorded>"
		}
		return *p
	}
	wantRevision := revision
	if revision == "" {
		wantRevision = "<not recorded>"
		if !slices.Contains(r.NotRecorded, "evidence.definition_sha") {
			t.Errorf("a worker without a revision: not_recorded %v", r.NotRecorded)
		}
	}
	check := func(where string, w workerIdentity) {
		t.Helper()
		for name, got := range map[string][2]string{
			"build_sha": {value(w.BuildSHA), build}, "definition_sha": {value(w.DefinitionSHA), wantRevision},
			"protocol": {value(w.Protocol), "tfe-remote-backend"},
		} {
			if got[0] != got[1] {
				t.Errorf("%s %s = %s, want %s", where, name, got[0], got[1])
			}
		}
		if !strings.HasPrefix(value(w.WorkflowID), "run_phase-") {
			t.Errorf("%s workflow_id = %s", where, value(w.WorkflowID))
		}
	}
	for i, a := range r.Evidence.Attempts {
		if a.Worker == nil {
			t.Fatalf("attempt %d (%s) recorded no worker", i, a.Phase)
		}
		check(a.Phase+" attempt", *a.Worker)
		if value(a.Worker.Version) != version || value(a.Worker.PolicyEngine) != "opa/1.18.2" {
			t.Errorf("%s attempt: version %s, policy engine %s", a.Phase, value(a.Worker.Version), value(a.Worker.PolicyEngine))
		}
	}
	check("run", r.Evidence.workerIdentity)
	if value(r.Evidence.WorkflowBuild) != version || value(r.Evidence.PolicyEngine) != "opa/1.18.2" {
		t.Errorf("run: workflow_build %s, policy engine %s", value(r.Evidence.WorkflowBuild), value(r.Evidence.PolicyEngine))
	}
	last := r.Evidence.Attempts[len(r.Evidence.Attempts)-1].Worker
	if value(r.Evidence.WorkflowID) != value(last.WorkflowID) {
		t.Errorf("run workflow_id %s, want the newest attempt's %s", value(r.Evidence.WorkflowID), value(last.WorkflowID))
	}
}

func (r runView) binding() map[string]any {
	return map[string]any{"plan_digest": *r.Plan.PlanDigest, "policy_result_digest": *r.Policy.ResultDigest,
		"predecessor_state_version_id": r.Plan.PredecessorStateVersionID, "dependency_lock_digest": r.Pinned.DependencyLockDigest}
}

// attemptsOf counts the run's attempts of a phase: an apply that was
// never retried has one.
func (r runView) attemptsOf(phase string) int {
	n := 0
	for _, a := range r.Evidence.Attempts {
		if a.Phase == phase {
			n++
		}
	}
	return n
}

func (m member) cookie() []string {
	return []string{"Cookie", "__Secure-identity.session_token=" + m.session}
}

func (m member) mutate(key string) []string { return append(m.cookie(), "Idempotency-Key", key) }

var keyCounter atomic.Int64

func uniqueKey(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), keyCounter.Add(1))
}

func (s *Stack) uploadConfiguration(t *testing.T, m member, workspaceID string, files map[string]string) string {
	t.Helper()
	status, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/workspaces/"+workspaceID+"/configuration-versions",
		devstack.TarGz(files), append(m.mutate(uniqueKey("cfg")), "Content-Type", "application/gzip")...)
	if status != http.StatusCreated {
		t.Fatalf("configuration upload: %d %s", status, body)
	}
	var doc struct{ Data struct{ ID, Status string } }
	_ = json.Unmarshal(body, &doc)
	return doc.Data.ID
}

func (s *Stack) createRun(t *testing.T, m member, workspaceID, cfgID, kind string) (int, runView) {
	t.Helper()
	var r runView
	st := s.apiJSON(t, http.MethodPost, "/v1/runs", map[string]string{"workspace_id": workspaceID,
		"configuration_version_id": cfgID, "kind": kind, "message": "e2e"}, &r, m.mutate(uniqueKey("run"))...)
	return st, r
}

func (s *Stack) readRun(t *testing.T, m member, runID string) runView {
	t.Helper()
	var r runView
	if st := s.apiJSON(t, http.MethodGet, "/v1/runs/"+runID, nil, &r, m.cookie()...); st != http.StatusOK {
		t.Fatalf("read run %s: %d", runID, st)
	}
	return r
}

func (s *Stack) waitRun(t *testing.T, m member, runID string, timeout time.Duration, done func(runView) bool) runView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r := s.readRun(t, m, runID)
		if done(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s stuck in %s (plan %s, apply %s, attempts %+v)", runID, r.Status, r.PlanStatus, r.ApplyStatus, r.Evidence.Attempts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func status(want ...string) func(runView) bool {
	return func(r runView) bool {
		for _, w := range want {
			if r.Status == w {
				return true
			}
		}
		return false
	}
}

// newestRun waits for the workspace's newest run matching done.
func (s *Stack) newestRun(t *testing.T, m member, workspaceID string, timeout time.Duration, done func(runView) bool) runView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var runs []runView
		s.apiJSON(t, http.MethodGet, "/v1/runs?workspace_id="+workspaceID+"&limit=1", nil, &runs, m.cookie()...)
		if len(runs) > 0 && done(runs[0]) {
			return s.readRun(t, m, runs[0].ID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no matching run appeared")
	return runView{}
}

func (s *Stack) createWorkspace(t *testing.T, m member, name, region string) string {
	t.Helper()
	var project struct{ ID string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/projects", map[string]string{"name": "p-" + name}, &project, m.mutate(uniqueKey("prj"))...); st != http.StatusCreated {
		t.Fatalf("project: %d", st)
	}
	var ws struct{ ID string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/workspaces", map[string]any{"project_id": project.ID, "name": name,
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": region, "platform": "linux_amd64"}},
		&ws, m.mutate(uniqueKey("ws"))...); st != http.StatusCreated {
		t.Fatalf("workspace: %d", st)
	}
	return ws.ID
}

func (s *Stack) setVariable(t *testing.T, m member, workspaceID, key, value string, sensitive, hcl bool) {
	t.Helper()
	if st := s.apiJSON(t, http.MethodPost, "/v1/workspaces/"+workspaceID+"/variables", map[string]any{"key": key, "value": value,
		"sensitive": sensitive, "hcl": hcl}, nil, m.mutate(uniqueKey("var"))...); st != http.StatusCreated {
		t.Fatalf("variable %s: %d", key, st)
	}
}

// logsOf reads every log chunk of a run.
func (s *Stack) logsOf(t *testing.T, m member, runID string) string {
	t.Helper()
	var out strings.Builder
	after := int64(0)
	for {
		var chunks []struct {
			Sequence int64  `json:"sequence"`
			Body     string `json:"body"`
		}
		s.apiJSON(t, http.MethodGet, fmt.Sprintf("/v1/runs/%s/logs?after=%d&limit=100", runID, after), nil, &chunks, m.cookie()...)
		if len(chunks) == 0 {
			return out.String()
		}
		for _, c := range chunks {
			out.WriteString(c.Body)
			after = c.Sequence
		}
	}
}

// rawGet returns a /v1 body as is.
func (s *Stack) rawGet(t *testing.T, m member, path string) string {
	t.Helper()
	_, body := call(t, s.Client, http.MethodGet, s.APIURL+path, nil, m.cookie()...)
	return string(body)
}

const remoteConfig = `terraform {
  cloud {
    hostname     = %q
    organization = %q
    workspaces {
      name = "remote"
    }
  }
}

variable "n" {
  type = number
}

variable "api_key" {
  type      = string
  sensitive = true
}

resource "terraform_data" "item" {
  count = var.n
  input = "item-${count.index}"
}

resource "terraform_data" "credential" {
  input = var.api_key
}

output "count" {
  value = length(terraform_data.item)
}
`

const canary = "canary-7f3b-hunter2-do-not-print"

// interactive lets a tofu command read answers from stdin.
func (r tofuRun) interactive() tofuRun {
	env := make([]string, 0, len(r.env))
	for _, e := range r.env {
		if e != "TF_INPUT=0" {
			env = append(env, e)
		}
	}
	r.env = env
	return r
}

type runningTofu struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *syncBuffer
	done  chan error
}

func (r tofuRun) start(t *testing.T, args ...string) *runningTofu {
	t.Helper()
	cmd := r.command(args...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rt := &runningTofu{cmd: cmd, stdin: stdin, out: out, done: make(chan error, 1)}
	go func() { rt.done <- cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return rt
}

func (rt *runningTofu) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-rt.done:
		return err
	case <-time.After(timeout):
		t.Fatalf("tofu did not finish:\n%s", rt.out.String())
		return nil
	}
}

// TestRemoteOperationsWithTheTofuCLI drives the real OpenTofu CLI in remote
// mode: plans stream from the sandbox, an apply waits for an approval given
// through /v1, another is confirmed at the CLI prompt after a stale
// approval is refused, -auto-approve is refused with its instruction,
// Ctrl-C during a plan cancels the run, and a sensitive variable's value
// appears in no log, review or plan diff.
func TestRemoteOperationsWithTheTofuCLI(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "remote")
	tf := newTofuDir(t, s, m)
	if err := os.WriteFile(filepath.Join(tf.dir, "main.tf"), []byte(fmt.Sprintf(remoteConfig, s.APIHost, m.slug)), 0o644); err != nil {
		t.Fatal(err)
	}
	tf.run(t, "init")
	auth := []string{"Authorization", "Bearer " + m.token}
	st, body := call(t, s.Client, http.MethodPatch, s.APIURL+"/api/v2/organizations/"+m.slug+"/workspaces/remote",
		[]byte(`{"data":{"type":"workspaces","attributes":{"execution-mode":"remote"}}}`), append(auth, "Content-Type", "application/vnd.api+json")...)
	if st != http.StatusOK {
		t.Fatalf("switching to remote execution: %d %s", st, body)
	}
	var doc struct{ Data struct{ ID string } }
	_ = json.Unmarshal(body, &doc)
	wsID := doc.Data.ID
	s.setVariable(t, m, wsID, "n", "2", false, true)
	s.setVariable(t, m, wsID, "api_key", canary, true, false)

	// A CLI plan is a speculative run that streams its plan back.
	out := tf.run(t, "plan")
	if !strings.Contains(out, "Plan: 3 to add, 0 to change, 0 to destroy.") || !strings.Contains(out, "(sensitive value)") {
		t.Fatalf("remote plan output:\n%s", out)
	}
	spec := s.newestRun(t, m, wsID, 10*time.Second, status("planned_and_finished"))
	if spec.Kind != "speculative" || spec.ApplyStatus != "pending" {
		t.Fatalf("speculative run %+v", spec)
	}

	// An apply waits for approval; the approval comes through /v1.
	apply := tf.interactive().start(t, "apply")
	waiting := s.newestRun(t, m, wsID, 60*time.Second, status("awaiting_approval"))
	// Approve once the CLI is at its prompt: it notices the decision made
	// elsewhere and streams the apply.
	waitForOutput(t, apply, "Enter a value:")
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+waiting.ID+"/actions/approve", waiting.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	if err := apply.wait(t, 90*time.Second); err != nil || !strings.Contains(apply.out.String(), "Apply complete! Resources: 3 added") {
		t.Fatalf("apply after /v1 approval (%v):\n%s", err, apply.out.String())
	}
	applied := s.waitRun(t, m, waiting.ID, 10*time.Second, status("applied"))
	var history []struct {
		ID        string                `json:"id"`
		RunID     *string               `json:"run_id"`
		CreatedBy struct{ Kind string } `json:"created_by"`
	}
	s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+wsID+"/state-versions", nil, &history, m.cookie()...)
	if len(history) != 1 || history[0].CreatedBy.Kind != "run" || applied.Apply.StateVersionID == nil || *applied.Apply.StateVersionID != history[0].ID {
		t.Fatalf("published state %+v, run %+v", history, applied.Apply)
	}

	// The next apply is confirmed at the CLI prompt, after a stale approval
	// through /v1 is refused.
	var vars []struct{ ID, Key string }
	s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+wsID+"/variables", nil, &vars, m.cookie()...)
	for _, v := range vars {
		if v.Key == "n" {
			if st := s.apiJSON(t, http.MethodPut, "/v1/workspace-variables/"+v.ID, map[string]any{"value": "4", "hcl": true, "sensitive": false},
				nil, m.mutate(uniqueKey("n"))...); st != http.StatusOK {
				t.Fatalf("update n: %d", st)
			}
		}
	}
	confirm := tf.interactive().start(t, "apply")
	second := s.newestRun(t, m, wsID, 60*time.Second, status("awaiting_approval"))
	stale := second.binding()
	stale["plan_digest"] = strings.Repeat("0", 64)
	st, body = call(t, s.Client, http.MethodPost, s.APIURL+"/v1/runs/"+second.ID+"/actions/approve", mustJSON(stale), m.mutate(uniqueKey("stale"))...)
	if st != http.StatusConflict || !strings.Contains(string(body), "RUN_REVIEW_STALE") {
		t.Fatalf("stale approval: %d %s", st, body)
	}
	waitForOutput(t, confirm, "Enter a value:")
	_, _ = io.WriteString(confirm.stdin, "yes\n")
	if err := confirm.wait(t, 90*time.Second); err != nil || !strings.Contains(confirm.out.String(), "Apply complete! Resources: 2 added") {
		t.Fatalf("apply confirmed at the prompt (%v):\n%s", err, confirm.out.String())
	}
	s.waitRun(t, m, second.ID, 10*time.Second, status("applied"))

	// -auto-approve is refused with the instruction to drop it.
	if out := tf.fail(t, "apply", "-auto-approve"); !strings.Contains(out, "without -auto-approve") {
		t.Fatalf("auto-approve output:\n%s", out)
	}

	// Sensitive values appear nowhere a reader can see.
	for _, r := range []runView{spec, applied, second} {
		for _, text := range []string{s.logsOf(t, m, r.ID), s.rawGet(t, m, "/v1/runs/"+r.ID), s.rawGet(t, m, "/v1/runs/"+r.ID+"/plan-changes")} {
			if strings.Contains(text, canary) {
				t.Fatalf("run %s shows the sensitive value:\n%s", r.ID, text)
			}
		}
	}
	if !strings.Contains(s.rawGet(t, m, "/v1/runs/"+applied.ID+"/plan-changes"), `"terraform_data.credential"`) {
		t.Fatal("plan changes lack the credential resource")
	}
	if strings.Contains(s.Logs(), canary) {
		t.Fatal("process logs carry the sensitive value")
	}

	// Ctrl-C during a (long) plan cancels the run and its sandbox.
	for _, v := range vars {
		if v.Key == "n" {
			s.apiJSON(t, http.MethodPut, "/v1/workspace-variables/"+v.ID, map[string]any{"value": "4000", "hcl": true, "sensitive": false},
				nil, m.mutate(uniqueKey("n"))...)
		}
	}
	// The CLI cancels a remote run on Ctrl-C while it waits for the run
	// (once it streams logs, Ctrl-C only stops the streaming), so the
	// interrupt comes right after the run is created. `tofu apply` it is:
	// `tofu plan` drops the run on interrupt and never offers to cancel.
	plan := tf.interactive().start(t, "apply")
	planning := s.newestRun(t, m, wsID, 60*time.Second, func(r runView) bool {
		return r.Kind == "plan_and_apply" && (r.Status == "plan_queued" || r.Status == "planning")
	})
	// The server has the run before the CLI has read the answer: an
	// interrupt in between only shuts the CLI down. The run's URL is the
	// first thing it prints once it holds the run.
	waitForOutput(t, plan, "To view this run in a browser")
	_ = plan.cmd.Process.Signal(syscall.SIGINT)
	waitForOutput(t, plan, "Do you want to cancel the remote operation?")
	_, _ = io.WriteString(plan.stdin, "yes\n")
	_ = plan.wait(t, 60*time.Second)
	if !strings.Contains(plan.out.String(), "successfully cancelled") {
		t.Fatalf("Ctrl-C output:\n%s", plan.out.String())
	}
	canceled := s.waitRun(t, m, planning.ID, 30*time.Second, func(r runView) bool {
		return r.Status == "canceled" && len(r.Evidence.Attempts) > 0 && r.Evidence.Attempts[0].Status == "canceled"
	})
	if canceled.Decision == nil || canceled.Decision.Action != "canceled" || canceled.PlanStatus != "canceled" {
		t.Fatalf("canceled run %+v", canceled)
	}
}

func waitForOutput(t *testing.T, rt *runningTofu, text string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(rt.out.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("tofu never printed %q:\n%s", text, rt.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

const slowApplyConfig = `resource "terraform_data" "slow" {
  input = "slow"
  provisioner "local-exec" {
    command = "echo provisioning-started; sleep 120"
  }
}
`

// TestWorkerLostDuringApplyGoesToRecovery kills the worker (SIGKILL) in the
// middle of an apply: no tofu of its sandbox keeps running, the next worker
// removes the sandbox directory it left when it starts, the run lands in
// recovery (never a retried apply), and a stepped-up admin resolves it.
func TestWorkerLostDuringApplyGoesToRecovery(t *testing.T) {
	t.Parallel()
	s := runsStack(t, "CAIRN_ATTEMPT_HEARTBEAT_TIMEOUT=2s")
	m := s.newMember(t, "recovery")
	wsID := s.createWorkspace(t, m, "recovery", "us")
	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": slowApplyConfig})
	st, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	r = s.waitRun(t, m, r.ID, 60*time.Second, status("awaiting_approval"))
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(s.logsOf(t, m, r.ID), "provisioning-started") {
		if time.Now().After(deadline) {
			t.Fatalf("apply never started provisioning:\n%s", s.logsOf(t, m, r.ID))
		}
		time.Sleep(200 * time.Millisecond)
	}
	sandboxes := filepath.Join(s.DataDir, "sandboxes")
	before := sandboxProcesses(sandboxes)
	if !strings.Contains(fmt.Sprint(before), "tofu apply") {
		t.Fatalf("control: the apply's tofu is not found among %v", before)
	}
	entries, _ := os.ReadDir(sandboxes)
	left := sandboxDirs(entries)
	if len(left) != 1 {
		t.Fatalf("sandbox directories during the apply: %v", left)
	}
	s.KillWorker(t)
	// Nothing of the sandbox outlives its worker: bwrap dies with it, and
	// its PID namespace with bwrap.
	deadline = time.Now().Add(5 * time.Second)
	for procs := sandboxProcesses(sandboxes); len(procs) > 0; procs = sandboxProcesses(sandboxes) {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox processes survived their worker: %v", procs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(sandboxes, left[0])); err != nil {
		t.Fatalf("control: the dead worker's sandbox directory should still exist: %v", err)
	}
	s.StartWorker(t)
	// The new worker sweeps the dead one's directory (plaintext inputs)
	// when it starts.
	s.waitWorkerHealth(t, http.StatusOK)
	if _, err := os.Stat(filepath.Join(sandboxes, left[0])); !os.IsNotExist(err) {
		t.Errorf("the restarted worker left the dead worker's sandbox %s: %v", left[0], err)
	}
	lost := s.waitRun(t, m, r.ID, 60*time.Second, status("recovery_required"))
	if lost.ApplyStatus != "interrupted" || lost.TerminalReason == nil || *lost.TerminalReason != "worker_lost" ||
		!contains(lost.AvailableActions, "recover") {
		t.Fatalf("lost apply %+v", lost)
	}
	// The evidence is the current state as the admin is shown it.
	var shown []struct {
		ID     string `json:"id"`
		SHA256 string `json:"sha256"`
	}
	s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+wsID+"/state-versions?limit=1", nil, &shown, m.cookie()...)
	recover := map[string]any{"resolution": "current_state_verified", "current_state_version_id": nil, "current_state_digest": "",
		"reason": "checked the infrastructure by hand", "confirm_fence_advance": true}
	if len(shown) > 0 {
		recover["current_state_version_id"], recover["current_state_digest"] = shown[0].ID, shown[0].SHA256
	}
	var recovered runView
	st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/runs/"+r.ID+"/actions/recover", mustJSON(recover), m.mutate(uniqueKey("recover"))...)
	if st != http.StatusOK {
		t.Fatalf("recover: %d %s", st, body)
	}
	var env struct{ Data runView }
	_ = json.Unmarshal(body, &env)
	recovered = env.Data
	if recovered.Status != "recovered" {
		t.Fatalf("recovered run %+v", recovered)
	}
	time.Sleep(3 * time.Second)
	final := s.readRun(t, m, r.ID)
	if final.attemptsOf("apply") != 1 || final.Status != "recovered" {
		t.Fatalf("the apply was retried or the run moved on: %+v", final)
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// TestRegionalCeilingHoldsAcrossWorkspaces runs 20 plans across 5
// workspaces with the "us" sandbox ceiling at 3, and checks from the lease
// rows that no more than 3 sandboxes ever overlapped; an "eu" workspace's
// run is refused and nothing of it persists.
func TestRegionalCeilingHoldsAcrossWorkspaces(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "ceiling")
	setSandboxCeiling(t, s, 3)

	var runs []string
	for i := range 5 {
		wsID := s.createWorkspace(t, m, fmt.Sprintf("ceiling-%d", i), "us")
		cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": `resource "terraform_data" "x" { input = "x" }`})
		for range 4 {
			st, r := s.createRun(t, m, wsID, cfg, "plan_only")
			if st != http.StatusCreated {
				t.Fatalf("create run: %d", st)
			}
			runs = append(runs, r.ID)
		}
	}
	for _, id := range runs {
		s.waitRun(t, m, id, 3*time.Minute, status("planned_and_finished"))
	}
	conn, err := sqlx.Open("postgres", s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var leases, peak int
	if err := conn.Get(&leases, `SELECT count(*) FROM capacity_leases WHERE released_at IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if err := conn.Get(&peak, `SELECT coalesce(max(n), 0) FROM (SELECT (SELECT count(*) FROM capacity_leases o
		WHERE o.acquired_at <= l.acquired_at AND (o.released_at IS NULL OR o.released_at > l.acquired_at)) AS n FROM capacity_leases l) t`); err != nil {
		t.Fatal(err)
	}
	if leases != 20 || peak > 3 || peak < 2 {
		t.Fatalf("leases %d, peak concurrency %d (ceiling 3)", leases, peak)
	}

	eu := s.createWorkspace(t, m, "frankfurt", "eu")
	cfg := s.uploadConfiguration(t, m, eu, map[string]string{"main.tf": `resource "terraform_data" "x" { input = "x" }`})
	st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/runs", mustJSON(map[string]string{"workspace_id": eu,
		"configuration_version_id": cfg, "kind": "plan_only"}), m.mutate(uniqueKey("eu"))...)
	if st != http.StatusServiceUnavailable || !strings.Contains(string(body), "service_unavailable") {
		t.Fatalf("eu run: %d %s", st, body)
	}
	var euRuns int
	_ = conn.Get(&euRuns, `SELECT count(*) FROM runs WHERE workspace_id = $1`, eu)
	if euRuns != 0 {
		t.Fatalf("%d eu runs persisted", euRuns)
	}
}

// setSandboxCeiling rewrites the launch control with another "us" ceiling.
func setSandboxCeiling(t *testing.T, s *Stack, n int) {
	t.Helper()
	rewriteControl(t, s, "ceiling test", func(doc map[string]any) {
		doc["ceilings"].(map[string]any)["sandboxes_per_region"].(map[string]any)["us"] = n
	})
}

// rewriteControl writes a new version of the launch control in force,
// changed by change, through the operator API.
func rewriteControl(t *testing.T, s *Stack, reason string, change func(doc map[string]any)) {
	t.Helper()
	op := []string{"Authorization", "Bearer " + operatorToken}
	_, body := call(t, s.Client, http.MethodGet, s.APIURL+"/operator/v1/launch-control", nil, op...)
	var cur struct {
		Data struct {
			Version  int            `json:"version"`
			Document map[string]any `json:"document"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &cur); err != nil {
		t.Fatal(err)
	}
	change(cur.Data.Document)
	st, body := call(t, s.Client, http.MethodPut, s.APIURL+"/operator/v1/launch-control", mustJSON(map[string]any{
		"expected_version": cur.Data.Version, "reason": reason, "document": cur.Data.Document}),
		append(op, "Idempotency-Key", uniqueKey("control"), "Content-Type", "application/json")...)
	if st != http.StatusOK {
		t.Fatalf("launch control: %d %s", st, body)
	}
}
