package run_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/plandiff/plandifftest"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/run/runtest"
	"github.com/cairnhq/cairn/api/workspace"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// harness is a real cairn-api over a fresh database, with the launch gate
// open, an organization owner, and the run service the worker would use,
// on a clock the test can move forward. The worker's steps (start an
// attempt, store evidence, commit) are driven directly, without tofu.
type harness struct {
	t     *testing.T
	ctx   context.Context
	env   *apitest.Env
	owner *apitest.User
	runs  *run.Service
	skew  atomic.Int64
}

func setup(t *testing.T) *harness {
	t.Helper()
	env := apitest.New(t)
	h := &harness{t: t, ctx: context.Background(), env: env}
	h.runs = env.Server.Services().Runs.WithClock(func() time.Time { return time.Now().Add(time.Duration(h.skew.Load())) })
	// apitest.New opens the public gate.
	h.owner = env.WithOrganization("runs")
	return h
}

// advance moves the run service's clock forward.
func (h *harness) advance(d time.Duration) { h.skew.Add(int64(d)) }

func (h *harness) workspace(name string) string {
	h.t.Helper()
	var p, w struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "p-" + name}).MustStatus(h.t, http.StatusCreated).Data(h.t, &p)
	h.owner.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": p.ID, "name": name,
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).
		MustStatus(h.t, http.StatusCreated).Data(h.t, &w)
	return w.ID
}

func (h *harness) variable(workspaceID, key, value string, sensitive, hcl bool) string {
	h.t.Helper()
	var v struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/workspaces/"+workspaceID+"/variables", map[string]any{"key": key, "value": value,
		"sensitive": sensitive, "hcl": hcl}).MustStatus(h.t, http.StatusCreated).Data(h.t, &v)
	return v.ID
}

