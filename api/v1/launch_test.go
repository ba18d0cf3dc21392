package v1_test

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

func assertClosed(t *testing.T, resp *apitest.Response) {
	t.Helper()
	if resp.Status != http.StatusServiceUnavailable || resp.Code() != "service_unavailable" ||
		resp.Header.Get("Retry-After") != "60" || resp.Header.Get("Cache-Control") != "private, no-store" ||
		resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("not the non-disclosing 503: %d %v %s", resp.Status, resp.Header, resp.Body)
	}
}

func TestLaunchAccessProbes(t *testing.T) {
	t.Parallel()
	// No control at all: everything is closed.
	bare := apitest.New(t, apitest.WithoutLaunchControl())
	nobody := bare.WithOrganization("Nobody")
	assertClosed(t, nobody.Get("/v1/launch-access"))
	assertClosed(t, nobody.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "p"}))

	env := apitest.New(t)
	u := env.WithOrganization("Prober")
	proj := newProject(t, u, "P")
	canaryWS := newWorkspace(t, u, proj, "canary")
	otherWS := newWorkspace(t, u, proj, "other")
	stranger := env.WithOrganization("Stranger")
	strangerWS := newWorkspace(t, stranger, newProject(t, stranger, "S"), "s")
	var access struct {
		Scope     string `json:"scope"`
		Admission string `json:"admission"`
	}
	u.Get("/v1/launch-access").MustStatus(t, http.StatusOK).Data(t, &access)
	if access.Admission != "open" || access.Scope != "organization" {
		t.Fatalf("open gate probe %+v", access)
	}

	c := launch.Default()
	c.CanaryAllowlist = []launch.Pair{{OrganizationID: u.OrganizationID, WorkspaceID: canaryWS.ID}}
	applyControl(t, env, "canary", 1, c)
	u.Get("/v1/launch-access/workspaces/"+canaryWS.ID).MustStatus(t, http.StatusOK).Data(t, &access)
	if access.Admission != "canary" || access.Scope != "workspace" {
		t.Fatalf("canary probe %+v", access)
	}
	// A canary pair never opens its organization: organization-wide
	// admission fails closed.
	assertClosed(t, u.Get("/v1/launch-access"))
	assertClosed(t, u.Get("/v1/launch-access/workspaces/"+otherWS.ID))
	// Another tenant's workspace and an unknown one are unresolved: the same
	// 503, never a 404 that would confirm existence.
	assertClosed(t, u.Get("/v1/launch-access/workspaces/"+strangerWS.ID))
	assertClosed(t, u.Get("/v1/launch-access/workspaces/ws_aaaaaaaaaaaaaaaaaaaaaaaaaa"))
	assertClosed(t, u.Get("/v1/launch-access/runs/run_aaaaaaaaaaaaaaaaaaaaaaaaaa"))
	// The same workspace ID under another organization is not the pair.
	assertClosed(t, stranger.Get("/v1/launch-access/workspaces/"+canaryWS.ID))

	// A suspension stops mutations, not reads (SPEC §1 rule 7): the probes
	// that guard the dashboard's pages still admit the suspended canary, so
	// its runs can be read and canceled there, while a write is refused.
	if _, _, err := env.Server.V1Services().Launch.Suspend(context.Background(), launch.SuspensionChange{
		Actor: "ops", RequestID: "req_x", IdempotencyKey: "susp-1", OrganizationID: u.OrganizationID,
		WorkspaceID: canaryWS.ID, Reason: "abuse report",
	}); err != nil {
		t.Fatal(err)
	}
	u.Get("/v1/launch-access/workspaces/"+canaryWS.ID).MustStatus(t, http.StatusOK).Data(t, &access)
	if access.Admission != "canary" {
		t.Fatalf("suspended canary probe %+v", access)
	}
	assertClosed(t, u.Mutate(http.MethodPost, "/v1/workspaces/"+canaryWS.ID+"/variables",
		map[string]any{"key": "zone", "value": "a", "sensitive": false}))
	// The gate still decides: the organization stays closed, and so does
	// a suspended workspace that is not allowlisted.
	assertClosed(t, u.Get("/v1/launch-access"))
	assertClosed(t, u.Get("/v1/launch-access/workspaces/"+otherWS.ID))
}
