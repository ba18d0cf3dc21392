package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// upgradeConfig is the configuration every run of the upgrade test plans:
// var.n items and `extra` more, whose outputs the test reads back from the
// state each release wrote.
const upgradeConfig = `variable "n" {
  type = number
}

variable "token" {
  type      = string
  sensitive = true
}

resource "terraform_data" "item" {
  count = var.n + %d
  input = "item-${count.index}"
}

output "items" {
  value = length(terraform_data.item)
}

output "token_length" {
  value     = length(var.token)
  sensitive = true
}
`

// TestUpgradeFromThePreviousRelease rolls an installation from the
// previous release to the code under test the way docs/operating/upgrades.md
// says an operator does: migrate first, while the old binaries keep
// serving, then replace the binaries.
//
// The previous release is the commit named in e2e/testdata/previous-release;
// its cairn-api, cairn-worker and cairn-sandbox-exec are built from that
// commit once and kept under .tools/previous-release/<commit>/. Bump the
// file at every release (it says how), so that this test always checks
// the step an operator takes next.
//
// The old release migrates a fresh database with its own migrations,
// creates an organization, workspaces and variables, applies a run (state
// with outputs) and leaves a second run waiting for approval. Then this
// build's migrations run under the old binaries, which must keep working on
// the new schema: reads of everything they wrote, a new variable, a
// duplicate one refused as a conflict (a renamed constraint turned that
// into a 500 once), a new run planned by the old worker. With the old
// worker gone, the old API queues one more run. Then the binaries switch:
// this build's API and worker read what the old ones wrote, apply the
// run the old worker planned, and plan and apply the run the old API
// queued. Afterwards every state version's object matches its digest, the
// serials advance, and no capacity lease outlives its attempt.
func TestUpgradeFromThePreviousRelease(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	pin := filepath.Join(root, "e2e", "testdata", "previous-release")
	commit, err := devstack.ReadReleasePin(pin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var buildLog bytes.Buffer
	start := time.Now()
	oldBin, err := devstack.BuildRelease(ctx, root, commit, &buildLog)
	if err != nil {
		t.Fatalf("building the previous release (%s): %v\n%s", pin, err, buildLog.String())
	}
	t.Logf("previous release %s ready in %s", commit[:12], time.Since(start).Round(time.Millisecond))
	oldVersion := commit[:12] // what BuildRelease stamps into the old worker

	// The old release migrates an empty database with its own migrations.
	_, dbURL := dbtest.Empty(t)
	migrateWith(t, oldBin, "DATABASE_URL="+dbURL)
	conn, err := sqlx.Connect("postgres", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	oldSchema := schemaVersion(t, conn)

	tofuBinary(t)
	mirror := filepath.Dir(filepath.Dir(devstack.ToolchainDir(root, "tofu", "1.10.6")))
	s := StartStack(t, WithTLS(), WithEnv("CAIRN_TOOLCHAIN_DIR="+mirror), WithRelease(oldBin, dbURL, "api", "worker"))
	m := s.newMember(t, "upgrade")

	// Old release, old schema: state from an applied run, and a run left
	// waiting for approval.
	wsA := s.createWorkspace(t, m, "upgrade-a", "us")
	s.setVariable(t, m, wsA, "n", "2", false, true)
	s.setVariable(t, m, wsA, "token", canary, true, false)
	applied := s.applyUpgradeRun(t, m, wsA, 0)
	firstState, firstSHA, firstBody := s.currentState(t, m, wsA)
	firstSerial := checkUpgradeState(t, firstBody, 2)
	_, waiting := s.createRun(t, m, wsA, s.uploadConfiguration(t, m, wsA, map[string]string{"main.tf": fmt.Sprintf(upgradeConfig, 3)}), "plan_and_apply")
	waiting = s.waitRun(t, m, waiting.ID, 3*time.Minute, status("awaiting_approval", "errored"))
	if waiting.Status != "awaiting_approval" {
		t.Fatalf("the old release's second run: %s (%v)", waiting.Status, deref(waiting.TerminalReason))
	}

	// This build's migrations, with the old binaries still serving.
	migrateWith(t, binDir(t), s.Env...)
	newSchema := schemaVersion(t, conn)
	t.Logf("schema %d (previous release) -> %d (this build)", oldSchema, newSchema)
	if st, body := call(t, s.Client, http.MethodGet, s.APIURL+"/ready", nil); st != http.StatusOK {
		t.Errorf("the old API is not ready on the new schema: %d %s", st, body)
	}
	s.checkOldData(t, m, "old API on the new schema", wsA, applied.ID, firstState, firstSHA)
	if st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/workspaces/"+wsA+"/variables",
		mustJSON(map[string]any{"key": "n", "value": "7", "sensitive": false, "hcl": true}), m.mutate(uniqueKey("dup"))...); st != http.StatusConflict {
		t.Errorf("the old API, a duplicate variable on the new schema: %d %s, want 409", st, body)
	}
	wsB := s.createWorkspace(t, m, "upgrade-b", "us")
	s.setVariable(t, m, wsB, "n", "1", false, true)
	s.setVariable(t, m, wsB, "token", "b-token", true, false)
	_, planned := s.createRun(t, m, wsB, s.uploadConfiguration(t, m, wsB, map[string]string{"main.tf": fmt.Sprintf(upgradeConfig, 0)}), "plan_and_apply")
	planned = s.waitRun(t, m, planned.ID, 3*time.Minute, status("awaiting_approval", "errored"))
	if planned.Status != "awaiting_approval" {
		t.Fatalf("the old worker's plan on the new schema: %s (%v)", planned.Status, deref(planned.TerminalReason))
	}

	// The roll: the old worker stops first, so the old API queues a run no
	// old worker will take; then the old API stops.
	s.stopProcess(t, "worker")
	wsC := s.createWorkspace(t, m, "upgrade-c", "us")
	s.setVariable(t, m, wsC, "n", "4", false, true)
	s.setVariable(t, m, wsC, "token", "c-token", true, false)
	_, queued := s.createRun(t, m, wsC, s.uploadConfiguration(t, m, wsC, map[string]string{"main.tf": fmt.Sprintf(upgradeConfig, 0)}), "plan_and_apply")
	if queued.ID == "" {
		t.Fatal("the old API did not queue a run")
	}
	s.stopProcess(t, "api")
	s.bin = binDir(t)
	s.startProcess(t, "api", "cairn-api")
	s.startProcess(t, "worker", "cairn-worker")
	waitFor(t, s.Client, s.APIURL+"/health")

	// This build reads what the old one wrote and finishes its runs.
	s.checkOldData(t, m, "this build", wsA, applied.ID, firstState, firstSHA)
	if st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/workspaces/"+wsA+"/variables",
		mustJSON(map[string]any{"key": "n", "value": "7", "sensitive": false, "hcl": true}), m.mutate(uniqueKey("dup"))...); st != http.StatusConflict {
		t.Errorf("this build, a duplicate variable: %d %s, want 409", st, body)
	}
	finished := s.approveUpgradeRun(t, m, waiting.ID)
	_, secondSHA, secondBody := s.currentState(t, m, wsA)
	if secondSerial := checkUpgradeState(t, secondBody, 5); secondSerial <= firstSerial {
		t.Errorf("the state serial went from %d to %d across the upgrade", firstSerial, secondSerial)
	}
	if secondSHA == firstSHA {
		t.Error("the run the old release planned did not write a new state version")
	}
	finishedB := s.approveUpgradeRun(t, m, planned.ID)
	_, _, bodyB := s.currentState(t, m, wsB)
	checkUpgradeState(t, bodyB, 1)
	s.waitRun(t, m, queued.ID, 3*time.Minute, status("awaiting_approval", "errored"))
	finishedC := s.approveUpgradeRun(t, m, queued.ID)
	_, _, bodyC := s.currentState(t, m, wsC)
	checkUpgradeState(t, bodyC, 4)

	// Who ran what: the phases before the switch on the old worker, those
	// after it on this build's.
	for _, c := range []struct {
		name          string
		r             runView
		before, after []string
	}{
		{"the run applied before the upgrade", s.readRun(t, m, applied.ID), []string{"plan", "apply"}, nil},
		{"the run waiting across the upgrade", finished, []string{"plan"}, []string{"apply"}},
		{"the run the old worker planned on the new schema", finishedB, []string{"plan"}, []string{"apply"}},
		{"the run the old API queued", finishedC, nil, []string{"plan", "apply"}},
	} {
		var before, after []string
		for _, a := range c.r.Evidence.Attempts {
			if a.Status != "succeeded" || a.Worker == nil || a.Worker.Version == nil {
				t.Errorf("%s: attempt %s %s without a recorded worker version", c.name, a.Phase, a.Status)
				continue
			}
			if *a.Worker.Version == oldVersion {
				before = append(before, a.Phase)
			} else {
				after = append(after, a.Phase)
			}
		}
		if strings.Join(before, ",") != strings.Join(c.before, ",") || strings.Join(after, ",") != strings.Join(c.after, ",") {
			t.Errorf("%s: phases on the previous release %v and on this build %v, want %v and %v", c.name, before, after, c.before, c.after)
		}
	}

	// Every state version's object matches its digest, and no lease is
	// still held or outlived its attempt.
	for _, ws := range []string{wsA, wsB, wsC} {
		s.verifyStateVersions(t, m, ws)
	}
	var held []string
	if err := conn.Select(&held, `
		SELECT l.id FROM capacity_leases l LEFT JOIN run_attempts a ON a.id = l.attempt_id
		WHERE l.released_at IS NULL OR (a.id IS NOT NULL AND (a.finished_at IS NULL OR l.released_at > a.finished_at + interval '5 seconds'))`); err != nil {
		t.Fatal(err)
	} else if len(held) > 0 {
		t.Errorf("capacity leases still held or outliving their attempts: %v", held)
	}
}

