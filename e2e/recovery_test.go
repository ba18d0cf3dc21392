package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/e2e/devstack"
	"github.com/jmoiron/sqlx"
)

// firstThenProvisionerConfig creates one resource at once and a second one
// whose provisioner runs the command given (%q), with the first already
// created: a long sleep lets a test interrupt the apply in the middle, a
// nonzero exit fails it there. The sleeps differ per test, so a test can
// look for its own leftover processes.
const firstThenProvisionerConfig = `resource "terraform_data" "first" {
  input = "created-first"
}

resource "terraform_data" "second" {
  input      = "second"
  depends_on = [terraform_data.first]
  provisioner "local-exec" {
    command = %q
  }
}
`

// recoveryView is the part of a review that recovery reads.
type recoveryView struct {
	runView
	Apply struct {
		StateVersionID       *string `json:"state_version_id"`
		EmergencyStateDigest *string `json:"emergency_state_digest"`
	} `json:"apply"`
	Recovery *struct {
		CurrentStateVersionID *string `json:"current_state_version_id"`
		CurrentStateDigest    string  `json:"current_state_digest"`
		EmergencyStateDigest  *string `json:"emergency_state_digest"`
	} `json:"recovery"`
}

func (s *Stack) readRecovery(t *testing.T, m member, runID string) recoveryView {
	t.Helper()
	var r recoveryView
	if st := s.apiJSON(t, http.MethodGet, "/v1/runs/"+runID, nil, &r, m.cookie()...); st != http.StatusOK {
		t.Fatalf("read run %s: %d", runID, st)
	}
	return r
}

// applyingMidway plans and approves firstThenProvisionerConfig with a
// provisioner that sleeps, and returns once its apply is provisioning the
// second resource.
func (s *Stack) applyingMidway(t *testing.T, m member, name string, sleep int) (string, runView) {
	t.Helper()
	wsID := s.createWorkspace(t, m, name, "us")
	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": fmt.Sprintf(firstThenProvisionerConfig, fmt.Sprintf("echo provisioning-started; sleep %d", sleep))})
	st, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	r = s.waitRun(t, m, r.ID, 90*time.Second, status("awaiting_approval"))
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(s.logsOf(t, m, r.ID), "provisioning-started") {
		if time.Now().After(deadline) {
			t.Fatalf("apply never started provisioning:\n%s", s.logsOf(t, m, r.ID))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return wsID, r
}

// currentState downloads the workspace's current state through /api/v2
// with the member's API token, with its version ID and SHA-256 as /v1
// lists them.
func (s *Stack) currentState(t *testing.T, m member, wsID string) (id, sha256, body string) {
	t.Helper()
	var shown []struct {
		ID     string `json:"id"`
		SHA256 string `json:"sha256"`
	}
	s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+wsID+"/state-versions?limit=1", nil, &shown, m.cookie()...)
	if len(shown) == 0 {
		return "", "", ""
	}
	st, raw := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/state-versions/"+shown[0].ID+"/download", nil,
		"Authorization", "Bearer "+m.token)
	if st != http.StatusOK {
		t.Fatalf("downloading state %s: %d %s", shown[0].ID, st, raw)
	}
	return shown[0].ID, shown[0].SHA256, string(raw)
}

