package tfe_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/dbtest"
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

// TestRunTokenNamesItsOwnWorkspace: the sandboxed CLI asks about its own
// organization and workspace on every command. Their names and admission
// facts are read with the run token, so such a request runs the token's
// lookup and the handler's reads and no resolution or admission query; a
// name in another case still resolves (as lower() compares). Another
// workspace's name goes through its query, and is not found; with the gate
// closed the token's own workspace is refused as before.
func TestRunTokenNamesItsOwnWorkspace(t *testing.T) {
	t.Parallel()
	_, dbURL := dbtest.NewURL(t)
	rec := &dbtest.Recorder{}
	env := apitest.Start(t, dbtest.RecordingPool(t, dbURL, rec), dbURL)
	u := newCloudUser(t, env, "Own")
	ws := u.uploadedWorkspace(t, "Own-Workspace")
	u.publishState(t, ws, 1, []byte(fmt.Sprintf(stateTemplate, 1)))
	u.uploadedWorkspace(t, "neighbour")
	token := runToken(t, env, u.newRun(t, ws), run.PhasePlan)

	resolution := func(statements []dbtest.Statement) (resolved, admitted int) {
		for _, st := range statements {
			text := strings.Join(strings.Fields(st.Text), " ")
			switch {
			case strings.Contains(text, "FROM organizations o WHERE o.slug = $1"),
				strings.Contains(text, "lower(w.cloud_name) = lower($2)"),
				strings.Contains(text, "FROM workspaces w JOIN organizations o ON o.id = w.organization_id WHERE w.id = $1"):
				resolved++
			case strings.HasPrefix(text, "SELECT COALESCE((SELECT max(version) FROM launch_control_versions)"):
				admitted++
			}
		}
		return resolved, admitted
	}
	for _, path := range []string{
		"/api/v2/organizations/" + u.org + "/entitlement-set",
		"/api/v2/organizations/" + u.org + "/workspaces/Own-Workspace",
		"/api/v2/organizations/" + u.org + "/workspaces/own-WORKSPACE",
		"/api/v2/workspaces/" + ws + "/current-state-version",
	} {
		rec.Start()
		got := callWith(t, env, token, http.MethodGet, path, nil)
		statements := rec.Stop()
		if got.Status != http.StatusOK {
			t.Fatalf("%s = %d: %.300s", path, got.Status, got.Body)
		}
		if resolved, admitted := resolution(statements); resolved != 0 || admitted != 0 {
			t.Errorf("%s ran %d resolution and %d admission queries besides the token's lookup", path, resolved, admitted)
		}
	}

	rec.Start()
	got := callWith(t, env, token, http.MethodGet, "/api/v2/organizations/"+u.org+"/workspaces/neighbour", nil)
	if resolved, _ := resolution(rec.Stop()); got.Status != http.StatusNotFound || resolved != 1 {
		t.Errorf("another workspace = %d after %d resolution queries, want 404 after 1", got.Status, resolved)
	}
	if got := callWith(t, env, token, http.MethodGet, "/api/v2/organizations/not-"+u.org+"/workspaces/Own-Workspace", nil); got.Status != http.StatusNotFound {
		t.Errorf("its workspace under another organization's slug = %d, want 404", got.Status)
	}

	applyControl(t, env, "close", 1, launch.Default())
	if got := callWith(t, env, token, http.MethodGet, "/api/v2/organizations/"+u.org+"/workspaces/Own-Workspace", nil); got.Status != http.StatusServiceUnavailable {
		t.Errorf("its own workspace with the gate closed = %d, want 503", got.Status)
	}
}

// TestCurrentStateVersionCarriesItsOutputs: the current version read by
// its workspace is the same document as the version read by its ID, its
// outputs related and, asked for, included, sensitive values absent, for
// a run token and for its person alike; a newer version replaces it.
func TestCurrentStateVersionCarriesItsOutputs(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Outputs")
	ws := u.uploadedWorkspace(t, "outputs")
	u.publishState(t, ws, 1, []byte(fmt.Sprintf(stateTemplate, 1)))
	current := u.publishState(t, ws, 2, []byte(fmt.Sprintf(stateTemplate, 2)))
	token := runToken(t, env, u.newRun(t, ws), run.PhasePlan)
	for who, tok := range map[string]string{"run token": token, "user token": u.token} {
		for _, query := range []string{"", "?include=outputs"} {
			byWorkspace := callWith(t, env, tok, http.MethodGet, "/api/v2/workspaces/"+ws+"/current-state-version"+query, nil).MustStatus(t, http.StatusOK)
			byID := callWith(t, env, u.token, http.MethodGet, "/api/v2/state-versions/"+current+query, nil).MustStatus(t, http.StatusOK)
			if string(byWorkspace.Body) != string(byID.Body) {
				t.Fatalf("%s%s: the current version reads\n%s\nits ID reads\n%s", who, query, byWorkspace.Body, byID.Body)
			}
			body := string(byWorkspace.Body)
			if strings.Contains(body, "s3cr3t-canary") || !strings.Contains(body, `"state-version-outputs"`) ||
				(query != "") != strings.Contains(body, `"hello"`) {
				t.Fatalf("%s%s: outputs not as asked, or a sensitive value released:\n%s", who, query, body)
			}
		}
	}
}