// uploadConfiguration uploads a one-resource configuration to the
// workspace and returns its version's ID.
func (h *harness) uploadConfiguration(workspaceID string) string {
	h.t.Helper()
	var cv struct{ ID string }
	h.owner.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + workspaceID + "/configuration-versions",
		Body:   devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "item" { input = "x" }`}),
		Header: map[string]string{"Content-Type": "application/gzip", "Idempotency-Key": apitest.NewKey()}}).
		MustStatus(h.t, http.StatusCreated).Data(h.t, &cv)
	return cv.ID
}

// createRun uploads a one-resource configuration and creates a
// plan_and_apply run of it.
func (h *harness) createRun(workspaceID string) run.Run {
	h.t.Helper()
	var created struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/runs", map[string]string{"workspace_id": workspaceID, "configuration_version_id": h.uploadConfiguration(workspaceID),
		"kind": "plan_and_apply", "message": "test"}).MustStatus(h.t, http.StatusCreated).Data(h.t, &created)
	return h.read(created.ID)
}

func (h *harness) read(runID string) run.Run {
	h.t.Helper()
	r, err := h.runs.RunOwner(h.ctx, runID)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// queued returns the run's queued attempt of a phase.
func (h *harness) queued(r run.Run, phase string) run.Attempt {
	h.t.Helper()
	attempts, err := h.runs.Attempts(h.ctx, h.env.DB, r)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, a := range attempts {
		if a.Phase == phase && a.Status == run.AttemptQueued {
			return a
		}
	}
	h.t.Fatalf("run %s (%s) has no queued %s attempt: %+v", r.ID, r.Status, phase, attempts)
	return run.Attempt{}
}

func (h *harness) start(r run.Run, phase string) run.Started {
	h.t.Helper()
	st, err := h.runs.StartAttempt(h.ctx, h.queued(r, phase).ID, "test-worker", "local")
	if err != nil {
		h.t.Fatalf("starting the %s of %s: %v", phase, r.ID, err)
	}
	return st
}

// plan does what a worker does with a plan attempt whose tofu wrote
// planJSON: it seals the evidence, evaluates the policy stage and commits.
func (h *harness) plan(r run.Run, planJSON []byte) run.Run {
	h.t.Helper()
	return runtest.Plan(h.t, h.env, h.runs, r, planJSON)
}

// planWith commits a plan with or without changes, made against the
// predecessor state given.
func (h *harness) planWith(r run.Run, planJSON []byte, hasChanges bool, predecessor *string) run.Run {
	h.t.Helper()
	return runtest.PlanWith(h.t, h.env, h.runs, r, planJSON, hasChanges, predecessor)
}

func planJSON(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	// One terraform_data creation without owner and env tags.
	if err := plandifftest.TaggedPlanJSON(&b, 1); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type review struct {
	Status         string   `json:"status"`
	ApplyStatus    string   `json:"apply_status"`
	TerminalReason *string  `json:"terminal_reason"`
	Actions        []string `json:"available_actions"`
	Plan           struct {
		PlanDigest                string  `json:"plan_digest"`
		PredecessorStateVersionID *string `json:"predecessor_state_version_id"`
	} `json:"plan"`
	Policy struct {
		ResultDigest string `json:"result_digest"`
	} `json:"policy"`
	Pinned struct {
		DependencyLockDigest string `json:"dependency_lock_digest"`
	} `json:"pinned"`
	Apply struct {
		StateVersionID       *string `json:"state_version_id"`
		EmergencyStateDigest *string `json:"emergency_state_digest"`
	} `json:"apply"`
	Decision *struct {
		Action string `json:"action"`
	} `json:"decision"`
	LeaseExpiresAt        *string `json:"lease_expires_at"`
	LeaseRemainingSeconds *int    `json:"lease_remaining_seconds"`
	Recovery              *struct {
		CurrentStateVersionID *string `json:"current_state_version_id"`
		CurrentStateDigest    string  `json:"current_state_digest"`
		EmergencyStateDigest  *string `json:"emergency_state_digest"`
	} `json:"recovery"`
}

func (h *harness) review(runID string) review {
	h.t.Helper()
	var v review
	h.owner.Get("/v1/runs/"+runID).MustStatus(h.t, http.StatusOK).Data(h.t, &v)
	return v
}

func (h *harness) approve(runID string) {
	h.t.Helper()
	v := h.review(runID)
	h.owner.Mutate(http.MethodPost, "/v1/runs/"+runID+"/actions/approve", map[string]any{"plan_digest": v.Plan.PlanDigest,
		"policy_result_digest": v.Policy.ResultDigest, "predecessor_state_version_id": v.Plan.PredecessorStateVersionID,
		"dependency_lock_digest": v.Pinned.DependencyLockDigest}).MustStatus(h.t, http.StatusOK)
}

// softPolicy publishes the require-tags set, built in-process as the
// sandboxed build would, and returns its version for attachment.
func (h *harness) softPolicy(workspaceID string) (setID, versionID string) {
	h.t.Helper()
	dir := filepath.Join("..", "..", "e2e", "testdata", "policies", "require-tags")
	files := map[string]string{}
	for _, name := range []string{"lib.rego", "policy.rego", "policy_test.rego"} {
		body, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			h.t.Fatal(err)
		}
		files[name] = string(body)
	}
	var set, v struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/policy-sets", map[string]string{"name": "require-tags"}).MustStatus(h.t, http.StatusCreated).Data(h.t, &set)
	h.owner.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + workspaceID + "/policy-sets/" + set.ID + "/versions",
		Body: devstack.TarGz(files), Header: map[string]string{"Content-Type": "application/gzip", "Idempotency-Key": apitest.NewKey()}}).
		MustStatus(h.t, http.StatusAccepted).Data(h.t, &v)
	policies := h.env.Server.Services().Policies
	b, ok, err := policies.PendingBuild(h.ctx, v.ID)
	if err != nil || !ok {
		h.t.Fatalf("pending build: %v %v", ok, err)
	}
	var bundle, results bytes.Buffer
	report, err := engine.Build(h.ctx, dir, &bundle, &results)
	if err != nil {
		h.t.Fatal(err)
	}
	bundleArt, err := policies.StoreBuildArtifact(h.ctx, b.Version, policy.ArtifactBundle, &bundle)
	if err != nil {
		h.t.Fatal(err)
	}
	resultsArt, err := policies.StoreBuildArtifact(h.ctx, b.Version, policy.ArtifactTestResults, &results)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := policies.CompleteBuild(h.ctx, policy.Completion{OrganizationID: h.owner.OrganizationID, PolicyVersionID: v.ID,
		SourceSHA256: b.Version.SourceSHA256, BundleArtifactID: bundleArt.ID, BundleSHA256: bundleArt.SHA256,
		TestResultsArtifactID: resultsArt.ID, TestResultsSHA256: resultsArt.SHA256, TestsPassed: report.Passed}); err != nil {
		h.t.Fatal(err)
	}
	return set.ID, v.ID
}

// lose stops an attempt's heartbeat an hour ago and reaps it as lost.
func (h *harness) lose(st run.Started) {
	h.t.Helper()
	if _, err := h.env.DB.Exec(`UPDATE run_attempts SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`, st.Attempt.ID); err != nil {
		h.t.Fatal(err)
	}
	if n, err := h.runs.ReapLostAttempts(h.ctx, time.Minute); err != nil || n != 1 {
		h.t.Fatalf("reaping: %d %v", n, err)
	}
}

// softPolicyWorkspace creates a workspace with require-tags attached as
// soft_mandatory, which a plan of planJSON fails.
func (h *harness) softPolicyWorkspace(name string) string {
	h.t.Helper()
	ws := h.workspace(name)
	setID, versionID := h.softPolicy(ws)
	h.attach(ws, setID, versionID)
	return ws
}

func (h *harness) attach(workspaceID, setID, versionID string) {
	h.t.Helper()
	h.owner.Mutate(http.MethodPost, "/v1/workspaces/"+workspaceID+"/policy-attachments", map[string]string{"policy_set_id": setID,
		"policy_version_id": versionID, "enforcement_mode": "soft_mandatory"}).MustStatus(h.t, http.StatusCreated)
}

// override waives the run's soft failure for lifetime.
func (h *harness) override(runID string, lifetime time.Duration) {
	h.t.Helper()
	var digest string
	if err := h.env.DB.Get(&digest, `SELECT encode(result_digest, 'hex') FROM policy_results WHERE run_id = $1 AND status = 'failed'`, runID); err != nil {
		h.t.Fatal(err)
	}
	h.owner.Mutate(http.MethodPost, "/v1/runs/"+runID+"/policy-overrides", map[string]any{"policy_result_digest": digest,
		"justification": "tags come in the next change", "expires_at": time.Now().Add(lifetime).UTC().Format(time.RFC3339)}).
		MustStatus(h.t, http.StatusCreated)
}

// approvedSoftFailure takes a new run of a workspace with require-tags
// attached through a soft failure, an override for lifetime and an
// approval, to apply_queued.
func (h *harness) approvedSoftFailure(workspaceID string, lifetime time.Duration) run.Run {
	h.t.Helper()
	r := h.plan(h.createRun(workspaceID), planJSON(h.t))
	if r.Status != run.StatusPolicyOverride {
		h.t.Fatalf("soft-failed run is %s", r.Status)
	}
	h.override(r.ID, lifetime)
	h.approve(r.ID)
	return h.read(r.ID)
}

// TestApplyStartRechecksThePolicyGate approves runs whose soft policy
// failure was overridden, then starts their applies: one after its override
// expired and one whose policy result changed after the approval are
// refused (the run errors with the reason, no sandbox lease, nothing
// applied); one still inside its override starts.
func TestApplyStartRechecksThePolicyGate(t *testing.T) {
	t.Parallel()
	h := setup(t)
	expiring, changing := h.workspace("expiring"), h.workspace("changing")
	setID, versionID := h.softPolicy(expiring)
	h.attach(expiring, setID, versionID)
	h.attach(changing, setID, versionID)

	refused := func(r run.Run, reason string) {
		t.Helper()
		a := h.queued(r, run.PhaseApply)
		_, err := h.runs.StartAttempt(h.ctx, a.ID, "test-worker", "local")
		if !errors.Is(err, run.ErrApplyRefused) {
			t.Fatalf("starting the apply of %s: %v, want ErrApplyRefused", r.ID, err)
		}
		got := h.read(r.ID)
		if got.Status != run.StatusErrored || got.TerminalReason == nil || *got.TerminalReason != reason || got.ApplyStatus != run.PhaseErrored {
			t.Fatalf("refused run: status %s, reason %v, apply %s; want errored with %s", got.Status, got.TerminalReason, got.ApplyStatus, reason)
		}
		var status, classification string
		var leases int
		if err := h.env.DB.QueryRow(`SELECT status, terminal_classification, (SELECT count(*) FROM capacity_leases WHERE attempt_id = $1)
			FROM run_attempts WHERE id = $1`, a.ID).Scan(&status, &classification, &leases); err != nil {
			t.Fatal(err)
		}
		if status != run.AttemptFailed || classification != reason || leases != 0 {
			t.Fatalf("refused attempt: %s %s with %d leases", status, classification, leases)
		}
		// A replayed job finds nothing to start.
		if _, err := h.runs.StartAttempt(h.ctx, a.ID, "test-worker", "local"); !errors.Is(err, run.ErrAttemptNotCurrent) {
			t.Fatalf("restarting a refused attempt: %v", err)
		}
	}

	// The override lasts ten minutes; the apply waits eleven.
	late := h.approvedSoftFailure(expiring, 10*time.Minute)
	if late.ApprovedBinding == nil || !late.ApprovedBinding.Matches(late) {
		t.Fatalf("approval did not record its binding: %+v", late.ApprovedBinding)
	}
	h.advance(11 * time.Minute)
	refused(late, run.RefusedPolicyGateClosed)
	h.advance(-11 * time.Minute)

	// The next run of the workspace starts inside its override.
	inTime := h.approvedSoftFailure(expiring, 10*time.Minute)
	h.advance(9 * time.Minute)
	if st := h.start(inTime, run.PhaseApply); st.Run.Status != run.StatusApplying {
		t.Fatalf("apply inside its override: %s", st.Run.Status)
	}
	h.advance(-9 * time.Minute)

	// A policy result that is not the one the approval bound. A completed
	// check never changes, so the change goes around its trigger.
	changed := h.approvedSoftFailure(changing, time.Hour)
	tamper := h.env.DB.MustBegin()
	for _, stmt := range []string{`ALTER TABLE policy_checks DISABLE TRIGGER policy_checks_complete_once`,
		`UPDATE policy_checks SET composition_digest = sha256(composition_digest) WHERE run_id = '` + changed.ID + `'`,
		`ALTER TABLE policy_checks ENABLE TRIGGER policy_checks_complete_once`} {
		if _, err := tamper.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := tamper.Commit(); err != nil {
		t.Fatal(err)
	}
	refused(changed, run.RefusedPolicyResultChanged)
}

// TestLostPlanIsRetriedABoundedNumberOfTimes loses a plan's worker, stops
// the next attempt's worker, and loses the third: each is retried as a new
// attempt until the plan had CAIRN_PLAN_MAX_ATTEMPTS (3), then the run
// errors with plan_attempts_exhausted and nothing is queued again. A run's
// first plan that failed on a lost connection is retried the same way, its
// second is not (the configuration's own output could imitate one), and
// one that failed for any other reason is not.
func TestLostPlanIsRetriedABoundedNumberOfTimes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.createRun(h.workspace("flaky"))
	first := h.start(r, run.PhasePlan)
	h.lose(first)
	if got := h.read(r.ID); got.Status != run.StatusPlanQueued || got.PlanStatus != run.PhasePending {
		t.Fatalf("after a lost plan: %s, plan %s", got.Status, got.PlanStatus)
	}
	second := h.start(r, run.PhasePlan)
	if second.Attempt.Number != 2 {
		t.Fatalf("second attempt is number %d", second.Attempt.Number)
	}
	if _, err := h.runs.FailAttempt(h.ctx, second.Attempt.ID, run.InterruptShutdown, -1, nil); err != nil {
		t.Fatal(err)
	}
	third := h.start(r, run.PhasePlan)
	h.lose(third)
	got := h.read(r.ID)
	if got.Status != run.StatusErrored || got.TerminalReason == nil || *got.TerminalReason != "plan_attempts_exhausted" || got.PlanStatus != run.PhaseErrored {
		t.Fatalf("after three interrupted plans: %s (%v), plan %s", got.Status, got.TerminalReason, got.PlanStatus)
	}
	attempts, err := h.runs.Attempts(h.ctx, h.env.DB, got)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, a := range attempts {
		statuses = append(statuses, a.Status+"/"+*a.TerminalClassification)
	}
	if strings.Join(statuses, " ") != "lost/worker_lost failed/worker_shutdown lost/worker_lost" {
		t.Fatalf("attempts %v", statuses)
	}

	other := h.createRun(h.workspace("cut-off"))
	cut := h.start(other, run.PhasePlan)
	if _, err := h.runs.FailAttempt(h.ctx, cut.Attempt.ID, run.FailureConnectionLost, 1, nil); err != nil {
		t.Fatal(err)
	}
	if got := h.read(other.ID); got.Status != run.StatusPlanQueued || got.PlanStatus != run.PhasePending {
		t.Fatalf("after a plan that lost its connection: %s, plan %s", got.Status, got.PlanStatus)
	}
	again := h.start(other, run.PhasePlan)
	if _, err := h.runs.FailAttempt(h.ctx, again.Attempt.ID, run.FailureConnectionLost, 1, nil); err != nil {
		t.Fatal(err)
	}
	if got := h.read(other.ID); got.Status != run.StatusErrored || got.TerminalReason == nil || *got.TerminalReason != run.FailureConnectionLost {
		t.Fatalf("after a second plan that lost its connection: %s (%v)", got.Status, got.TerminalReason)
	}

	failing := h.createRun(h.workspace("failing"))
	failed := h.start(failing, run.PhasePlan)
	if _, err := h.runs.FailAttempt(h.ctx, failed.Attempt.ID, "plan_failed", 1, nil); err != nil {
		t.Fatal(err)
	}
	if got := h.read(failing.ID); got.Status != run.StatusErrored || got.TerminalReason == nil || *got.TerminalReason != "plan_failed" {
		t.Fatalf("after a plan that failed: %s (%v)", got.Status, got.TerminalReason)
	}
}

// TestRunInputsArePinnedByValue edits and deletes a run's variables after
// it was created: the run still reads the values it pinned. Sensitive
// copies are sealed, bound to their run: a copy moved to another run does
// not open, an altered plain copy fails its digest, and the copies are
// gone once the run ends.
func TestRunInputsArePinnedByValue(t *testing.T) {
	t.Parallel()
	h := setup(t)
	wsID := h.workspace("pinned")
	const secret = "pinned-secret-3b9f-do-not-store-in-clear"
	region := h.variable(wsID, "region", "eu-west-1", false, false)
	token := h.variable(wsID, "token", secret, true, false)
	h.variable(wsID, "replicas", "3", false, true)
	first := h.createRun(wsID)
	second := h.createRun(wsID)

	h.owner.Mutate(http.MethodPut, "/v1/workspace-variables/"+region, map[string]any{"value": "us-east-1", "sensitive": false}).
		MustStatus(t, http.StatusOK)
	h.owner.Mutate(http.MethodDelete, "/v1/workspace-variables/"+token, nil).MustStatus(t, http.StatusOK)

	inputs, err := h.runs.RunInputs(h.ctx, first)
	if err != nil {
		t.Fatalf("inputs after the variables changed: %v", err)
	}
	got := map[string]workspace.ResolvedVariable{}
	for _, v := range inputs {
		got[v.Key] = v
	}
	if len(got) != 3 || got["region"].Value != "eu-west-1" || got["token"].Value != secret || !got["token"].Sensitive ||
		got["replicas"].Value != "3" || !got["replicas"].HCL {
		t.Fatalf("pinned inputs %+v", got)
	}
	var clear int
	if err := h.env.DB.Get(&clear, `SELECT count(*) FROM run_variable_values WHERE value LIKE '%' || $1 || '%'
		OR position(convert_to($1, 'UTF8') IN sealed_value) > 0`, secret); err != nil || clear != 0 {
		t.Fatalf("%d pinned rows hold the secret in clear (%v)", clear, err)
	}

	// The first run's sealed copy on the second run does not open.
	if _, err := h.env.DB.Exec(`UPDATE run_variable_values s SET sealed_value = f.sealed_value FROM run_variable_values f
		WHERE s.run_id = $1 AND f.run_id = $2 AND s.variable_id = $3 AND f.variable_id = $3`, second.ID, first.ID, token); err != nil {
		t.Fatal(err)
	}
	if _, err := h.runs.RunInputs(h.ctx, second); err == nil {
		t.Fatal("a sealed copy moved to another run opened")
	}
	// An altered plain copy no longer matches the snapshot's digest.
	if _, err := h.env.DB.Exec(`UPDATE run_variable_values SET value = 'ap-south-1' WHERE run_id = $1 AND variable_id = $2`, first.ID, region); err != nil {
		t.Fatal(err)
	}
	if _, err := h.runs.RunInputs(h.ctx, first); !errors.Is(err, workspace.ErrSnapshotChanged) {
		t.Fatalf("altered copy: %v, want ErrSnapshotChanged", err)
	}

	h.owner.Mutate(http.MethodPost, "/v1/runs/"+first.ID+"/actions/cancel", nil).MustStatus(t, http.StatusOK)
	var left int
	if err := h.env.DB.Get(&left, `SELECT count(*) FROM run_variable_values WHERE run_id = $1`, first.ID); err != nil || left != 0 {
		t.Fatalf("%d pinned values outlive the canceled run (%v)", left, err)
	}

	// The second run's copies, still pinned, go with the run when its
	// workspace is deleted (a trigger on runs, not a foreign key per row).
	if err := h.env.DB.Get(&left, `SELECT count(*) FROM run_variable_values WHERE run_id = $1`, second.ID); err != nil || left != 3 {
		t.Fatalf("the second run pinned %d values (%v), want 3", left, err)
	}
	if err := db.WithTx(h.ctx, h.env.DB, func(tx *sqlx.Tx) error {
		_, _, err := h.env.Server.Services().Workspaces.DeleteWorkspace(h.ctx, tx, h.ownerPrincipal(), wsID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.env.DB.Get(&left, `SELECT count(*) FROM run_variable_values WHERE run_id = $1`, second.ID); err != nil || left != 0 {
		t.Fatalf("%d pinned values outlive their deleted run (%v)", left, err)
	}
}

// TestRunReadsLeaveTheVariableReferencesOut: a run of a workspace with
// many variable sets pins thousands of variable references in its input
// snapshot, so a read of the run carries the snapshot without them; the
// resolution of its inputs still reads and checks every one.
func TestRunReadsLeaveTheVariableReferencesOut(t *testing.T) {
	t.Parallel()
	h := setup(t)
	wsID := h.workspace("refs-out")
	h.variable(wsID, "region", "eu-west-1", false, false)
	h.variable(wsID, "token", "refs-out-secret-5c1e", true, false)
	r := h.createRun(wsID)
	var copied bool
	if err := h.env.DB.Get(&copied, `SELECT input_snapshot_without_variables = input_snapshot - 'variables' FROM runs
		WHERE id = $1`, r.ID); err != nil || !copied {
		t.Fatalf("the run keeps no copy of its snapshot without the variables (%v)", err)
	}
	// A run written before that copy (or by the previous release) is read
	// from its whole snapshot, less the variables all the same.
	for _, older := range []bool{false, true} {
		if older {
			if _, err := h.env.DB.Exec(`UPDATE runs SET input_snapshot_without_variables = NULL WHERE id = $1`, r.ID); err != nil {
				t.Fatal(err)
			}
			r = h.read(r.ID)
		}
		var snap map[string]json.RawMessage
		if err := json.Unmarshal(r.InputSnapshot, &snap); err != nil {
			t.Fatal(err)
		}
		if _, ok := snap["variables"]; ok || snap["tool_version"] == nil {
			t.Fatalf("a read of the run carries %s", r.InputSnapshot)
		}
	}
	if sensitive, plain, _ := h.snapshotOf(r); !slices.Equal(sensitive, []string{"token"}) || !slices.Equal(plain, []string{"region"}) {
		t.Fatalf("stored snapshot pins sensitive %v, plain %v", sensitive, plain)
	}
	inputs, err := h.runs.RunInputs(h.ctx, r)
	got := map[string]string{}
	for _, v := range inputs {
		got[v.Key] = v.Value
	}
	if err != nil || !maps.Equal(got, map[string]string{"region": "eu-west-1", "token": "refs-out-secret-5c1e"}) {
		t.Fatalf("inputs %v (%v)", got, err)
	}
	// The references are still what the inputs are checked against: an
	// altered one fails the resolution.
	if _, err := h.env.DB.Exec(`UPDATE runs SET input_snapshot = jsonb_set(input_snapshot, '{variables,0,value_version}', '7')
		WHERE id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.runs.RunInputs(h.ctx, h.read(r.ID)); !errors.Is(err, workspace.ErrSnapshotChanged) {
		t.Fatalf("an altered reference: %v, want ErrSnapshotChanged", err)
	}
}

