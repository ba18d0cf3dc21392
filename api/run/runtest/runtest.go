// Package runtest drives runs on a real test server (apitest) the way a
// worker would, without one: tests that need a run past its plan (waiting
// for approval, holding its workspace's queue) start from here.
package runtest

import (
	"bytes"
	"context"
	"maps"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/state"
)

// Plan does what a worker does with r's queued plan attempt when tofu
// wrote planJSON with one resource to add: it starts the attempt, seals
// the plan evidence, evaluates the policy stage in-process and commits.
// It returns the run as the commit left it (awaiting_approval for a
// plan_and_apply run whose policies pass).
func Plan(t testing.TB, env *apitest.Env, runs *run.Service, r run.Run, planJSON []byte) run.Run {
	t.Helper()
	return PlanWith(t, env, runs, r, planJSON, true, nil)
}

// PlanWith is Plan for a plan with or without changes, made against the
// predecessor state given (nil: none).
func PlanWith(t testing.TB, env *apitest.Env, runs *run.Service, r run.Run, planJSON []byte, hasChanges bool, predecessor *string) run.Run {
	t.Helper()
	return plan(t, env, runs, r, map[string][]byte{run.ArtifactPlanJSON: planJSON}, hasChanges, predecessor)
}

// PlanArtifacts is Plan with the artifacts given (kind to body) sealed
// besides, or instead of, the ones Plan seals: a saved plan's redacted
// JSON, say, or a plan JSON of its own.
func PlanArtifacts(t testing.TB, env *apitest.Env, runs *run.Service, r run.Run, artifacts map[string][]byte) run.Run {
	t.Helper()
	return plan(t, env, runs, r, artifacts, true, nil)
}

func plan(t testing.TB, env *apitest.Env, runs *run.Service, r run.Run, artifacts map[string][]byte, hasChanges bool, predecessor *string) run.Run {
	t.Helper()
	ctx := context.Background()
	attempts, err := runs.Attempts(ctx, env.DB, r)
	if err != nil {
		t.Fatal(err)
	}
	attemptID := ""
	for _, a := range attempts {
		if a.Phase == run.PhasePlan && a.Status == run.AttemptQueued {
			attemptID = a.ID
		}
	}
	if attemptID == "" {
		t.Fatalf("run %s (%s) has no queued plan attempt: %+v", r.ID, r.Status, attempts)
	}
	st, err := runs.StartAttempt(ctx, attemptID, "runtest", "local")
	if err != nil {
		t.Fatalf("starting the plan of %s: %v", r.ID, err)
	}
	return commit(t, env, runs, st, artifacts, hasChanges, predecessor)
}

// CommitStarted is PlanWith for a plan attempt the test started itself.
func CommitStarted(t testing.TB, env *apitest.Env, runs *run.Service, st run.Started, planJSON []byte, hasChanges bool, predecessor *string) run.Run {
	t.Helper()
	return commit(t, env, runs, st, map[string][]byte{run.ArtifactPlanJSON: planJSON}, hasChanges, predecessor)
}

// commit seals a started plan's evidence, evaluates its policy stage
// in-process and commits it.
func commit(t testing.TB, env *apitest.Env, runs *run.Service, st run.Started, artifacts map[string][]byte, hasChanges bool, predecessor *string) run.Run {
	t.Helper()
	ctx := context.Background()
	r := st.Run
	var arts []run.Artifact
	var planDigest []byte
	bodies := map[string][]byte{run.ArtifactPlanFile: []byte("saved plan of " + r.ID), run.ArtifactPlanDiff: []byte(`{"resources":[]}`)}
	maps.Copy(bodies, artifacts)
	for kind, body := range bodies {
		a, err := runs.StoreArtifact(ctx, st, kind, bytes.NewReader(body), state.MaxStateBytes)
		if err != nil {
			t.Fatal(err)
		}
		if kind == run.ArtifactPlanFile {
			planDigest = a.SHA256
		}
		arts = append(arts, a)
	}
	ev, err := runs.EvaluatePolicy(ctx, st, planDigest, bytes.NewReader(bodies[run.ArtifactPlanJSON]), nil,
		env.Server.Services().Policies.InProcessEvaluator())
	if err != nil {
		t.Fatal(err)
	}
	additions := 0
	if hasChanges {
		additions = 1
	}
	out, err := runs.CommitPlan(ctx, st.Attempt.ID, run.PlanEvidence{Artifacts: arts, HasChanges: hasChanges, Additions: additions,
		PredecessorStateVersionID: predecessor, Policy: ev})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
