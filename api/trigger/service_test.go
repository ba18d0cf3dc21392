package trigger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/plandiff/plandifftest"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/run/runtest"
	"github.com/cairnhq/cairn/api/trigger"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// harness is a real cairn-api over a fresh database with an organization
// owner; the worker's steps (plan, apply, fan-out) are driven directly.
type harness struct {
	t        *testing.T
	ctx      context.Context
	env      *apitest.Env
	owner    *apitest.User
	project  string
	runs     *run.Service
	triggers *trigger.Service
}

func setup(t *testing.T) *harness {
	t.Helper()
	env := apitest.New(t)
	services := env.Server.Services()
	h := &harness{t: t, ctx: context.Background(), env: env, owner: env.WithOrganization("triggers"),
		runs: services.Runs, triggers: services.Triggers}
	var p struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "triggers"}).MustStatus(t, http.StatusCreated).Data(t, &p)
	h.project = p.ID
	return h
}

func (h *harness) principal() access.Principal {
	return access.Principal{Kind: access.KindUser, ID: h.owner.ID, OrganizationID: h.owner.OrganizationID, Role: access.RoleOwner,
		Permissions: access.PermissionsOf(access.RoleOwner)}
}

func (h *harness) workspace(name string) string {
	h.t.Helper()
	var w struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": h.project, "name": name,
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).
		MustStatus(h.t, http.StatusCreated).Data(h.t, &w)
	return w.ID
}

func (h *harness) upload(workspaceID string) string {
	h.t.Helper()
	var cv struct{ ID string }
	h.owner.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + workspaceID + "/configuration-versions",
		Body:   devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "item" { input = "x" }`}),
		Header: map[string]string{"Content-Type": "application/gzip", "Idempotency-Key": apitest.NewKey()}}).
		MustStatus(h.t, http.StatusCreated).Data(h.t, &cv)
	return cv.ID
}

// addTrigger makes source a source of workspace through /v1.
func (h *harness) addTrigger(workspaceID, sourceID string) *apitest.Response {
	return h.owner.Mutate(http.MethodPost, "/v1/workspaces/"+workspaceID+"/run-triggers", map[string]string{"source_workspace_id": sourceID})
}

func (h *harness) mustTrigger(workspaceID, sourceID string) string {
	h.t.Helper()
	var v struct{ ID string }
	h.addTrigger(workspaceID, sourceID).MustStatus(h.t, http.StatusCreated).Data(h.t, &v)
	return v.ID
}

func refused(t *testing.T, resp *apitest.Response, code string) {
	t.Helper()
	if resp.Status != http.StatusUnprocessableEntity || resp.Code() != code {
		t.Fatalf("got %d %s, want 422 %s", resp.Status, resp.Body, code)
	}
}

func planJSON(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := plandifftest.TaggedPlanJSON(&b, 1); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// createRun creates a run of a fresh configuration of the workspace.
func (h *harness) createRun(workspaceID string, fields map[string]any) run.Run {
	h.t.Helper()
	body := map[string]any{"workspace_id": workspaceID, "configuration_version_id": h.upload(workspaceID), "message": "source"}
	for k, v := range fields {
		body[k] = v
	}
	var created struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/runs", body).MustStatus(h.t, http.StatusCreated).Data(h.t, &created)
	r, err := h.runs.RunOwner(h.ctx, created.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// apply takes a new plan_and_apply run of the workspace through an empty
// plan, a person's approval and an apply that succeeds.
func (h *harness) apply(workspaceID string) run.Run {
	h.t.Helper()
	r := h.createRun(workspaceID, map[string]any{"kind": "plan_and_apply", "allow_empty_apply": true})
	r = runtest.PlanWith(h.t, h.env, h.runs, r, planJSON(h.t), false, nil)
	if r.Status != run.StatusAwaitingApproval {
		h.t.Fatalf("source run after its plan: %s", r.Status)
	}
	var v struct {
		Plan struct {
			PlanDigest                string  `json:"plan_digest"`
			PredecessorStateVersionID *string `json:"predecessor_state_version_id"`
		} `json:"plan"`
		Policy struct {
			ResultDigest string `json:"result_digest"`
		} `json:"policy"`
		Pinned struct {
			DependencyLockDigest string `json:"dependency_lock_digest"`
		} `json:"pinned"`
	}
	h.owner.Get("/v1/runs/"+r.ID).MustStatus(h.t, http.StatusOK).Data(h.t, &v)
	h.owner.Mutate(http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", map[string]any{"plan_digest": v.Plan.PlanDigest,
		"policy_result_digest": v.Policy.ResultDigest, "predecessor_state_version_id": v.Plan.PredecessorStateVersionID,
		"dependency_lock_digest": v.Pinned.DependencyLockDigest}).MustStatus(h.t, http.StatusOK)
	attempts, err := h.runs.Attempts(h.ctx, h.env.DB, r)
	if err != nil {
		h.t.Fatal(err)
	}
	var attemptID string
	for _, a := range attempts {
		if a.Phase == run.PhaseApply && a.Status == run.AttemptQueued {
			attemptID = a.ID
		}
	}
	st, err := h.runs.StartAttempt(h.ctx, attemptID, "test-worker", "local")
	if err != nil {
		h.t.Fatalf("starting the apply: %v", err)
	}
	applied, err := h.runs.CommitApply(h.ctx, st.Attempt.ID, run.ApplyOutcome{ExitCode: 0})
	if err != nil || applied.Status != run.StatusApplied {
		h.t.Fatalf("apply: %s %v", applied.Status, err)
	}
	return applied
}

// fanOutJobs counts the fan-out jobs inserted for a run.
func (h *harness) fanOutJobs(runID string) int {
	h.t.Helper()
	var n int
	if err := h.env.DB.Get(&n, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'run_id' = $2`,
		run.TriggerArgs{}.Kind(), runID); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// triggeredRuns lists the runs of a workspace a trigger created.