// TestPinningChecksNoParentPerRow keeps run creation from growing with a
// per-row check: a run of a workspace with twenty variable sets pins
// thousands of values in one COPY, and a foreign key on the copies (a
// lookup and a share lock of the same run and organization for every row)
// took most of that run's creation. Their cleanup is the runs trigger's.
func TestPinningChecksNoParentPerRow(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	var rowTriggers []string
	if err := env.DB.Select(&rowTriggers, `SELECT tgname FROM pg_trigger
		WHERE tgrelid = 'run_variable_values'::regclass AND (tgtype & 1) = 1 ORDER BY tgname`); err != nil {
		t.Fatal(err)
	}
	if len(rowTriggers) != 0 {
		t.Fatalf("pinned values fire row triggers (foreign key checks among them): %v", rowTriggers)
	}
	var cleanup int
	if err := env.DB.Get(&cleanup, `SELECT count(*) FROM pg_trigger
		WHERE tgrelid = 'runs'::regclass AND tgname = 'runs_delete_pinned_values' AND tgenabled <> 'D'`); err != nil || cleanup != 1 {
		t.Fatalf("no enabled trigger deletes a run's pinned values with it (%d, %v)", cleanup, err)
	}
}

// TestCanceledApplyKeepsItsEvidence cancels a running apply: the run stays
// applying with its run token revoked (the CLI can no longer write state),
// cancel is not offered again, and the heartbeat tells the worker to stop.
// The interrupted apply's emergency state then lands the run in recovery
// with its digest in the review.
func TestCanceledApplyKeepsItsEvidence(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.plan(h.createRun(h.workspace("canceled")), planJSON(t))
	h.approve(r.ID)
	st := h.start(h.read(r.ID), run.PhaseApply)
	token, err := h.runs.IssueToken(h.ctx, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.runs.AuthenticateToken(h.ctx, token); err != nil {
		t.Fatalf("the apply's token before cancel: %v", err)
	}
	// Before the cancel, the CLI locked the workspace and created a state
	// version through /api/v2, getting a signed upload URL.
	cli := func(method, path string, body any) *apitest.Response {
		return h.env.Anonymous().Do(apitest.Request{Method: method, Path: path, Body: body,
			Header: map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/vnd.api+json"}})
	}
	cli(http.MethodPost, "/api/v2/workspaces/"+r.WorkspaceID+"/actions/lock", nil).MustStatus(t, http.StatusOK)
	stateBody := []byte(`{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"lin-cancel","outputs":{},"resources":[]}`)
	sum := md5.Sum(stateBody)
	var created struct {
		Data struct {
			Attributes map[string]any `json:"attributes"`
		} `json:"data"`
	}
	cli(http.MethodPost, "/api/v2/workspaces/"+r.WorkspaceID+"/state-versions", map[string]any{"data": map[string]any{
		"type": "state-versions", "attributes": map[string]any{"serial": 1, "md5": hex.EncodeToString(sum[:]), "lineage": "lin-cancel"}}}).
		MustStatus(t, http.StatusCreated).JSON(t, &created)
	uploadURL, _ := created.Data.Attributes["hosted-state-upload-url"].(string)

	h.owner.Mutate(http.MethodPost, "/v1/runs/"+r.ID+"/actions/cancel", nil).MustStatus(t, http.StatusOK)
	v := h.review(r.ID)
	if v.Status != string(run.StatusApplying) || v.ApplyStatus != run.PhaseRunning || contains(v.Actions, run.ActionCancel) {
		t.Fatalf("canceled apply, still running: %+v", v)
	}
	if _, err := h.runs.AuthenticateToken(h.ctx, token); !errors.Is(err, run.ErrInvalidToken) {
		t.Fatalf("the apply's token after cancel: %v, want ErrInvalidToken", err)
	}
	if halt, err := h.runs.Heartbeat(h.ctx, st.Attempt.ID); err != nil || halt != run.HaltStop {
		t.Fatalf("heartbeat after cancel: halt %v, %v", halt, err)
	}
	if again := h.owner.Mutate(http.MethodPost, "/v1/runs/"+r.ID+"/actions/cancel", nil); again.Status != http.StatusConflict {
		t.Fatalf("second cancel: %d %s", again.Status, again.Body)
	}
	// A force-cancel waits out the cool-off the cancel's interrupt gets;
	// then the heartbeat tells the worker to kill the sandbox at once.
	p := access.Principal{Kind: access.KindUser, ID: h.owner.ID, OrganizationID: h.owner.OrganizationID, Role: access.RoleOwner,
		Permissions: access.PermissionsOf(access.RoleOwner)}
	force := func() error {
		tx, err := h.env.DB.BeginTxx(h.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := h.runs.ForceCancel(h.ctx, tx, p, r.ID); err != nil {
			return err
		}
		return tx.Commit()
	}
	if err := force(); !errors.Is(err, run.ErrActionNotAllowed) {
		t.Fatalf("force-cancel within the cool-off: %v, want ErrActionNotAllowed", err)
	}
	h.advance(run.ForceCancelCoolOff)
	if err := force(); err != nil {
		t.Fatalf("force-cancel after the cool-off: %v", err)
	}
	if halt, err := h.runs.Heartbeat(h.ctx, st.Attempt.ID); err != nil || halt != run.HaltKill {
		t.Fatalf("heartbeat after force-cancel: halt %v, %v", halt, err)
	}
	if err := force(); !errors.Is(err, run.ErrActionNotAllowed) {
		t.Fatalf("second force-cancel: %v, want ErrActionNotAllowed", err)
	}
	// The upload URL the CLI got before does not outlive its revoked token.
	upload := h.env.Anonymous().Do(apitest.Request{Method: http.MethodPut, Path: strings.TrimPrefix(uploadURL, h.env.URL),
		Body: stateBody, Header: map[string]string{"Content-Type": "application/octet-stream"}})
	if upload.Status != http.StatusForbidden || uploadURL == "" {
		t.Fatalf("upload through the canceled apply's URL %q: %d %s", uploadURL, upload.Status, upload.Body)
	}

	emergency, err := h.runs.StoreArtifact(h.ctx, st, run.ArtifactEmergencyState, strings.NewReader(`{"version":4,"serial":2}`), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// Tofu stopped on its interrupt and kept its state as errored.tfstate.
	got, err := h.runs.CommitApply(h.ctx, st.Attempt.ID, run.ApplyOutcome{ExitCode: -1, Interruption: run.InterruptCanceled, Emergency: &emergency})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != run.StatusRecoveryRequired || got.ApplyStatus != run.PhaseInterrupted || *got.TerminalReason != "apply_canceled" {
		t.Fatalf("interrupted apply: %s, apply %s, reason %v", got.Status, got.ApplyStatus, got.TerminalReason)
	}
	v = h.review(r.ID)
	digest := run.HexDigest(emergency.SHA256)
	if v.Apply.EmergencyStateDigest == nil || *v.Apply.EmergencyStateDigest != digest || v.Recovery == nil ||
		v.Recovery.EmergencyStateDigest == nil || *v.Recovery.EmergencyStateDigest != digest || v.Recovery.CurrentStateVersionID != nil {
		t.Fatalf("review of the interrupted apply: %+v (emergency %s)", v, digest)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestRecoveryResumesAfterItsImport fails a recovery's resolving
// transaction after its emergency state was imported (a lost connection,
// a crash, an error storing the answer), then retries it as a client whose
// response was lost would, twice at once: the retries resume the same
// recovery with the evidence first shown, import nothing again and
// resolve the run to the one version imported, which stays current.
func TestRecoveryResumesAfterItsImport(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.plan(h.createRun(h.workspace("recovery")), planJSON(t))
	h.approve(r.ID)
	st := h.start(h.read(r.ID), run.PhaseApply)
	body := `{"version":4,"terraform_version":"1.10.6","serial":3,"lineage":"lin-recovery","outputs":{},"resources":[]}`
	emergency, err := h.runs.StoreArtifact(h.ctx, st, run.ArtifactEmergencyState, strings.NewReader(body), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.runs.CommitApply(h.ctx, st.Attempt.ID, run.ApplyOutcome{ExitCode: -1, Interruption: run.InterruptShutdown,
		Emergency: &emergency}); err != nil {
		t.Fatal(err)
	}
	p := access.Principal{Kind: access.KindUser, ID: h.owner.ID, OrganizationID: h.owner.OrganizationID, Role: access.RoleOwner,
		Permissions: access.PermissionsOf(access.RoleOwner), ReauthenticatedAt: time.Now()}
	in := run.RecoverInput{Resolution: run.ResolutionImportEmergencyState, EmergencyStateDigest: run.HexDigest(emergency.SHA256),
		Reason: "import what the interrupted apply kept", ConfirmFenceAdvance: true}
	lost := errors.New("the answer could not be stored")
	if _, err := h.runs.Recover(h.ctx, p, r.ID, in, func(context.Context, *sqlx.Tx, run.Run) error { return lost }); !errors.Is(err, lost) {
		t.Fatalf("first recovery: %v, want its settle error", err)
	}
	if got := h.read(r.ID); got.Status != run.StatusRecoveryRequired {
		t.Fatalf("after the failed resolution the run is %s", got.Status)
	}

	results := make(chan error, 2)
	var recovered [2]run.Run
	for i := range recovered {
		go func() {
			var err error
			recovered[i], err = h.runs.Recover(h.ctx, p, r.ID, in, func(context.Context, *sqlx.Tx, run.Run) error { return nil })
			results <- err
		}()
	}
	var oks int
	for range recovered {
		if err := <-results; err == nil {
			oks++
		} else if !errors.Is(err, run.ErrRecoveryLeaseHeld) && !errors.Is(err, run.ErrActionNotAllowed) {
			t.Errorf("a retried recovery: %v", err)
		}
	}
	if oks == 0 {
		t.Fatal("no retry resolved the recovery")
	}
	final := h.read(r.ID)
	var versions []struct {
		ID     string `db:"id"`
		Status string `db:"status"`
	}
	if err := h.env.DB.Select(&versions, `SELECT id, status FROM state_versions WHERE workspace_id = $1 ORDER BY created_at`, r.WorkspaceID); err != nil {
		t.Fatal(err)
	}
	if final.Status != run.StatusRecovered || final.StateVersionID == nil || len(versions) != 1 ||
		versions[0].ID != *final.StateVersionID || versions[0].Status != "finalized" {
		t.Fatalf("recovered run %s with state %v; the workspace's versions: %+v", final.Status, final.StateVersionID, versions)
	}
}

// TestConcurrentStateUploadsKeepTheFinalizedObject sends one pending state
// version's bytes through its upload URL many times at once, as a CLI
// retrying a slow PUT would, some with wrong bytes: one upload finalizes
// the version, the others fail or find it final, and none removes or
// replaces the object the version was finalized with.
func TestConcurrentStateUploadsKeepTheFinalizedObject(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.plan(h.createRun(h.workspace("uploads")), planJSON(t))
	h.approve(r.ID)
	st := h.start(h.read(r.ID), run.PhaseApply)
	token, err := h.runs.IssueToken(h.ctx, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	cli := func(method, path string, body any) *apitest.Response {
		return h.env.Anonymous().Do(apitest.Request{Method: method, Path: path, Body: body,
			Header: map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/vnd.api+json"}})
	}
	cli(http.MethodPost, "/api/v2/workspaces/"+r.WorkspaceID+"/actions/lock", nil).MustStatus(t, http.StatusOK)
	stateBody := []byte(`{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"lin-uploads","outputs":{},"resources":[]}`)
	sum := md5.Sum(stateBody)
	var created struct {
		Data struct {
			ID         string         `json:"id"`
			Attributes map[string]any `json:"attributes"`
		} `json:"data"`
	}
	cli(http.MethodPost, "/api/v2/workspaces/"+r.WorkspaceID+"/state-versions", map[string]any{"data": map[string]any{
		"type": "state-versions", "attributes": map[string]any{"serial": 1, "md5": hex.EncodeToString(sum[:]), "lineage": "lin-uploads"}}}).
		MustStatus(t, http.StatusCreated).JSON(t, &created)
	uploadURL, _ := created.Data.Attributes["hosted-state-upload-url"].(string)
	wrong := bytes.Replace(stateBody, []byte("lin-uploads"), []byte("lin-replaced"), 1)
	done := make(chan int, 12)
	for i := range cap(done) {
		go func() {
			body := stateBody
			if i%4 == 3 {
				body = wrong
			}
			resp := h.env.Anonymous().Do(apitest.Request{Method: http.MethodPut, Path: strings.TrimPrefix(uploadURL, h.env.URL),
				Body: body, Header: map[string]string{"Content-Type": "application/octet-stream"}})
			done <- resp.Status
		}()
	}
	for range cap(done) {
		<-done
	}
	for range 3 {
		got := cli(http.MethodGet, "/api/v2/state-versions/"+created.Data.ID+"/download", nil)
		if got.Status != http.StatusOK || !bytes.Equal(got.Body, stateBody) {
			t.Fatalf("the finalized version downloads as %d %q, want %q", got.Status, got.Body, stateBody)
		}
	}
}

// TestApplyCanceledBeforeTofuStartedIsCanceled cancels an apply whose
// worker had not started tofu yet: nothing ran, so the run ends canceled,
// as a cancel before the apply started does, without recovery.
func TestApplyCanceledBeforeTofuStartedIsCanceled(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.plan(h.createRun(h.workspace("early-cancel")), planJSON(t))
	h.approve(r.ID)
	st := h.start(h.read(r.ID), run.PhaseApply)
	h.owner.Mutate(http.MethodPost, "/v1/runs/"+r.ID+"/actions/cancel", nil).MustStatus(t, http.StatusOK)
	got, err := h.runs.FailUnstartedAttempt(h.ctx, st.Attempt.ID, run.InterruptCanceled, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != run.StatusCanceled || got.ApplyStatus != run.PhaseCanceled || got.TerminalReason == nil || *got.TerminalReason != "canceled" {
		t.Fatalf("apply canceled before tofu started: %s, apply %s, reason %v", got.Status, got.ApplyStatus, got.TerminalReason)
	}
}

// TestStrandedPhaseJobIsRedelivered: a worker takes a plan's job and dies
// before starting the attempt, leaving River's job running (River would
// rescue it only after an hour). The reaper queues a fresh job for the
// still-queued attempt once, and the attempt starts exactly once.
func TestStrandedPhaseJobIsRedelivered(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.createRun(h.workspace("stranded"))
	a := h.queued(r, run.PhasePlan)
	jobs := func(state string) int {
		t.Helper()
		var n int
		if err := h.env.DB.Get(&n, `SELECT count(*) FROM river_job WHERE kind = 'run_phase' AND args->>'attempt_id' = $1 AND state = $2`,
			a.ID, state); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if jobs("available") != 1 {
		t.Fatal("the plan's job is not available")
	}
	// Taken a second ago: a live worker may still be starting it.
	if _, err := h.env.DB.Exec(`UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '1 second',
		attempted_by = '{dead-worker}' WHERE kind = 'run_phase' AND args->>'attempt_id' = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := h.runs.ReapLostAttempts(h.ctx, time.Minute); err != nil || n != 0 {
		t.Fatalf("a job taken a second ago was redelivered: %d %v", n, err)
	}
	if _, err := h.env.DB.Exec(`UPDATE river_job SET attempted_at = now() - interval '1 hour'
		WHERE kind = 'run_phase' AND args->>'attempt_id' = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{1, 0} {
		if n, err := h.runs.ReapLostAttempts(h.ctx, time.Minute); err != nil || n != want {
			t.Fatalf("reap %d: redelivered %d, want %d (%v)", i, n, want, err)
		}
	}
	if jobs("available") != 1 || jobs("running") != 1 {
		t.Fatalf("jobs after redelivery: %d available, %d running", jobs("available"), jobs("running"))
	}
	if _, err := h.runs.StartAttempt(h.ctx, a.ID, "worker-b", "local"); err != nil {
		t.Fatalf("the redelivered job cannot start the attempt: %v", err)
	}
	if _, err := h.runs.StartAttempt(h.ctx, a.ID, "worker-a", "local"); !errors.Is(err, run.ErrAttemptNotCurrent) {
		t.Fatalf("the stranded job started the attempt a second time: %v", err)
	}
}