// migrateWith runs `cairn-api migrate` from bin with env over the test's.
func migrateWith(t *testing.T, bin string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "cairn-api"), "migrate")
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s/cairn-api migrate: %v\n%s", bin, err, out)
	}
}

// schemaVersion is the newest migration goose has applied.
func schemaVersion(t *testing.T, conn *sqlx.DB) int64 {
	t.Helper()
	var v int64
	if err := conn.Get(&v, `SELECT max(version_id) FROM goose_db_version WHERE is_applied`); err != nil {
		t.Fatal(err)
	}
	return v
}

// stopProcess stops one of the stack's processes as an orchestrator
// rolling it does, with SIGTERM and its grace period, and waits until it
// is gone so that its successor can take its ports.
func (s *Stack) stopProcess(t *testing.T, name string) {
	t.Helper()
	s.mu.Lock()
	cmd := s.procs[name]
	s.mu.Unlock()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(cmd.Process.Pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not stop within 30s of SIGTERM", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// applyUpgradeRun plans upgradeConfig with extra more items, approves it
// and waits until it is applied.
func (s *Stack) applyUpgradeRun(t *testing.T, m member, wsID string, extra int) runView {
	t.Helper()
	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": fmt.Sprintf(upgradeConfig, extra)})
	st, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	r = s.waitRun(t, m, r.ID, 3*time.Minute, status("awaiting_approval", "errored"))
	if r.Status != "awaiting_approval" {
		t.Fatalf("run %s: %s (%v)", r.ID, r.Status, deref(r.TerminalReason))
	}
	return s.approveUpgradeRun(t, m, r.ID)
}

// approveUpgradeRun approves a planned run with the binding the API shows
// now and waits until it is applied.
func (s *Stack) approveUpgradeRun(t *testing.T, m member, runID string) runView {
	t.Helper()
	r := s.readRun(t, m, runID)
	if r.Status != "awaiting_approval" || r.Plan.PlanDigest == nil || r.Policy.ResultDigest == nil {
		t.Fatalf("run %s is %s, not awaiting approval with a plan and policy digest", runID, r.Status)
	}
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+runID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve %s: %d", runID, st)
	}
	r = s.waitRun(t, m, runID, 3*time.Minute, status("applied", "errored", "recovery_required"))
	if r.Status != "applied" {
		t.Fatalf("run %s ended %s (%v)", runID, r.Status, deref(r.TerminalReason))
	}
	return r
}

// checkOldData reads, through whichever API serves now, what the previous
// release wrote into workspace wsID: the workspace on both surfaces, its
// variables (the sensitive one without its value), the applied run's
// review, its state version's metadata and its object.
func (s *Stack) checkOldData(t *testing.T, m member, who, wsID, runID, stateID, stateSHA string) {
	t.Helper()
	var ws struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+wsID, nil, &ws, m.cookie()...); st != http.StatusOK || ws.Name != "upgrade-a" {
		t.Errorf("%s: workspace %s: %d %+v", who, wsID, st, ws)
	}
	if st, body := s.tfe(t, m, http.MethodGet, "/organizations/"+m.slug+"/workspaces/upgrade-a", nil); st != http.StatusOK ||
		!strings.Contains(string(body), wsID) {
		t.Errorf("%s: /api/v2 workspace: %d %s", who, st, body)
	}
	var vars []struct {
		Key       string  `json:"key"`
		Value     *string `json:"value"`
		Sensitive bool    `json:"sensitive"`
		HCL       bool    `json:"hcl"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+wsID+"/variables", nil, &vars, m.cookie()...); st != http.StatusOK {
		t.Errorf("%s: variables: %d", who, st)
	}
	got := map[string]string{}
	for _, v := range vars {
		value := "<hidden>"
		if v.Value != nil {
			value = *v.Value
		}
		got[v.Key] = value
		if v.Sensitive != (v.Key == "token") || v.HCL != (v.Key == "n") {
			t.Errorf("%s: variable %s: sensitive %v, hcl %v", who, v.Key, v.Sensitive, v.HCL)
		}
	}
	if len(got) != 2 || got["n"] != "2" || got["token"] != "<hidden>" {
		t.Errorf("%s: variables %v, want n=2 and token hidden", who, got)
	}
	if r := s.readRun(t, m, runID); r.Status != "applied" || r.Apply.StateVersionID == nil || *r.Apply.StateVersionID != stateID {
		t.Errorf("%s: the applied run reads %s with state version %v, want %s", who, r.Status, r.Apply.StateVersionID, stateID)
	}
	var versions []struct {
		ID     string `json:"id"`
		SHA256 string `json:"sha256"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+wsID+"/state-versions?limit=10", nil, &versions, m.cookie()...); st != http.StatusOK ||
		len(versions) != 1 || versions[0].ID != stateID || versions[0].SHA256 != stateSHA {
		t.Errorf("%s: state versions %d %+v, want only %s (%s)", who, st, versions, stateID, stateSHA)
	}
	s.verifyStateVersions(t, m, wsID)
}

