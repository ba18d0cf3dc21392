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
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/inprocess"
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

// commit makes a started plan's two commits as the runner does: the plan
// commit, then the policy stage evaluated in-process and the policy commit.
func commit(t testing.TB, env *apitest.Env, runs *run.Service, st run.Started, artifacts map[string][]byte, hasChanges bool, predecessor *string) run.Run {
	t.Helper()
	planned := commitPlan(t, env, runs, st, artifacts, hasChanges, predecessor)
	out, err := planned.CommitPolicy(context.Background(), planned.Evaluate(t))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Planned is a plan attempt between its two commits: its run is planning
// with its plan finished, and its policy check is pending.
type Planned struct {
	// Run is the run as the plan commit left it.
	Run      run.Run
	Started  run.Started
	env      *apitest.Env
	runs     *run.Service
	planJSON []byte
	// rest is the evidence the policy commit records: everything sealed
	// but the plan file.
	rest []run.Artifact
}

// CommitPlan seals a started plan attempt's evidence as the runner does
// and makes its plan commit only.
func CommitPlan(t testing.TB, env *apitest.Env, runs *run.Service, st run.Started, planJSON []byte, hasChanges bool, predecessor *string) Planned {
	t.Helper()
	return commitPlan(t, env, runs, st, map[string][]byte{run.ArtifactPlanJSON: planJSON}, hasChanges, predecessor)
}

func commitPlan(t testing.TB, env *apitest.Env, runs *run.Service, st run.Started, artifacts map[string][]byte, hasChanges bool, predecessor *string) Planned {
	t.Helper()
	ctx := context.Background()
	bodies := map[string][]byte{run.ArtifactPlanFile: []byte("saved plan of " + st.Run.ID), run.ArtifactPlanDiff: []byte(`{"resources":[]}`)}
	maps.Copy(bodies, artifacts)
	var planFile run.Artifact
	var rest []run.Artifact
	for kind, body := range bodies {
		a, err := runs.StoreArtifact(ctx, st, kind, bytes.NewReader(body), state.MaxStateBytes)
		if err != nil {
			t.Fatal(err)
		}
		if kind == run.ArtifactPlanFile {
			planFile = a
		} else {
			rest = append(rest, a)
		}
	}
	additions := 0
	if hasChanges {
		additions = 1
	}
	out, err := runs.CommitPlan(ctx, st.Attempt.ID, run.PlanEvidence{Artifacts: []run.Artifact{planFile}, HasChanges: hasChanges,
		Additions: additions, PredecessorStateVersionID: predecessor})
	if err != nil {
		t.Fatal(err)
	}
	return Planned{Run: out, Started: st, env: env, runs: runs, planJSON: bodies[run.ArtifactPlanJSON], rest: rest}
}

// Evaluate evaluates the planned run's policy stage in-process against its
// plan JSON.
func (p Planned) Evaluate(t testing.TB) policy.Evaluation {
	t.Helper()
	ev, err := p.runs.EvaluatePolicy(context.Background(), p.Started, p.Run.PlanDigest, bytes.NewReader(p.planJSON), nil,
		inprocess.New(p.env.Server.Services().Policies))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// CommitPolicy makes the policy commit of ev with the rest of the plan's
// evidence.
func (p Planned) CommitPolicy(ctx context.Context, ev policy.Evaluation) (run.Run, error) {
	return p.runs.CommitPolicy(ctx, p.Started.Attempt.ID, run.PolicyEvidence{Artifacts: p.rest, Policy: ev})
}