func (h *harness) triggeredRuns(workspaceID string) []run.Run {
	h.t.Helper()
	var ids []string
	if err := h.env.DB.Select(&ids, `SELECT id FROM runs WHERE workspace_id = $1 AND triggered_by_run_id IS NOT NULL
		ORDER BY created_at`, workspaceID); err != nil {
		h.t.Fatal(err)
	}
	out := make([]run.Run, 0, len(ids))
	for _, id := range ids {
		r, err := h.runs.RunOwner(h.ctx, id)
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func (h *harness) fire(runID string) trigger.Fired {
	h.t.Helper()
	fired, err := h.triggers.Fire(h.ctx, runID)
	if err != nil {
		h.t.Fatalf("firing %s: %v", runID, err)
	}
	return fired
}

// TestAppliedRunFiresOncePerDestination: an applied run of the source
// inserts one fan-out job in its apply's transaction, and the fan-out, run
// twice, leaves exactly one plan_and_apply run in the destination, made by
// the trigger as a system principal and naming the source run.
func TestAppliedRunFiresOncePerDestination(t *testing.T) {
	t.Parallel()
	h := setup(t)
	network, app := h.workspace("network"), h.workspace("app")
	h.upload(app)
	triggerID := h.mustTrigger(app, network)

	src := h.apply(network)
	if n := h.fanOutJobs(src.ID); n != 1 {
		t.Fatalf("%d fan-out jobs for the applied run, want 1", n)
	}
	first, second := h.fire(src.ID), h.fire(src.ID)
	created := h.triggeredRuns(app)
	if len(created) != 1 {
		t.Fatalf("%d triggered runs after two fan-outs, want 1", len(created))
	}
	r := created[0]
	if first.Created[app] != r.ID || second.Created[app] != r.ID {
		t.Fatalf("fan-outs reported %v then %v, want %s both times", first.Created, second.Created, r.ID)
	}
	if r.Kind != run.KindPlanAndApply || r.Message != "Triggered by run "+src.ID+" of workspace network" ||
		r.TriggeredByRunID == nil || *r.TriggeredByRunID != src.ID || r.Initiator != run.InitiatorTrigger ||
		r.CreatedByKind != access.KindRunTrigger || r.CreatedByID != triggerID || r.AutoApply {
		t.Fatalf("triggered run: kind %s message %q triggered_by %v initiator %s created_by %s %s auto_apply %v",
			r.Kind, r.Message, r.TriggeredByRunID, r.Initiator, r.CreatedByKind, r.CreatedByID, r.AutoApply)
	}
	var view struct {
		TriggeredByRunID *string `json:"triggered_by_run_id"`
		Initiator        string  `json:"initiator"`
	}
	h.owner.Get("/v1/runs/"+r.ID).MustStatus(t, http.StatusOK).Data(t, &view)
	if view.TriggeredByRunID == nil || *view.TriggeredByRunID != src.ID || view.Initiator != "trigger" {
		t.Fatalf("the run's view: triggered_by_run_id %v initiator %q", view.TriggeredByRunID, view.Initiator)
	}

	// A plan-only run of the source never fans out.
	planOnly := runtest.PlanWith(t, h.env, h.runs, h.createRun(network, map[string]any{"kind": "plan_only"}), planJSON(t), true, nil)
	if planOnly.Status != run.StatusPlannedAndFinished || h.fanOutJobs(planOnly.ID) != 0 {
		t.Fatalf("plan-only run: %s with %d fan-out jobs", planOnly.Status, h.fanOutJobs(planOnly.ID))
	}
	if fired := h.fire(planOnly.ID); len(fired.Created)+len(fired.Skipped) != 0 {
		t.Fatalf("a fan-out of a plan-only run did %+v", fired)
	}
}

// TestDestinationWithoutConfigurationIsSkipped: a destination that cannot
// start a run gets an audit event saying why, and the fan-out succeeds.
func TestDestinationWithoutConfigurationIsSkipped(t *testing.T) {
	t.Parallel()
	h := setup(t)
	src, empty := h.workspace("src"), h.workspace("empty")
	triggerID := h.mustTrigger(empty, src)
	applied := h.apply(src)
	fired := h.fire(applied.ID)
	if fired.Skipped[empty] != trigger.SkipConfigurationNotReady || len(fired.Created) != 0 {
		t.Fatalf("fan-out to a workspace without configuration: %+v", fired)
	}
	var evidence []string
	if err := h.env.DB.Select(&evidence, `SELECT evidence::text FROM audit_events WHERE action = 'run_trigger.skipped'
		AND target_id = $1 AND actor_type = 'system'`, triggerID); err != nil || len(evidence) != 1 ||
		!strings.Contains(evidence[0], `"reason": "configuration_not_ready"`) || !strings.Contains(evidence[0], applied.ID) {
		t.Fatalf("skip audit events: %v %v", evidence, err)
	}
}

// TestDeletedTriggerStopsFiring: once the trigger is gone, an applied run
// of its source inserts no fan-out and creates no run.
func TestDeletedTriggerStopsFiring(t *testing.T) {
	t.Parallel()
	h := setup(t)
	src, dst := h.workspace("src"), h.workspace("dst")
	h.upload(dst)
	id := h.mustTrigger(dst, src)
	h.owner.Mutate(http.MethodDelete, "/v1/run-triggers/"+id, nil).MustStatus(t, http.StatusOK)
	applied := h.apply(src)
	if n := h.fanOutJobs(applied.ID); n != 0 {
		t.Fatalf("%d fan-out jobs after the trigger was deleted", n)
	}
	if fired := h.fire(applied.ID); len(fired.Created) != 0 || len(h.triggeredRuns(dst)) != 0 {
		t.Fatalf("a deleted trigger fired: %+v", fired)
	}
	if resp := h.owner.Mutate(http.MethodDelete, "/v1/run-triggers/"+id, nil); resp.Status != http.StatusNotFound {
		t.Fatalf("deleting it again: %d %s", resp.Status, resp.Body)
	}
}

// TestRefusals: the workspace itself, a second trigger of the same pair,
// a 21st source and every cycle are refused with 422; the list shows
// both directions.
func TestRefusals(t *testing.T) {
	t.Parallel()
	h := setup(t)
	a, b, c, d := h.workspace("a"), h.workspace("b"), h.workspace("c"), h.workspace("d")
	refused(t, h.addTrigger(a, a), "RUN_TRIGGER_SELF")
	h.mustTrigger(b, a) // a → b
	refused(t, h.addTrigger(b, a), "RUN_TRIGGER_EXISTS")
	refused(t, h.addTrigger(a, b), "RUN_TRIGGER_CYCLE") // b → a
	h.mustTrigger(c, b)                                 // b → c
	h.mustTrigger(d, c)                                 // c → d
	refused(t, h.addTrigger(a, d), "RUN_TRIGGER_CYCLE") // d → a closes a → b → c → d → a
	refused(t, h.addTrigger(b, d), "RUN_TRIGGER_CYCLE")
	h.mustTrigger(d, a) // a → d as well: no loop

	// The service names the loop it refused.
	err := db.WithTx(h.ctx, h.env.DB, func(tx *sqlx.Tx) error {
		_, err := h.triggers.Create(h.ctx, tx, h.principal(), a, d)
		return err
	})
	var cycle trigger.CycleError
	if !errors.As(err, &cycle) || strings.Join(cycle.Path, " → ") != "d → a → d" {
		t.Fatalf("refusing d → a: %v", err)
	}

	var list struct {
		Inbound  []struct{ Source struct{ Name string } } `json:"inbound"`
		Outbound []struct{ Workspace struct{ Name string } }
	}
	h.owner.Get("/v1/workspaces/"+b+"/run-triggers").MustStatus(t, http.StatusOK).Data(t, &list)
	if len(list.Inbound) != 1 || list.Inbound[0].Source.Name != "a" || len(list.Outbound) != 1 || list.Outbound[0].Workspace.Name != "c" {
		t.Fatalf("b's triggers: %+v", list)
	}

	// 20 sources are allowed, a 21st is not.
	many := h.workspace("many")
	for i := range trigger.MaxSources {
		h.mustTrigger(many, h.workspace(fmt.Sprintf("source-%02d", i)))
	}
	refused(t, h.addTrigger(many, h.workspace("one-too-many")), "RUN_TRIGGER_LIMIT_REACHED")
	var n int
	if err := h.env.DB.Get(&n, `SELECT count(*) FROM run_triggers WHERE workspace_id = $1`, many); err != nil || n != trigger.MaxSources {
		t.Fatalf("%d sources stored (%v), want %d", n, err, trigger.MaxSources)
	}
}

// TestUnreadableSourceIsNotFound: a source the creator cannot read is
// answered as a missing one, and so is another organization's workspace.
func TestUnreadableSourceIsNotFound(t *testing.T) {
	t.Parallel()
	h := setup(t)
	src, dst := h.workspace("src"), h.workspace("dst")
	// A token bounded to the destination administers it but reads nothing else.
	bounded := h.principal()
	bounded.Kind, bounded.WorkspaceID = access.KindServiceAccount, dst
	err := db.WithTx(h.ctx, h.env.DB, func(tx *sqlx.Tx) error {
		_, err := h.triggers.Create(h.ctx, tx, bounded, dst, src)
		return err
	})
	if !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("a source outside the creator's reach: %v, want not found", err)
	}
	other := h.env.WithOrganization("other")
	var p, w struct{ ID string }
	other.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "theirs"}).MustStatus(t, http.StatusCreated).Data(t, &p)
	other.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": p.ID, "name": "theirs",
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).
		MustStatus(t, http.StatusCreated).Data(t, &w)
	if resp := h.addTrigger(dst, w.ID); resp.Status != http.StatusNotFound {
		t.Fatalf("another organization's source: %d %s", resp.Status, resp.Body)
	}
}

