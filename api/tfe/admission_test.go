package tfe_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/launch"
)

func applyControl(t *testing.T, env *apitest.Env, key string, expected int, c launch.Control) {
	t.Helper()
	if _, _, err := env.Server.V1Services().Launch.Apply(context.Background(), launch.Change{
		Actor: "test", RequestID: "req_test", IdempotencyKey: key, ExpectedVersion: expected, Reason: "test", Document: c,
	}); err != nil {
		t.Fatal(err)
	}
}

// TestOperatorProvisionsCanaryWhileGateIsClosed: with the public gate
// closed, the operator creates a tenant's workspace and allowlists the
// exact pair; the tenant then reaches that workspace and nothing
// organization-wide. A suspension stops the workspace's mutations but not
// its deletion, and the deleted workspace's suspension history stays.
func TestOperatorProvisionsCanaryWhileGateIsClosed(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	applyControl(t, env, "close", 1, launch.Default())
	u := newCloudUser(t, env, "Canary")
	orgPath := "/api/v2/organizations/" + u.org
	newWorkspace := map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"name": "canary"}}}
	if r := u.call(t, http.MethodPost, orgPath+"/workspaces", newWorkspace); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("tenant workspace creation under a closed gate = %d %s", r.Status, r.Body)
	}
	ws := decode(t, callWith(t, env, apitest.OperatorToken, http.MethodPost, orgPath+"/workspaces", newWorkspace).
		MustStatus(t, http.StatusCreated)).Data
	if r := u.call(t, http.MethodGet, "/api/v2/workspaces/"+ws.ID, nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("workspace before it is allowlisted = %d", r.Status)
	}
	c := launch.Default()
	c.CanaryAllowlist = []launch.Pair{{OrganizationID: u.OrganizationID, WorkspaceID: ws.ID}}
	applyControl(t, env, "canary", 2, c)
	u.call(t, http.MethodGet, "/api/v2/workspaces/"+ws.ID, nil).MustStatus(t, http.StatusOK)
	u.call(t, http.MethodGet, orgPath+"/workspaces/canary", nil).MustStatus(t, http.StatusOK)
	for _, path := range []string{orgPath + "/entitlement-set", orgPath, orgPath + "/workspaces/unknown"} {
		if r := u.call(t, http.MethodGet, path, nil); r.Status != http.StatusServiceUnavailable {
			t.Fatalf("%s for a canary tenant = %d %s", path, r.Status, r.Body)
		}
	}

	ctx := context.Background()
	admission := env.Server.V1Services().Launch
	if _, _, err := admission.Suspend(ctx, launch.SuspensionChange{Actor: "ops", RequestID: "req_s", IdempotencyKey: "s-1",
		OrganizationID: u.OrganizationID, WorkspaceID: ws.ID, Reason: "abuse"}); err != nil {
		t.Fatal(err)
	}
	if r := u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/actions/lock", nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("lock of a suspended workspace = %d", r.Status)
	}
	u.call(t, http.MethodGet, "/api/v2/workspaces/"+ws.ID, nil).MustStatus(t, http.StatusOK)
	u.call(t, http.MethodDelete, "/api/v2/workspaces/"+ws.ID, nil).MustStatus(t, http.StatusNoContent)
	state, err := admission.Suspensions(ctx, u.OrganizationID, ws.ID)
	if err != nil || state.Version != 1 || !state.Suspended || len(state.Changes) != 1 || state.Changes[0].Reason != "abuse" {
		t.Fatalf("suspension history after deleting the workspace: %+v %v", state, err)
	}
}
