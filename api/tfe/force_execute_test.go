package tfe_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/plandiff/plandifftest"
	"github.com/cairnhq/cairn/api/run/runtest"
)

// TestForceExecute walks go-tfe's Runs.ForceExecute: a pending run behind
// a planned one offers can-force-execute and starts at once, the planned
// run reads discarded; another tenant and an unknown run get the same 404;
// the new-run switch refuses it as it refuses creating a run; a run whose
// way is blocked by a queued plan is refused with 409.
func TestForceExecute(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Executor")
	other := newCloudUser(t, env, "Elsewhere")
	ws := u.uploadedWorkspace(t, "executed")
	read := func(id string) map[string]any {
		t.Helper()
		return decode(t, u.call(t, http.MethodGet, "/api/v2/runs/"+id, nil).MustStatus(t, http.StatusOK)).Data.Attributes
	}
	forceExecute := func(u *cloudUser, id string) *apitest.Response {
		t.Helper()
		return u.call(t, http.MethodPost, "/api/v2/runs/"+id+"/actions/force-execute", nil)
	}

	runs := env.Server.Services().Runs
	first, err := runs.RunOwner(context.Background(), u.newRun(t, ws))
	if err != nil {
		t.Fatal(err)
	}
	var plan bytes.Buffer
	if err := plandifftest.TaggedPlanJSON(&plan, 1); err != nil {
		t.Fatal(err)
	}
	runtest.Plan(t, env, runs, first, plan.Bytes())
	if st := read(first.ID)["status"]; st != "planned" {
		t.Fatalf("first run is %v, want planned", st)
	}
	pending := u.newRun(t, ws)
	attrs := read(pending)
	if attrs["status"] != "pending" || attrs["permissions"].(map[string]any)["can-force-execute"] != true {
		t.Fatalf("pending run: status %v, permissions %v", attrs["status"], attrs["permissions"])
	}

	// Another tenant's attempt reads exactly like an unknown run.
	notFound := forceExecute(u, "run_nosuchrun").MustStatus(t, http.StatusNotFound)
	if r := forceExecute(other, pending); r.Status != http.StatusNotFound || withoutRequestID(r.Body) != withoutRequestID(notFound.Body) {
		t.Fatalf("another tenant's force-execute = %d %s", r.Status, r.Body)
	}

	// With new runs switched off it starts nothing, like creating a run.
	closed := launch.Default()
	closed.PublicGate, closed.NewRunsEnabled = true, false
	applyControl(t, env, "no-new-runs", 1, closed)
	if r := forceExecute(u, pending); r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") != "60" {
		t.Fatalf("force-execute with new runs switched off = %d %s", r.Status, r.Body)
	}
	if st := read(first.ID)["status"]; st != "planned" {
		t.Fatalf("a refused force-execute left the first run %v", st)
	}
	open := launch.Default()
	open.PublicGate = true
	applyControl(t, env, "new-runs", 2, open)

	forceExecute(u, pending).MustStatus(t, http.StatusAccepted)
	if st := read(first.ID)["status"]; st != "discarded" {
		t.Fatalf("first run after the force-execute is %v, want discarded", st)
	}
	if st := read(pending)["status"]; st != "plan_queued" {
		t.Fatalf("forced run is %v, want plan_queued", st)
	}

	// Behind a queued plan nothing can be skipped.
	blocked := u.newRun(t, ws)
	r := forceExecute(u, blocked)
	if d := decode(t, r); r.Status != http.StatusConflict || len(d.Errors) != 1 || d.Errors[0].Detail == "" {
		t.Fatalf("force-execute behind a queued plan = %d %s", r.Status, r.Body)
	}
	if st := read(blocked)["status"]; st != "pending" {
		t.Fatalf("a refused force-execute left its run %v", st)
	}
}