// verifyStateVersions downloads every state version of a workspace and
// checks its object against the digest the API lists.
func (s *Stack) verifyStateVersions(t *testing.T, m member, wsID string) {
	t.Helper()
	var versions []struct {
		ID     string `json:"id"`
		SHA256 string `json:"sha256"`
	}
	s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+wsID+"/state-versions?limit=100", nil, &versions, m.cookie()...)
	if len(versions) == 0 {
		t.Errorf("workspace %s has no state versions", wsID)
	}
	for _, v := range versions {
		st, raw := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/state-versions/"+v.ID+"/download", nil, "Authorization", "Bearer "+m.token)
		sum := sha256.Sum256(raw)
		if st != http.StatusOK || (hex.EncodeToString(sum[:]) != v.SHA256 && base64.StdEncoding.EncodeToString(sum[:]) != v.SHA256) {
			t.Errorf("state version %s: %d, its object does not match digest %s", v.ID, st, v.SHA256)
		}
	}
}

// checkUpgradeState checks a state written by upgradeConfig: items
// resources and outputs, the sensitive variable's length; it returns the
// state's serial.
func checkUpgradeState(t *testing.T, body string, items int) int {
	t.Helper()
	var state struct {
		Serial  int `json:"serial"`
		Outputs map[string]struct {
			Value json.RawMessage `json:"value"`
		} `json:"outputs"`
		Resources []struct {
			Instances []json.RawMessage `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(body), &state); err != nil {
		t.Fatalf("reading state: %v", err)
	}
	instances := 0
	for _, r := range state.Resources {
		instances += len(r.Instances)
	}
	if instances != items || string(state.Outputs["items"].Value) != fmt.Sprintf("%d", items) ||
		string(state.Outputs["token_length"].Value) == "" || strings.Contains(body, canary) {
		t.Errorf("state serial %d: %d instances, outputs %v; want %d items and no variable value", state.Serial, instances, state.Outputs, items)
	}
	return state.Serial
}
