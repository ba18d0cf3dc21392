package runner

import (
	"context"
	"io"

	"github.com/cairnhq/cairn/api/planjson"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/state"
)

// providerSchemas is where a saved plan's provider schemas are written in
// the private directory.
const providerSchemas = "providers-schema.json"

// sealShowablePlan starts sealing what `tofu show` of a saved cloud plan
// renders (GET /api/v2/plans/{id}/json-output-redacted), and returns a
// function that waits for it. Only a saved plan is ever shown that way, so
// no other plan pays for it: for those it does nothing. The renderer needs
// the schemas of the providers the plan changes, which `tofu providers
// schema -json` writes (reading the state as the plan did); the redacted
// plan is built from them and the plan JSON, with the run's secrets
// (sensitive inputs, credentials, the run token) removed wherever a
// provider copied them, while the plan's other evidence is sealed.
func (r *Runner) sealShowablePlan(ctx context.Context, env *attemptEnv, ev *planSeal) (func() (run.Artifact, error), error) {
	if !env.st.Run.SavePlan {
		return func() (run.Artifact, error) { return run.Artifact{}, nil }, nil
	}
	out, err := env.sb.Create(privatePath(providerSchemas))
	if err != nil {
		return nil, err
	}
	code, err := r.tofu(ctx, env, "providers_schema", out, "providers", "schema", "-json", "-no-color")
	out.Close()
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, exitError{step: "providers_schema", code: code}
	}
	return ev.seal(func() (run.Artifact, error) { return r.storeRedactedPlan(ctx, env) }), nil
}

// storeRedactedPlan seals the redacted plan as it is written, never
// holding it whole.
func (r *Runner) storeRedactedPlan(ctx context.Context, env *attemptEnv) (run.Artifact, error) {
	plan, err := env.sb.Open(privatePath(planJSON))
	if err != nil {
		return run.Artifact{}, err
	}
	defer plan.Close()
	schemas, err := env.sb.Open(privatePath(providerSchemas))
	if err != nil {
		return run.Artifact{}, err
	}
	defer schemas.Close()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(planjson.WriteRedacted(ctx, pw, plan, schemas, env.secrets)) }()
	a, err := r.Runs.StoreArtifact(ctx, env.st, run.ArtifactPlanJSONRedacted, pr, state.MaxStateBytes)
	// A store that stopped early leaves the writer blocked: this ends it.
	pr.CloseWithError(io.ErrClosedPipe)
	return a, err
}
