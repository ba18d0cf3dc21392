package run_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/run"
)

// TestRunTokenIsAdmittedAsItsOwnWorkspace: on /api/v2 a phase's run token
// is judged by launch control as its own workspace, on that workspace's
// routes and on the organization-wide ones the CLI calls; it reaches no
// other workspace, whatever control admits that one.
func TestRunTokenIsAdmittedAsItsOwnWorkspace(t *testing.T) {
	t.Parallel()
	h := setup(t)
	own, other := h.workspace("own"), h.workspace("other")
	st := h.start(h.createRun(own), run.PhasePlan)
	token, err := h.runs.IssueToken(h.ctx, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	var slug string
	if err := h.env.DB.Get(&slug, `SELECT slug FROM organizations WHERE id = $1`, h.owner.OrganizationID); err != nil {
		t.Fatal(err)
	}
	status := func(path string) int {
		t.Helper()
		return h.env.Anonymous().Do(apitest.Request{Method: http.MethodGet, Path: path,
			Header: map[string]string{"Authorization": "Bearer " + token}}).Status
	}
	routes := map[string]string{
		"entitlements":   "/api/v2/organizations/" + slug + "/entitlement-set",
		"own by name":    "/api/v2/organizations/" + slug + "/workspaces/own",
		"own by ID":      "/api/v2/workspaces/" + own,
		"other by name":  "/api/v2/organizations/" + slug + "/workspaces/other",
		"other by ID":    "/api/v2/workspaces/" + other,
		"other's states": "/api/v2/workspaces/" + other + "/current-state-version",
	}
	expect := func(when string, want map[string]int) {
		t.Helper()
		for name, code := range want {
			if got := status(routes[name]); got != code {
				t.Errorf("%s: %s = %d, want %d", when, name, got, code)
			}
		}
	}
	expect("gate open", map[string]int{"entitlements": 200, "own by name": 200, "own by ID": 200,
		"other by name": 404, "other by ID": 404, "other's states": 404})

	// The gate closes with only the other workspace allowlisted: the run's
	// own routes are refused, and the other workspace is still not its.
	apply := func(key string, expected int, c launch.Control) {
		t.Helper()
		if _, _, err := h.env.Server.V1Services().Launch.Apply(context.Background(), launch.Change{Actor: "test",
			RequestID: "req_test", IdempotencyKey: key, ExpectedVersion: expected, Reason: "test", Document: c}); err != nil {
			t.Fatal(err)
		}
	}
	closed := launch.Default()
	closed.CanaryAllowlist = []launch.Pair{{OrganizationID: h.owner.OrganizationID, WorkspaceID: other}}
	apply("close", 1, closed)
	expect("gate closed, other allowlisted", map[string]int{"entitlements": 503, "own by name": 503, "own by ID": 503,
		"other by name": 404, "other by ID": 404, "other's states": 404})

	// Allowlisting the run's own workspace admits it again, and only it.
	closed.CanaryAllowlist = []launch.Pair{{OrganizationID: h.owner.OrganizationID, WorkspaceID: own}}
	apply("canary", 2, closed)
	expect("gate closed, own allowlisted", map[string]int{"entitlements": 200, "own by name": 200, "own by ID": 200,
		"other by name": 503, "other by ID": 503, "other's states": 503})
}
