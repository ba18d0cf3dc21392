package run_test

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/workspace"
)

// createRunWith uploads a one-resource configuration and creates a run of
// it through /v1 with the given body fields over a plan_and_apply run's.
func (h *harness) createRunWith(workspaceID string, fields map[string]any) *apitest.Response {
	h.t.Helper()
	body := map[string]any{"workspace_id": workspaceID, "configuration_version_id": h.uploadConfiguration(workspaceID), "kind": "plan_and_apply",
		"message": "test"}
	maps.Copy(body, fields)
	return h.owner.Mutate(http.MethodPost, "/v1/runs", body)
}

func (h *harness) createdRun(resp *apitest.Response) run.Run {
	h.t.Helper()
	var created struct{ ID string }
	resp.MustStatus(h.t, http.StatusCreated).Data(h.t, &created)
	return h.read(created.ID)
}

// planEmpty commits a plan without changes, as planWith does.
func (h *harness) planEmpty(r run.Run) run.Run {
	h.t.Helper()
	return h.planWith(r, planJSON(h.t), false, nil)
}

func (h *harness) runCount(workspaceID string) int {
	h.t.Helper()
	var n int
	if err := h.env.DB.Get(&n, `SELECT count(*) FROM runs WHERE workspace_id = $1`, workspaceID); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// publishState does what an apply's CLI does through /api/v2 with its run
// token: it locks the workspace and publishes a state version.
func (h *harness) publishState(st run.Started, lineage string) {
	h.t.Helper()
	token, err := h.runs.IssueToken(h.ctx, st, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	cli := func(method, path string, body any) *apitest.Response {
		return h.env.Anonymous().Do(apitest.Request{Method: method, Path: path, Body: body,
			Header: map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/vnd.api+json"}})
	}
	cli(http.MethodPost, "/api/v2/workspaces/"+st.Run.WorkspaceID+"/actions/lock", nil).MustStatus(h.t, http.StatusOK)
	body := []byte(`{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"` + lineage + `","outputs":{},"resources":[]}`)
	sum := md5.Sum(body)
	var created struct {
		Data struct {
			Attributes map[string]any `json:"attributes"`
		} `json:"data"`
	}
	cli(http.MethodPost, "/api/v2/workspaces/"+st.Run.WorkspaceID+"/state-versions", map[string]any{"data": map[string]any{
		"type": "state-versions", "attributes": map[string]any{"serial": 1, "md5": hex.EncodeToString(sum[:]), "lineage": lineage}}}).
		MustStatus(h.t, http.StatusCreated).JSON(h.t, &created)
	uploadURL, _ := created.Data.Attributes["hosted-state-upload-url"].(string)
	h.env.Anonymous().Do(apitest.Request{Method: http.MethodPut, Path: strings.TrimPrefix(uploadURL, h.env.URL), Body: body,
		Header: map[string]string{"Content-Type": "application/octet-stream"}}).MustStatus(h.t, http.StatusOK)
}

type optionsReview struct {
	TargetAddrs     []string `json:"target_addrs"`
	ReplaceAddrs    []string `json:"replace_addrs"`
	Refresh         bool     `json:"refresh"`
	RefreshOnly     bool     `json:"refresh_only"`
	AllowEmptyApply bool     `json:"allow_empty_apply"`
	SavePlan        bool     `json:"save_plan"`
	Variables       []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"variables"`
	Pinned struct {
		InputSnapshotDigest string `json:"input_snapshot_digest"`
		ToolVersion         string `json:"tool_version"`
	} `json:"pinned"`
}

// TestRunOptionsArePinnedAndShown: a run keeps the options it was created
// with, shows them, binds them into its input snapshot digest, and its plan
// gets its variables over the workspace's. Options changed on the row after
// creation are refused before a plan could use them.
func TestRunOptionsArePinnedAndShown(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("options")
	h.variable(ws, "greeting", "from the workspace", false, false)
	h.variable(ws, "size", "small", false, false)
	fields := map[string]any{"target_addrs": []string{"terraform_data.item", `module.m.terraform_data.x["k"]`},
		"replace_addrs": []string{"terraform_data.item"}, "refresh": false, "allow_empty_apply": true,
		"variables": []map[string]string{{"key": "greeting", "value": `"from the run"`}, {"key": "extra", "value": "3"}}}
	created := h.createRunWith(ws, fields).MustStatus(t, http.StatusCreated)
	var shown optionsReview
	created.Data(t, &shown)
	if len(shown.TargetAddrs) != 2 || shown.TargetAddrs[1] != `module.m.terraform_data.x["k"]` || len(shown.ReplaceAddrs) != 1 ||
		shown.Refresh || shown.RefreshOnly || !shown.AllowEmptyApply || shown.SavePlan || len(shown.Variables) != 2 ||
		shown.Variables[0].Value != `"from the run"` {
		t.Fatalf("created run shows %+v", shown)
	}
	r := h.createdRun(created)

	inputs, err := h.runs.RunInputs(h.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]workspace.ResolvedVariable{}
	for _, v := range inputs {
		got[v.Key] = v
	}
	if len(inputs) != 3 || got["greeting"].Value != `"from the run"` || !got["greeting"].HCL || got["size"].Value != "small" ||
		got["extra"].Value != "3" {
		t.Fatalf("the plan's inputs: %+v", inputs)
	}

	// The same run with one variable's value changed pins another
	// snapshot; a run without options pins one without them.
	fields["variables"] = []map[string]string{{"key": "greeting", "value": `"from another run"`}, {"key": "extra", "value": "3"}}
	var other, plain optionsReview
	h.createRunWith(ws, fields).MustStatus(t, http.StatusCreated).Data(t, &other)
	h.createRunWith(ws, nil).MustStatus(t, http.StatusCreated).Data(t, &plain)
	if other.Pinned.InputSnapshotDigest == shown.Pinned.InputSnapshotDigest || plain.Pinned.InputSnapshotDigest == shown.Pinned.InputSnapshotDigest {
		t.Fatalf("input snapshot digests do not follow the options: %s %s %s", shown.Pinned.InputSnapshotDigest,
			other.Pinned.InputSnapshotDigest, plain.Pinned.InputSnapshotDigest)
	}
	if !plain.Refresh || plain.TargetAddrs == nil || len(plain.TargetAddrs) != 0 || plain.Variables == nil {
		t.Fatalf("a run without options shows %+v", plain)
	}

	// A run variable changed under the run, or a target added, is not
	// what the run pinned: its plan gets no inputs.
	for _, tamper := range []string{
		`UPDATE runs SET run_variables = '[{"key":"greeting","value":"\"swapped\""},{"key":"extra","value":"3"}]' WHERE id = $1`,
		`UPDATE runs SET target_addrs = array_append(target_addrs, 'terraform_data.other') WHERE id = $1`,
		`UPDATE runs SET refresh = true WHERE id = $1`,
	} {
		if _, err := h.env.DB.Exec(tamper, r.ID); err != nil {
			t.Fatal(err)
		}
		changed := h.read(r.ID)
		if _, err := h.runs.RunInputs(h.ctx, changed); !errors.Is(err, workspace.ErrSnapshotChanged) {
			t.Fatalf("after %q: %v, want ErrSnapshotChanged", tamper, err)
		}
		if _, err := h.env.DB.Exec(`UPDATE runs SET run_variables = $2, target_addrs = $3, refresh = false WHERE id = $1`,
			r.ID, r.Variables, r.TargetAddrs); err != nil {
			t.Fatal(err)
		}
		if _, err := h.runs.RunInputs(h.ctx, h.read(r.ID)); err != nil {
			t.Fatalf("restored options: %v", err)
		}
	}
}

// TestRefusedRunOptionsPersistNothing: each refused option answers its own
// code and leaves no run behind.
func TestRefusedRunOptionsPersistNothing(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("refused")
	tooMany := make([]string, run.MaxRunAddrs+1)
	for i := range tooMany {
		tooMany[i] = "terraform_data.item"
	}
	for _, tc := range []struct {
		fields map[string]any
		code   string
	}{
		{map[string]any{"target_addrs": []string{"terraform_data.item", "not an address"}}, "RUN_TARGET_ADDRS_INVALID"},
		{map[string]any{"target_addrs": tooMany}, "RUN_TARGET_ADDRS_INVALID"},
		{map[string]any{"replace_addrs": []string{"terraform_data.item\n-destroy"}}, "RUN_REPLACE_ADDRS_INVALID"},
		{map[string]any{"refresh_only": true, "refresh": false}, "RUN_REFRESH_ONLY_INVALID"},
		{map[string]any{"variables": []map[string]string{{"key": "a", "value": "1"}, {"key": "a", "value": "2"}}}, "RUN_VARIABLES_INVALID"},
		{map[string]any{"variables": []map[string]string{{"key": "bad key", "value": "1"}}}, "RUN_VARIABLES_INVALID"},
		{map[string]any{"kind": "plan_only", "save_plan": true}, "RUN_SAVE_PLAN_INVALID"},
		{map[string]any{"kind": "plan_only", "allow_empty_apply": true}, "RUN_ALLOW_EMPTY_APPLY_INVALID"},
		{map[string]any{"tool_version": "1.10.6"}, "RUN_TOOL_VERSION_PLAN_ONLY"},
		{map[string]any{"kind": "plan_only", "tool_version": "1.0.0"}, "RUN_TOOL_VERSION_UNSUPPORTED"},
		{map[string]any{"auto_apply": true, "target_addrs": []string{"terraform_data.item"}}, "RUN_AUTO_APPLY_UNSUPPORTED"},
	} {
		resp := h.createRunWith(ws, tc.fields)
		if resp.Status != http.StatusBadRequest || !strings.Contains(string(resp.Body), tc.code) {
			t.Errorf("%v: %d %s, want 400 %s", tc.fields, resp.Status, resp.Body, tc.code)
		}
	}
	if n := h.runCount(ws); n != 0 {
		t.Fatalf("%d runs persisted by refused requests", n)
	}
	// An offered version is pinned by a plan-only run instead of the
	// workspace's.
	var ok optionsReview
	h.createRunWith(ws, map[string]any{"kind": "plan_only", "tool_version": "1.10.6"}).MustStatus(t, http.StatusCreated).Data(t, &ok)
	if ok.Pinned.ToolVersion != "1.10.6" {
		t.Fatalf("plan-only run with a tool version pins %q", ok.Pinned.ToolVersion)
	}
}

// TestAllowEmptyApplyGoesOnToApproval: a plan without changes ends a run,
// unless the run allows an empty apply; then it waits for approval and its
// apply, which publishes no state when nothing changed, ends applied.
func TestAllowEmptyApplyGoesOnToApproval(t *testing.T) {
	t.Parallel()
	h := setup(t)
	plain := h.planEmpty(h.createRun(h.workspace("empty-plain")))
	if plain.Status != run.StatusPlannedAndFinished || plain.TerminalReason == nil || *plain.TerminalReason != "no_changes" {
		t.Fatalf("empty plan without allow_empty_apply: %s %v", plain.Status, plain.TerminalReason)
	}
	ws := h.workspace("empty-allowed")
	r := h.planEmpty(h.createdRun(h.createRunWith(ws, map[string]any{"allow_empty_apply": true})))
	if r.Status != run.StatusAwaitingApproval {
		t.Fatalf("empty plan with allow_empty_apply: %s, want awaiting_approval", r.Status)
	}
	h.approve(r.ID)
	st := h.start(h.read(r.ID), run.PhaseApply)
	applied, err := h.runs.CommitApply(h.ctx, st.Attempt.ID, run.ApplyOutcome{ExitCode: 0})
	if err != nil {
		t.Fatal(err)
	}
	if applied.Status != run.StatusApplied || applied.ApplyStatus != run.PhaseFinished || applied.StateVersionID != nil {
		t.Fatalf("empty apply: %s %s %v, want applied without a new state", applied.Status, applied.ApplyStatus, applied.StateVersionID)
	}
	// An apply of changes that publishes nothing is still uncertain.
	changed := h.plan(h.createRun(ws), planJSON(t))
	h.approve(changed.ID)
	st = h.start(h.read(changed.ID), run.PhaseApply)
	if got, err := h.runs.CommitApply(h.ctx, st.Attempt.ID, run.ApplyOutcome{ExitCode: 0}); err != nil || got.Status != run.StatusRecoveryRequired {
		t.Fatalf("apply of changes without a state: %s %v, want recovery_required", got.Status, err)
	}
}

// TestSavedPlanWaitsOutsideTheQueue: a saved plan plans at once beside the
// workspace's active run without taking its lock or its current-run place,
// and waits; its approval joins the queue only when the queue is free. Once
// the state moves on from its plan's, it is discarded.
func TestSavedPlanWaitsOutsideTheQueue(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("saved")
	active := h.createRun(ws)
	saved := h.createdRun(h.createRunWith(ws, map[string]any{"save_plan": true}))
	if saved.Status != run.StatusPlanQueued || !saved.SavePlan {
		t.Fatalf("saved plan beside an active run: %s, want plan_queued", saved.Status)
	}
	if kind, id := h.lockHolder(ws); id != active.ID {
		t.Fatalf("workspace locked by %s %s, want the active run", kind, id)
	}
	if cur, err := h.runs.CurrentRun(h.ctx, h.owner.OrganizationID, ws); err != nil || cur == nil || cur.ID != active.ID {
		t.Fatalf("current run %+v (%v), want the active run", cur, err)
	}
	saved = h.plan(saved, planJSON(t))
	if saved.Status != run.StatusAwaitingApproval {
		t.Fatalf("saved plan after its plan: %s", saved.Status)
	}
	// Lists tell a saved plan awaiting its apply from other runs awaiting
	// approval, as the protocol shows planned_and_saved apart from planned.
	awaiting := []string{string(run.StatusAwaitingApproval)}
	for which, want := range map[run.SavedPlanFilter]int{run.SavedPlansAny: 1, run.SavedPlansOnly: 1, run.SavedPlansExcluded: 0} {
		got, total, err := h.runs.ListRunsPage(h.ctx, h.ownerPrincipal(), run.RunFilter{WorkspaceID: ws, Statuses: awaiting, SavedPlans: which}, 1, 20)
		if err != nil || total != want || len(got) != want || (want == 1 && got[0].ID != saved.ID) {
			t.Fatalf("runs awaiting approval, saved plans %q: %d %v %v, want %d", which, total, got, err, want)
		}
	}
	if kind, id := h.lockHolder(ws); id != active.ID {
		t.Fatalf("after the saved plan's plan the workspace is locked by %s %s", kind, id)
	}

	// Applying it while another run holds the queue is refused.
	v := h.review(saved.ID)
	approve := func() *apitest.Response {
		return h.owner.Mutate(http.MethodPost, "/v1/runs/"+saved.ID+"/actions/approve", map[string]any{"plan_digest": v.Plan.PlanDigest,
			"policy_result_digest": v.Policy.ResultDigest, "predecessor_state_version_id": v.Plan.PredecessorStateVersionID,
			"dependency_lock_digest": v.Pinned.DependencyLockDigest})
	}
	if resp := approve(); resp.Status != http.StatusConflict || !bytes.Contains(resp.Body, []byte("WORKSPACE_LOCKED")) {
		t.Fatalf("approving a saved plan beside an active run: %d %s", resp.Status, resp.Body)
	}
	if h.read(saved.ID).Status != run.StatusAwaitingApproval {
		t.Fatal("a refused approval moved the saved plan")
	}

	// The active run applies and publishes a state: the saved plan was
	// made against the state before, so it is discarded as the state
	// becomes current, and approving it is refused.
	active = h.plan(h.read(active.ID), planJSON(t))
	h.approve(active.ID)
	elsewhere := h.plan(h.createdRun(h.createRunWith(h.workspace("saved-elsewhere"), map[string]any{"save_plan": true})), planJSON(t))
	st := h.start(h.read(active.ID), run.PhaseApply)
	h.publishState(st, "lin-saved")
	if got := h.read(elsewhere.ID); got.Status != run.StatusAwaitingApproval {
		t.Fatalf("a saved plan of another workspace after the state moved: %s", got.Status)
	}
	stale := h.read(saved.ID)
	if stale.Status != run.StatusRejected || stale.TerminalReason == nil || *stale.TerminalReason != run.ReasonStateChanged ||
		stale.DecisionAction != nil {
		t.Fatalf("a saved plan once the state moved: %s (%v), decision %v", stale.Status, stale.TerminalReason, stale.DecisionAction)
	}
	var evidence []string
	if err := h.env.DB.Select(&evidence, `SELECT evidence::text FROM audit_events WHERE action = 'run.discarded' AND target_id = $1
		AND actor_type = 'system'`, saved.ID); err != nil || len(evidence) != 1 ||
		!strings.Contains(evidence[0], `"published_by_kind": "run"`) || !strings.Contains(evidence[0], `"published_by_id": "`+active.ID+`"`) ||
		!strings.Contains(evidence[0], `"state_version_id": "sv_`) {
		t.Fatalf("audit events of the discard: %v %v", evidence, err)
	}
	if got, err := h.runs.CommitApply(h.ctx, st.Attempt.ID, run.ApplyOutcome{ExitCode: 0}); err != nil || got.Status != run.StatusApplied {
		t.Fatalf("active run's apply: %s %v", got.Status, err)
	}
	if resp := approve(); resp.Status != http.StatusConflict || !bytes.Contains(resp.Body, []byte("RUN_ACTION_NOT_ALLOWED")) {
		t.Fatalf("approving a discarded saved plan: %d %s", resp.Status, resp.Body)
	}

	// A saved plan made against the current state, with the queue free,
	// is applied: it takes the lock and holds the queue until it ends.
	current, err := h.runs.CurrentStateVersionID(h.ctx, active)
	if err != nil || current == nil {
		t.Fatalf("current state after the apply: %v %v", current, err)
	}
	fresh := h.planWith(h.createdRun(h.createRunWith(ws, map[string]any{"save_plan": true})), planJSON(t), true, current)
	h.approve(fresh.ID)
	if got := h.read(fresh.ID); got.Status != run.StatusApplyQueued {
		t.Fatalf("approved saved plan: %s", got.Status)
	}
	if _, id := h.lockHolder(ws); id != fresh.ID {
		t.Fatalf("approved saved plan does not hold the lock (%s)", id)
	}
	if next := h.createRun(ws); next.Status != run.StatusPending {
		t.Fatalf("a run created behind an applying saved plan: %s, want pending", next.Status)
	}
}

// TestPlanCommittedAfterTheStateMovedIsRefused: a saved plan reads no state
// yet when another run's apply publishes one, then commits as made against
// the state before. Its commit is refused (ErrStateMoved, which the runner
// records as state_changed_during_plan): waiting for a decision it could
// never get, it would escape the discard the finalization made too early.
func TestPlanCommittedAfterTheStateMovedIsRefused(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("late")
	active := h.plan(h.createRun(ws), planJSON(t))
	h.approve(active.ID)
	saved := h.createdRun(h.createRunWith(ws, map[string]any{"save_plan": true}))
	applying := h.start(h.read(active.ID), run.PhaseApply)
	planning := h.start(saved, run.PhasePlan)
	h.publishState(applying, "lin-late")
	if _, err := h.runs.CommitPlan(h.ctx, planning.Attempt.ID, run.PlanEvidence{HasChanges: true}); !errors.Is(err, run.ErrStateMoved) {
		t.Fatalf("committing a plan made before the state moved: %v, want ErrStateMoved", err)
	}
	if _, err := h.runs.FailAttempt(h.ctx, planning.Attempt.ID, "state_changed_during_plan", -1, nil); err != nil {
		t.Fatal(err)
	}
	if got := h.read(saved.ID); got.Status != run.StatusErrored || got.TerminalReason == nil || *got.TerminalReason != "state_changed_during_plan" {
		t.Fatalf("the late saved plan: %s (%v)", got.Status, got.TerminalReason)
	}
}