// TestCanceledApplyRecoversFromItsEmergencyState cancels an apply in the
// middle of a provisioner: the cancel revokes the run token, tofu gets its
// interrupt and keeps the state it can no longer push as errored.tfstate,
// which is sealed as the run's emergency state. The run lands in recovery
// with that state's digest in its review; a stepped-up admin imports it,
// and it becomes the workspace's current state, the resource created
// before the interrupt included.
func TestCanceledApplyRecoversFromItsEmergencyState(t *testing.T) {
	t.Parallel()
	s := runsStack(t, "CAIRN_APPLY_INTERRUPT_GRACE=30s")
	m := s.newMember(t, "cancel")
	wsID, r := s.applyingMidway(t, m, "canceled-apply", 197)

	var canceled runView
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/cancel", nil, &canceled, m.mutate(uniqueKey("cancel"))...); st != http.StatusOK {
		t.Fatalf("cancel: %d", st)
	}
	if canceled.Status != "applying" || canceled.Decision == nil || canceled.Decision.Action != "canceled" || contains(canceled.AvailableActions, "cancel") {
		t.Fatalf("just canceled apply %+v", canceled)
	}
	canceledAt := time.Now()
	s.waitRun(t, m, r.ID, 60*time.Second, status("recovery_required"))
	t.Logf("cancel to recovery_required with the emergency state sealed: %s", time.Since(canceledAt).Round(10*time.Millisecond))
	rec := s.readRecovery(t, m, r.ID)
	if rec.ApplyStatus != "interrupted" || rec.TerminalReason == nil || *rec.TerminalReason != "apply_canceled" ||
		!contains(rec.AvailableActions, "recover") || len(rec.Evidence.Attempts) != 2 || rec.Evidence.Attempts[1].Status != "canceled" {
		t.Fatalf("canceled apply in recovery %+v", rec)
	}
	if rec.Apply.EmergencyStateDigest == nil || rec.Recovery == nil || rec.Recovery.EmergencyStateDigest == nil ||
		*rec.Recovery.EmergencyStateDigest != *rec.Apply.EmergencyStateDigest {
		t.Fatalf("no emergency state in the review: apply %+v, recovery %+v\nlogs:\n%s", rec.Apply, rec.Recovery, s.logsOf(t, m, r.ID))
	}
	// Nothing reached the workspace's state through the revoked token.
	if id, _, _ := s.currentState(t, m, wsID); id != "" || rec.Recovery.CurrentStateVersionID != nil {
		t.Fatalf("the canceled apply published state %s (review %v)", id, rec.Recovery.CurrentStateVersionID)
	}
	if logs := s.logsOf(t, m, r.ID); !strings.Contains(logs, "kept sealed for recovery") {
		t.Fatalf("the apply log does not tell about the emergency state:\n%s", logs)
	}

	if st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/api/auth/reauthenticate",
		mustJSON(map[string]string{"password": "correct horse battery staple"}), m.cookie()...); st != http.StatusOK {
		t.Fatalf("step-up: %d %s", st, body)
	}
	recover := map[string]any{"resolution": "import_emergency_state", "current_state_version_id": nil, "current_state_digest": "",
		"emergency_state_digest": *rec.Recovery.EmergencyStateDigest, "reason": "import what the interrupted apply created",
		"confirm_fence_advance": true}
	wrong := map[string]any{}
	for k, v := range recover {
		wrong[k] = v
	}
	wrong["emergency_state_digest"] = strings.Repeat("0", 64)
	if st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/runs/"+r.ID+"/actions/recover", mustJSON(wrong),
		m.mutate(uniqueKey("recover"))...); st != http.StatusConflict {
		t.Fatalf("recover naming another emergency state: %d %s", st, body)
	}
	st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/runs/"+r.ID+"/actions/recover", mustJSON(recover), m.mutate(uniqueKey("recover"))...)
	if st != http.StatusOK {
		t.Fatalf("recover: %d %s", st, body)
	}
	var env struct{ Data recoveryView }
	_ = json.Unmarshal(body, &env)
	recovered := env.Data
	id, sha, state := s.currentState(t, m, wsID)
	if recovered.Status != "recovered" || recovered.TerminalReason == nil || *recovered.TerminalReason != "import_emergency_state" ||
		recovered.Apply.StateVersionID == nil || *recovered.Apply.StateVersionID != id {
		t.Fatalf("recovered run %+v, current state %s", recovered, id)
	}
	if sha != *rec.Apply.EmergencyStateDigest || !strings.Contains(state, "created-first") {
		t.Fatalf("current state %s (sha256 %s, emergency %s):\n%s", id, sha, *rec.Apply.EmergencyStateDigest, state)
	}
	final := s.readRun(t, m, r.ID)
	if final.attemptsOf("apply") != 1 {
		t.Fatalf("the apply was retried: %+v", final.Evidence.Attempts)
	}
}

