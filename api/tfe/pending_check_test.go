package tfe_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/plandiff/plandifftest"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/policytest"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/run/runtest"
)

// TestPolicyCheckIsPendingFromThePlanCommit reads a run's policy check
// through /api/v2 between its plan and policy commits (SPEC §3, §4): the
// check exists and is pending, with the scope of the attachments the run
// snapshotted, and the plan reads running until the policy stage ends;
// then the check has its outcome. A run that ends before its evaluation
// is recorded, canceled or failed, reads errored, its output saying the
// evaluation did not complete.
func TestPolicyCheckIsPendingFromThePlanCommit(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Pending")
	f := &policytest.Fixture{Env: env, User: u.User, WorkspaceID: u.uploadedWorkspace(t, "pending")}
	v := f.Publish(t, "always-pass", map[string]string{"policy.rego": alwaysPass})
	// Attached for the whole organization: the check's scope is
	// organization, which only the snapshot can tell before results exist.
	u.Mutate(http.MethodPost, "/v1/policy-sets/"+v.SetID+"/attachments", map[string]string{"policy_version_id": v.ID,
		"enforcement_mode": "advisory", "scope": "organization"}).MustStatus(t, http.StatusCreated)
	runs := env.Server.Services().Runs
	var plan bytes.Buffer
	if err := plandifftest.TaggedPlanJSON(&plan, 1); err != nil {
		t.Fatal(err)
	}
	check := func(runID string) map[string]any {
		t.Helper()
		return decode(t, u.call(t, http.MethodGet, "/api/v2/policy-checks/"+policy.CheckID(runID), nil).MustStatus(t, http.StatusOK)).Data.Attributes
	}
	output := func(runID string) string {
		t.Helper()
		return string(u.call(t, http.MethodGet, "/api/v2/policy-checks/"+policy.CheckID(runID)+"/output", nil).MustStatus(t, http.StatusOK).Body)
	}
	planStatus := func(runID string) any {
		t.Helper()
		return decode(t, u.call(t, http.MethodGet, "/api/v2/plans/plan_"+strings.TrimPrefix(runID, "run_"), nil).MustStatus(t, http.StatusOK)).Data.Attributes["status"]
	}
	stamps := func(attrs map[string]any) map[string]any { return attrs["status-timestamps"].(map[string]any) }

	st := f.StartPlan(t)
	u.call(t, http.MethodGet, "/api/v2/policy-checks/"+policy.CheckID(st.Run.ID), nil).MustStatus(t, http.StatusNotFound)
	planned := runtest.CommitPlan(t, env, runs, st, plan.Bytes(), true, nil)
	attrs := check(st.Run.ID)
	if attrs["status"] != "pending" || attrs["scope"] != "organization" || stamps(attrs)["queued-at"] == nil || len(stamps(attrs)) != 1 {
		t.Fatalf("check after the plan commit: %v", attrs)
	}
	if out := output(st.Run.ID); !strings.Contains(out, ": pending (1 attachment(s)") || !strings.Contains(out, "has not completed") {
		t.Fatalf("output of a pending check: %q", out)
	}
	if s := planStatus(st.Run.ID); s != run.PhaseRunning {
		t.Fatalf("plan during the policy stage reads %v", s)
	}
	if _, err := planned.CommitPolicy(context.Background(), planned.Evaluate(t)); err != nil {
		t.Fatal(err)
	}
	attrs = check(st.Run.ID)
	if attrs["status"] != "passed" || attrs["scope"] != "organization" || stamps(attrs)["passed-at"] == nil {
		t.Fatalf("check after the policy commit: %v", attrs)
	}
	if s := planStatus(st.Run.ID); s != run.PhaseFinished {
		t.Fatalf("plan after the policy stage reads %v", s)
	}

	ended := f.StartPlan(t)
	runtest.CommitPlan(t, env, runs, ended, plan.Bytes(), true, nil)
	u.call(t, http.MethodPost, "/api/v2/runs/"+ended.Run.ID+"/actions/cancel", nil).MustStatus(t, http.StatusAccepted)
	attrs = check(ended.Run.ID)
	if attrs["status"] != "errored" || stamps(attrs)["errored-at"] == nil || attrs["result"].(map[string]any)["result"] != false {
		t.Fatalf("check of a run canceled in its policy stage: %v", attrs)
	}
	if out := output(ended.Run.ID); !strings.Contains(out, ": errored (") || !strings.Contains(out, run.PolicyIncomplete) {
		t.Fatalf("output of an incomplete check: %q", out)
	}
	if s := planStatus(ended.Run.ID); s != run.PhaseFinished {
		t.Fatalf("plan of the canceled run reads %v", s)
	}

	// A run whose policy stage failed (its worker gave up) ends errored
	// the same way.
	failed := f.StartPlan(t)
	runtest.CommitPlan(t, env, runs, failed, plan.Bytes(), true, nil)
	if _, err := runs.FailAttempt(context.Background(), failed.Attempt.ID, "runner_error", -1, nil); err != nil {
		t.Fatal(err)
	}
	attrs = check(failed.Run.ID)
	if attrs["status"] != "errored" || stamps(attrs)["errored-at"] == nil || attrs["result"].(map[string]any)["result"] != false ||
		attrs["actions"].(map[string]any)["is-overridable"] != false {
		t.Fatalf("check of a run whose policy stage failed: %v", attrs)
	}
	if out := output(failed.Run.ID); !strings.Contains(out, ": errored (") || !strings.Contains(out, run.PolicyIncomplete) {
		t.Fatalf("output of a failed run's check: %q", out)
	}
}
