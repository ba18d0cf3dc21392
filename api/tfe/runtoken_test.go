package tfe_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/run"
)

// runToken starts the queued attempt of phase of a run and returns the
// token a worker would hand its sandboxed CLI.
func runToken(t *testing.T, env *apitest.Env, runID, phase string) string {
	t.Helper()
	ctx := context.Background()
	runs := env.Server.Services().Runs
	r, err := runs.RunOwner(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	attempts, err := runs.Attempts(ctx, env.DB, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range attempts {
		if a.Phase == phase && a.Status == run.AttemptQueued {
			st, err := runs.StartAttempt(ctx, a.ID, "test-worker", "local")
			if err != nil {
				t.Fatal(err)
			}
			token, err := runs.IssueToken(ctx, st, 0)
			if err != nil {
				t.Fatal(err)
			}
			return token
		}
	}
	t.Fatalf("run %s has no queued %s attempt", runID, phase)
	return ""
}

// TestRunTokenReadsOnlyWhatAPlanNeeds: a running plan's token reads its
// workspace, its organization's entitlements and the workspace's current
// state (metadata, outputs and body, the body audited as the run), and
// nothing else: no older state version, no state history, no run (its own
// included), plan or plan JSON, and it writes no state. Another
// workspace's run is not found, as a missing one: the token reaches no
// other workspace but one that shares its state with its own.
func TestRunTokenReadsOnlyWhatAPlanNeeds(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Tokens")
	ws := u.uploadedWorkspace(t, "planned")
	older := u.publishState(t, ws, 1, []byte(fmt.Sprintf(stateTemplate, 1)))
	current := u.publishState(t, ws, 2, []byte(fmt.Sprintf(stateTemplate, 2)))
	var olderOutput string
	if err := env.DB.Get(&olderOutput, `SELECT id FROM state_version_outputs WHERE state_version_id = $1 AND name = 'greeting'`, older); err != nil {
		t.Fatal(err)
	}
	runID := u.newRun(t, ws)
	other := u.newRun(t, u.uploadedWorkspace(t, "other"))
	token := runToken(t, env, runID, run.PhasePlan)
	plan := "/api/v2/plans/plan_" + strings.TrimPrefix(runID, "run_")

	for path, want := range map[string]int{
		"/api/v2/workspaces/" + ws:                                    http.StatusOK,
		"/api/v2/organizations/" + u.org + "/entitlement-set":         http.StatusOK,
		"/api/v2/workspaces/" + ws + "/current-state-version":         http.StatusOK,
		"/api/v2/workspaces/" + ws + "/current-state-version-outputs": http.StatusOK,
		"/api/v2/state-versions/" + current:                           http.StatusOK,
		"/api/v2/state-versions/" + current + "/download":             http.StatusOK,

		"/api/v2/state-versions/" + older:                                                                 http.StatusNotFound,
		"/api/v2/state-versions/" + older + "/download":                                                   http.StatusNotFound,
		"/api/v2/state-versions/" + older + "/outputs":                                                    http.StatusNotFound,
		"/api/v2/state-version-outputs/" + olderOutput:                                                    http.StatusNotFound,
		"/api/v2/state-versions?filter[organization][name]=" + u.org + "&filter[workspace][name]=planned": http.StatusForbidden,
		"/api/v2/runs/" + runID:                                                                           http.StatusForbidden,
		"/api/v2/runs/" + other:                                                                           http.StatusNotFound,
		"/api/v2/workspaces/" + ws + "/runs":                                                              http.StatusForbidden,
		"/api/v2/organizations/" + u.org + "/runs":                                                        http.StatusForbidden,
		plan:                           http.StatusForbidden,
		plan + "/json-output":          http.StatusForbidden,
		plan + "/json-output-redacted": http.StatusForbidden,
	} {
		if got := callWith(t, env, token, http.MethodGet, path, nil); got.Status != want {
			t.Errorf("%s = %d, want %d: %.300s", path, got.Status, want, got.Body)
		}
	}
	if got := callWith(t, env, token, http.MethodPost, "/api/v2/workspaces/"+ws+"/state-versions", map[string]any{"data": map[string]any{
		"type": "state-versions", "attributes": map[string]any{"serial": 3, "md5": md5hex([]byte("x")), "lineage": "lin-1"}}}); got.Status != http.StatusForbidden {
		t.Errorf("a plan's token writing state = %d, want 403", got.Status)
	}
	if n := auditCount(t, env, "state_version.downloaded", current, runID); n != 1 {
		t.Errorf("the run's state download: %d audit events, want 1", n)
	}
	var actor string
	if err := env.DB.Get(&actor, `SELECT actor_type FROM audit_events WHERE action = 'state_version.downloaded' AND actor_id = $1`, runID); err != nil || actor != "run" {
		t.Errorf("audit actor %q, %v", actor, err)
	}
}