// TestConcurrentOppositeTriggers: triggers that would close a loop
// together cannot both be created, however they race: the second waits for
// the first's organization lock and then sees its edge. Directly (a → b
// against b → a) and through a chain (with a → b in place, b → c against
// c → a, where no row lock of the two requests meets the other's).
func TestConcurrentOppositeTriggers(t *testing.T) {
	t.Parallel()
	h := setup(t)
	a, b, c := h.workspace("a"), h.workspace("b"), h.workspace("c")
	race := func(firstDest, firstSource, secondDest, secondSource string) {
		t.Helper()
		tx, err := h.env.DB.BeginTxx(h.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := h.triggers.Create(h.ctx, tx, h.principal(), firstDest, firstSource); err != nil {
			t.Fatal(err)
		}
		second := make(chan error, 1)
		go func() {
			second <- db.WithTx(h.ctx, h.env.DB, func(tx *sqlx.Tx) error {
				_, err := h.triggers.Create(h.ctx, tx, h.principal(), secondDest, secondSource)
				return err
			})
		}()
		select {
		case err := <-second:
			t.Fatalf("%s → %s finished while %s → %s was uncommitted: %v", secondSource, secondDest, firstSource, firstDest, err)
		case <-time.After(300 * time.Millisecond):
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-second; !errors.Is(err, trigger.ErrCycle) {
			t.Fatalf("%s → %s after %s → %s committed: %v, want a cycle refusal", secondSource, secondDest, firstSource, firstDest, err)
		}
	}
	race(b, a, a, b) // a → b, then b → a
	race(c, b, a, c) // b → c, then c → a
	var n int
	if err := h.env.DB.Get(&n, `SELECT count(*) FROM run_triggers WHERE workspace_id IN ($1, $2, $3)`, a, b, c); err != nil || n != 2 {
		t.Fatalf("%d triggers stored (%v), want 2", n, err)
	}
}

// TestTriggeredRunNeverPlansAProposal: a triggered run plans the
// destination's own configuration, not a newer speculative version (a
// person's `tofu plan`) nor a pull request's (a fork's code): those would
// plan, trusted and with the workspace's credentials, code nobody merged.
func TestTriggeredRunNeverPlansAProposal(t *testing.T) {
	t.Parallel()
	h := setup(t)
	network, app := h.workspace("network"), h.workspace("app")
	own := h.upload(app)
	h.mustTrigger(app, network)

	var speculative run.ConfigurationVersion
	err := db.WithTx(h.ctx, h.env.DB, func(tx *sqlx.Tx) (err error) {
		speculative, err = h.runs.CreateConfigurationVersion(h.ctx, tx, h.principal(), app,
			run.ConfigurationInput{Source: run.SourceTFE, Speculative: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	archive := devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "plan" { input = "proposal" }`})
	if _, err := h.runs.UploadConfiguration(h.ctx, speculative.ID, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	pullRequest := h.upload(app)
	now := time.Now().UTC()
	h.env.DB.MustExec(`INSERT INTO workspace_source_settings (id, organization_id, workspace_id, version, installation_id,
		repository_id, repository_owner, repository_name, tracked_branch, working_directory, trigger_paths, created_by_kind,
		created_by_id, created_at) VALUES ('wss_pr', $1, $2, 1, 1, 1, 'o', 'r', 'main', '', '{}', 'user', 'u', $3)`,
		h.owner.OrganizationID, app, now)
	h.env.DB.MustExec(`INSERT INTO source_ingestions (id, organization_id, workspace_id, identity, source_settings_id,
		trigger, installation_id, repository_id, repository_owner, repository_name, ref, head_sha, pull_number, fork,
		configuration_version_id, created_at) VALUES ('ing_pr', $1, $2, 'pr-1', 'wss_pr', 'pull_request', 1, 1, 'o', 'r',
		'refs/pull/1/head', $3, 1, true, $4, $5)`,
		h.owner.OrganizationID, app, strings.Repeat("a", 40), pullRequest, now)

	fired := h.fire(h.apply(network).ID)
	created := h.triggeredRuns(app)
	if len(created) != 1 || fired.Created[app] != created[0].ID {
		t.Fatalf("fan-out %+v created %d runs", fired, len(created))
	}
	if got := created[0].ConfigurationVersionID; got != own {
		t.Fatalf("the triggered run plans %s, want the workspace's own %s (speculative %s, pull request %s)",
			got, own, speculative.ID, pullRequest)
	}
}