// TestWorkerShutdownInterruptsApplyAndKeepsItsEvidence stops the worker
// (SIGTERM) in the middle of an apply: before it exits, tofu gets its
// interrupt and pushes the state it has through its still valid run token,
// and the run goes to recovery with that state recorded, never retried.
func TestWorkerShutdownInterruptsApplyAndKeepsItsEvidence(t *testing.T) {
	t.Parallel()
	s := runsStack(t, "CAIRN_APPLY_INTERRUPT_GRACE=30s")
	m := s.newMember(t, "shutdown")
	wsID, r := s.applyingMidway(t, m, "stopped-worker", 198)

	start := time.Now()
	s.StopWorker(t, 2*time.Minute)
	stopped := time.Since(start)
	t.Logf("SIGTERM to worker exit, the interrupted apply recorded: %s", stopped.Round(10*time.Millisecond))
	// Recorded before the worker exited: no other worker runs meanwhile.
	rec := s.readRecovery(t, m, r.ID)
	if rec.Status != "recovery_required" || rec.ApplyStatus != "interrupted" || rec.TerminalReason == nil ||
		*rec.TerminalReason != "apply_worker_shutdown" {
		t.Fatalf("apply after the worker stopped (in %s): %+v\nlogs:\n%s", stopped, rec, s.Logs())
	}
	id, _, state := s.currentState(t, m, wsID)
	if rec.Apply.StateVersionID == nil || *rec.Apply.StateVersionID != id || !strings.Contains(state, "created-first") {
		t.Fatalf("state the interrupted apply published: run %v, current %s:\n%s", rec.Apply.StateVersionID, id, state)
	}
	sandboxID := rec.Evidence.Attempts[len(rec.Evidence.Attempts)-1].SandboxID
	for _, pattern := range []string{"sleep 198", *sandboxID} {
		// pgrep exits 1 when nothing matches.
		out, err := exec.Command("pgrep", "-f", pattern).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("processes matching %q outlived the worker (%v): %s", pattern, err, out)
		}
	}
	s.StartWorker(t)
	time.Sleep(3 * time.Second)
	if final := s.readRun(t, m, r.ID); final.Status != "recovery_required" || len(final.Evidence.Attempts) != 2 {
		t.Fatalf("the interrupted apply moved on: %+v", final)
	}
}

// TestTimedOutApplyIsInterruptedAndRecorded lets an apply outlive
// CAIRN_PHASE_TIMEOUT: tofu gets its interrupt and grace, pushes the state
// it has, and the run goes to recovery with that state recorded.
func TestTimedOutApplyIsInterruptedAndRecorded(t *testing.T) {
	t.Parallel()
	s := runsStack(t, "CAIRN_PHASE_TIMEOUT=20s", "CAIRN_APPLY_INTERRUPT_GRACE=30s")
	m := s.newMember(t, "timeout")
	wsID, r := s.applyingMidway(t, m, "timed-out-apply", 199)
	s.waitRun(t, m, r.ID, 90*time.Second, status("recovery_required"))
	rec := s.readRecovery(t, m, r.ID)
	last := rec.Evidence.Attempts[len(rec.Evidence.Attempts)-1]
	if rec.ApplyStatus != "interrupted" || rec.TerminalReason == nil || *rec.TerminalReason != "apply_timed_out" ||
		last.TerminalClassification == nil || *last.TerminalClassification != "timed_out" {
		t.Fatalf("timed-out apply %+v", rec)
	}
	id, _, state := s.currentState(t, m, wsID)
	if rec.Apply.StateVersionID == nil || *rec.Apply.StateVersionID != id || !strings.Contains(state, "created-first") {
		t.Fatalf("state the timed-out apply published: run %v, current %s:\n%s", rec.Apply.StateVersionID, id, state)
	}
}

// StopWorker sends the worker SIGTERM, as a service manager does, and
// waits until it has exited.
func (s *Stack) StopWorker(t *testing.T, timeout time.Duration) {
	t.Helper()
	s.mu.Lock()
	cmd := s.procs["worker"]
	s.mu.Unlock()
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	deadline := time.Now().Add(timeout)
	for syscall.Kill(cmd.Process.Pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not stop within %s", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPhaseTimeoutBoundsTheWholePhase runs an apply whose commands each
// stay under CAIRN_PHASE_TIMEOUT but together do not: its init fetches a
// module from a server that answers slowly (6 s) once the plan is done,
// then its provisioner sleeps 7 s, against a 10 s timeout. The phase, not each command, is what the timeout
// bounds, so the apply is interrupted and recorded as timed out.
func TestPhaseTimeoutBoundsTheWholePhase(t *testing.T) {
	t.Parallel()
	module := devstack.TarGz(map[string]string{"main.tf": `output "ok" { value = "module" }`})
	var slow atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() && r.Method == http.MethodGet {
			time.Sleep(6 * time.Second)
		}
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(module)
	}))
	t.Cleanup(srv.Close)
	s := runsStack(t, "CAIRN_PHASE_TIMEOUT=10s", "CAIRN_APPLY_INTERRUPT_GRACE=5s")
	m := s.newMember(t, "phase")
	wsID := s.createWorkspace(t, m, "whole-phase", "us")
	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": fmt.Sprintf(`module "slow" {
  source = "%s/module.tar.gz"
}

resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "echo provisioning-started; sleep 7"
  }
}
`, srv.URL)})
	st, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	r = s.waitRun(t, m, r.ID, 90*time.Second, status("awaiting_approval", "errored"))
	if r.Status != "awaiting_approval" {
		t.Fatalf("plan: %s\n%s", r.Status, s.logsOf(t, m, r.ID))
	}
	slow.Store(true)
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	r = s.waitRun(t, m, r.ID, 90*time.Second, status("applied", "errored", "recovery_required"))
	rec := s.readRecovery(t, m, r.ID)
	last := rec.Evidence.Attempts[len(rec.Evidence.Attempts)-1]
	if rec.Status != "recovery_required" || rec.TerminalReason == nil || *rec.TerminalReason != "apply_timed_out" ||
		last.TerminalClassification == nil || *last.TerminalClassification != "timed_out" {
		t.Fatalf("an apply past its phase timeout ended %s (%v, attempt %v):\n%s", rec.Status, rec.TerminalReason,
			last.TerminalClassification, s.logsOf(t, m, r.ID))
	}
	if last.TimingsMS["tofu_init"] < 5000 || !strings.Contains(s.logsOf(t, m, r.ID), "provisioning-started") {
		t.Fatalf("the apply's init took %.0f ms and its provisioner did not start: the test did not make its case", last.TimingsMS["tofu_init"])
	}
}

// TestApplyThatNeverReachedItsApplyCommandEndsErrored: an apply's init runs
// without a backend and only installs into its sandbox, so an apply that
// fails after init but before its apply command (here its plan file is gone
// from the store) changed nothing. The run ends errored, with nothing to
// recover and no state published, instead of waiting for a person to
// recover it.
func TestApplyThatNeverReachedItsApplyCommandEndsErrored(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "unstarted-apply")
	wsID := s.createWorkspace(t, m, "unstarted-apply", "us")
	r := s.planRun(t, m, wsID, map[string]string{"main.tf": `resource "terraform_data" "never" {
  input = "never-applied"
}
`})
	if r.Status != "awaiting_approval" {
		t.Fatalf("plan: %s\n%s", r.Status, s.logsOf(t, m, r.ID))
	}
	conn, err := sqlx.Connect("postgres", s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var key string
	if err := conn.Get(&key, `SELECT blob_key FROM run_artifacts WHERE run_id = $1 AND kind = 'plan_file'`, r.ID); err != nil {
		t.Fatalf("the run's plan file: %v", err)
	}
	if err := os.Remove(filepath.Join(s.DataDir, "blobs", filepath.FromSlash(key))); err != nil {
		t.Fatalf("removing the plan file from the store: %v", err)
	}
	if st, body := s.approve(t, m, r); st != http.StatusOK {
		t.Fatalf("approve: %d %s", st, body)
	}
	s.waitRun(t, m, r.ID, 90*time.Second, status("applied", "errored", "recovery_required"))
	rec := s.readRecovery(t, m, r.ID)
	last := rec.Evidence.Attempts[len(rec.Evidence.Attempts)-1]
	if rec.Status != "errored" || rec.ApplyStatus != "errored" || last.Phase != "apply" || last.Status != "failed" ||
		contains(rec.AvailableActions, "recover") || rec.Recovery != nil {
		t.Fatalf("an apply that failed before its apply command: %+v\n%s", rec, s.logsOf(t, m, r.ID))
	}
	// The control: the apply's init ran, so a rule that counted every
	// tofu command as the apply's start would have sent it to recovery.
	if last.TimingsMS["tofu_init"] <= 0 || last.TimingsMS["tofu_apply"] != 0 {
		t.Fatalf("the attempt's timings %v, want init's and no apply's", last.TimingsMS)
	}
	var versions int
	if err := conn.Get(&versions, `SELECT count(*) FROM state_versions WHERE workspace_id = $1`, wsID); err != nil || versions != 0 {
		t.Fatalf("state versions of a workspace nothing was applied to: %d (%v)", versions, err)
	}
}
