package tfe_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/plandiff/plandifftest"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/policytest"
	"github.com/cairnhq/cairn/api/run/runtest"
)

// TestAttachmentsEvaluateInScopeThenIDOrder (SPEC §4 Policy evaluation
// flow, GET /api/v2/policy-checks/{id}): a workspace's effective
// attachments are its organization's, then its project's, then its own,
// each scope by attachment ID, whatever order they, their sets and their
// versions were made in or their sets' and versions' IDs sort in; a run
// snapshots them in that order and its results follow it one for one.
// The remote-backend check of a run with project and workspace results
// besides organization ones reports scope workspace.
func TestAttachmentsEvaluateInScopeThenIDOrder(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Order")
	f := &policytest.Fixture{Env: env, User: u.User, WorkspaceID: u.uploadedWorkspace(t, "order")}
	var w struct {
		ProjectID string `json:"project_id"`
	}
	u.Get("/v1/workspaces/"+f.WorkspaceID).MustStatus(t, http.StatusOK).Data(t, &w)

	type attached struct{ ID, Scope string }
	attach := func(v policytest.Version, scope string) attached {
		t.Helper()
		var a struct{ ID string }
		body := map[string]string{"policy_version_id": v.ID, "enforcement_mode": "advisory", "scope": scope}
		switch scope {
		case policy.ScopeProject:
			body["scope_id"] = w.ProjectID
		case policy.ScopeWorkspace:
			body["scope_id"] = f.WorkspaceID
		}
		u.Mutate(http.MethodPost, "/v1/policy-sets/"+v.SetID+"/attachments", body).MustStatus(t, http.StatusCreated).Data(t, &a)
		return attached{a.ID, scope}
	}
	published := 0
	publish := func() policytest.Version {
		published++
		return f.Publish(t, fmt.Sprintf("set-%d", published), map[string]string{"policy.rego": alwaysPass})
	}
	// attachAfter attaches a second set at earlier's scope so that only
	// the attachment ID can order the two: made later, with a set and a
	// version whose IDs sort after earlier's, its attachment ID sorts
	// first (it is attached again until it does), so it must be evaluated
	// first within the scope.
	attachAfter := func(earlier attached, ev policytest.Version) attached {
		t.Helper()
		v := publish()
		for v.SetID < ev.SetID || v.ID < ev.ID {
			v = publish()
		}
		for {
			a := attach(v, earlier.Scope)
			if a.ID < earlier.ID {
				return a
			}
			u.Mutate(http.MethodDelete, "/v1/policy-sets/"+v.SetID+"/attachments/"+a.ID, nil).MustStatus(t, http.StatusOK)
		}
	}
	// Made in the reverse of evaluation order: workspace, project, then
	// organization.
	v := publish()
	ws1 := attach(v, policy.ScopeWorkspace)
	ws2 := attachAfter(ws1, v)
	project := attach(publish(), policy.ScopeProject)
	v = publish()
	org1 := attach(v, policy.ScopeOrganization)
	org2 := attachAfter(org1, v)
	want := []attached{org2, org1, project, ws2, ws1}

	var listed []struct{ ID, Scope string }
	u.Get("/v1/workspaces/"+f.WorkspaceID+"/policy-attachments").MustStatus(t, http.StatusOK).Data(t, &listed)
	if len(listed) != len(want) {
		t.Fatalf("%d attachments in force, want %d", len(listed), len(want))
	}
	for i := range want {
		if listed[i].ID != want[i].ID || listed[i].Scope != want[i].Scope {
			t.Fatalf("attachment %d in force is %+v, want %+v (all: %+v)", i, listed[i], want[i], listed)
		}
	}

	st := f.StartPlan(t)
	snapshot, err := policy.SnapshotOf(context.Background(), env.DB, st.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := []attached{}
	for i, e := range snapshot {
		if e.Sequence != i+1 {
			t.Fatalf("snapshot entry %d has sequence %d", i, e.Sequence)
		}
		got = append(got, attached{e.AttachmentID, e.Scope})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("snapshot order %+v, want %+v", got, want)
	}

	var plan bytes.Buffer
	if err := plandifftest.TaggedPlanJSON(&plan, 1); err != nil {
		t.Fatal(err)
	}
	planned := runtest.CommitPlan(t, env, env.Server.Services().Runs, st, plan.Bytes(), true, nil)
	if _, err := planned.CommitPolicy(context.Background(), planned.Evaluate(t)); err != nil {
		t.Fatal(err)
	}
	var evidence struct {
		Results []struct {
			Sequence     int    `json:"sequence"`
			AttachmentID string `json:"attachment_id"`
			Scope        string `json:"scope"`
		} `json:"results"`
	}
	u.Get("/v1/runs/"+st.Run.ID+"/policy").MustStatus(t, http.StatusOK).Data(t, &evidence)
	got = got[:0]
	for i, r := range evidence.Results {
		if r.Sequence != i+1 {
			t.Fatalf("result %d has sequence %d", i, r.Sequence)
		}
		got = append(got, attached{r.AttachmentID, r.Scope})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("result order %+v, want %+v", got, want)
	}

	attrs := decode(t, u.call(t, http.MethodGet, "/api/v2/policy-checks/"+policy.CheckID(st.Run.ID), nil).MustStatus(t, http.StatusOK)).Data.Attributes
	if attrs["status"] != "passed" || attrs["scope"] != "workspace" {
		t.Fatalf("check of organization, project and workspace results: %v", attrs)
	}
}
