package runner

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/cairnhq/cairn/api/plandiff"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/state"
)

// plan runs init, plan -out and show -json, seals the evidence and commits
// it in two steps: the plan commit (plan file, change counts, predecessor
// state; it reserves the policy check) and the policy commit (the
// evaluation, plan JSON, diff and a saved plan's redacted JSON; it ends
// the attempt). Sealing overlaps the commands and the steps that only
// read what it seals: the plan file while show renders it, the diff while
// show writes the JSON, the plan JSON and the redacted diff while policy
// evaluates the same JSON; the evaluation, which reads only that JSON and
// the run's snapshot, overlaps the plan commit.
func (r *Runner) plan(ctx context.Context, env *attemptEnv) error {
	predecessor := env.predecessor
	if err := r.init(ctx, env); err != nil {
		return err
	}
	args := append([]string{"plan", "-input=false", "-no-color", "-lock=false", "-detailed-exitcode",
		"-var-file=" + env.private(varFile), "-out=" + env.private(planFile)}, planOptionArgs(env.st.Run.RunOptions)...)
	code, err := r.tofu(ctx, env, "plan", nil, args...)
	if err != nil {
		return err
	}
	if code != 0 && code != 2 {
		return exitError{step: "plan", code: code}
	}
	hasChanges := code == 2
	ev := &planSeal{}
	defer func() { r.Runs.DiscardArtifacts(context.WithoutCancel(ctx), ev.uncommitted()) }()
	planSealed := ev.seal(func() (run.Artifact, error) {
		return r.storeSandboxFile(ctx, env, run.ArtifactPlanFile, planFile, state.MaxStateBytes)
	})
	// The plan has read the state: whether it moved meanwhile is read
	// while show renders the plan. An untrusted plan read none.
	type stateRead struct {
		id  *string
		err error
	}
	current := make(chan stateRead, 1)
	if env.st.Run.Untrusted() {
		current <- stateRead{}
	} else {
		go func() {
			id, err := r.Runs.CurrentStateVersionID(ctx, env.st.Run)
			current <- stateRead{id, err}
		}()
	}
	shown, showErr := r.showPlanJSON(ctx, env)
	after := <-current
	if err := cmp.Or(showErr, after.err); err != nil {
		return err
	}
	if !sameID(predecessor, after.id) {
		return errStateMoved
	}
	showableSealed, err := r.sealShowablePlan(ctx, env, ev)
	if err != nil {
		return err
	}
	// Checked once the sandbox's last command has ended (a saved plan's
	// runs one more, with the configuration's providers): every later
	// reader of the file reads what the diff was built from.
	if err := r.checkShown(env, shown); err != nil {
		return err
	}

	start := time.Now()
	jsonSealed := ev.seal(func() (run.Artifact, error) {
		return r.storeSandboxFile(ctx, env, run.ArtifactPlanJSON, planJSON, run.MaxPlanJSONBytes)
	})
	// The diff is built once: its counts go with the plan commit, its
	// sealed body with the policy commit.
	var diff plandiff.Artifact
	diffBuilt := make(chan error, 1)
	diffSealed := ev.seal(func() (run.Artifact, error) {
		var err error
		if diff, err = shown.result(); err == nil {
			diff.RedactSecrets(env.secrets)
		}
		diffBuilt <- err
		if err != nil {
			return run.Artifact{}, err
		}
		body, err := json.Marshal(diff)
		if err != nil {
			return run.Artifact{}, err
		}
		return r.Runs.StoreArtifact(ctx, env.st, run.ArtifactPlanDiff, bytes.NewReader(body), state.MaxStateBytes)
	})
	planArtifact, err := planSealed()
	if err != nil {
		return err
	}
	policyStart := time.Now()
	evalCtx, stopEvaluation := context.WithCancel(ctx)
	evaluated := async(func() (policy.Evaluation, error) {
		defer env.timed("policy", policyStart)
		// The plan log is complete once its commands ended: it is stored
		// before the policy log starts, so the run's log reads plan, then
		// policy, in sequence order.
		r.endPlanLog(evalCtx, env)
		return r.evaluatePolicy(evalCtx, env, planArtifact.SHA256)
	})
	// Nothing of this attempt may outlive it: an evaluation whose plan
	// never committed is stopped and waited for.
	defer func() {
		stopEvaluation()
		_, _ = evaluated()
	}()
	if err := <-diffBuilt; err != nil {
		return err
	}
	commitStart := time.Now()
	_, err = r.Runs.CommitPlan(ctx, env.st.Attempt.ID, run.PlanEvidence{
		Artifacts: []run.Artifact{planArtifact}, HasChanges: hasChanges, Additions: diff.Counts.Add, Changes: diff.Counts.Change,
		Destructions: diff.Counts.Destroy, PredecessorStateVersionID: predecessor,
	})
	if err != nil {
		// A run canceled while the plan finished: the attempt is closed as
		// canceled by the caller.
		return err
	}
	ev.committed(planArtifact)
	env.timed("plan_commit", commitStart)
	evaluation, err := evaluated()
	if err != nil {
		return err
	}
	jsonArtifact, err := jsonSealed()
	if err != nil {
		return err
	}
	if !bytes.Equal(jsonArtifact.SHA256, shown.sum) {
		return errPlanJSONChanged
	}
	diffArtifact, err := diffSealed()
	if err != nil {
		return err
	}
	rest := []run.Artifact{jsonArtifact, diffArtifact}
	showable, err := showableSealed()
	if err != nil {
		return err
	}
	if showable.ID != "" {
		rest = append(rest, showable)
	}
	env.timed("evidence", start)
	_, err = r.Runs.CommitPolicy(ctx, env.st.Attempt.ID, run.PolicyEvidence{Artifacts: rest, Policy: evaluation, Timings: env.snapshot()})
	if err != nil {
		return err
	}
	ev.committed(rest...)
	return nil
}

// async runs f in its own goroutine and returns a function that waits for
// its result, as often as it is called.
func async[T any](f func() (T, error)) func() (T, error) {
	var v T
	var err error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		v, err = f()
	}()
	return func() (T, error) {
		<-finished
		return v, err
	}
}

// showPlanJSON writes the saved plan's JSON rendering into the private
// directory, building the diff from it as tofu writes it, while the
// sandbox winds down, instead of from the file once it has. The plan ran
// the configuration's code, which may have left links in the work
// directory: files there are opened through the sandbox.
func (r *Runner) showPlanJSON(ctx context.Context, env *attemptEnv) (*shownPlan, error) {
	jsonOut, err := env.sb.Create(privatePath(planJSON))
	if err != nil {
		return nil, err
	}
	shown := diffAsWritten(ctx, jsonOut, run.MaxPlanJSONBytes)
	code, err := r.tofu(ctx, env, "show", shown, "show", "-json", "-no-color", env.private(planFile))
	shown.close()
	jsonOut.Close()
	if err = cmp.Or(shown.refused, err); err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, exitError{step: "show", code: code}
	}
	return shown, nil
}

// planSeal collects the artifacts a plan attempt seals concurrently, so
// whatever was stored is deleted again unless a commit took it.
type planSeal struct {
	running sync.WaitGroup
	mu      sync.Mutex
	stored  []run.Artifact
}

// seal starts store and returns a function that waits for its artifact.
func (p *planSeal) seal(store func() (run.Artifact, error)) func() (run.Artifact, error) {
	p.running.Add(1)
	return async(func() (run.Artifact, error) {
		defer p.running.Done()
		a, err := store()
		if err == nil {
			p.mu.Lock()
			p.stored = append(p.stored, a)
			p.mu.Unlock()
		}
		return a, err
	})
}

// committed records that a commit took arts: they are not deleted.
func (p *planSeal) committed(arts ...run.Artifact) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stored = slices.DeleteFunc(p.stored, func(a run.Artifact) bool {
		return slices.ContainsFunc(arts, func(c run.Artifact) bool { return c.ID == a.ID })
	})
}

// uncommitted are the artifacts to delete: those no commit took. It waits
// for sealing still under way when the attempt gave up, so nothing stored
// is missed.
func (p *planSeal) uncommitted() []run.Artifact {
	p.running.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.stored)
}

// endPlanLog writes the plan log's last lines and stores everything it
// holds.
func (r *Runner) endPlanLog(ctx context.Context, env *attemptEnv) {
	if env.st.Run.SavePlan {
		// OpenTofu's `tofu apply <file>` loads a saved cloud plan only if
		// its run ID starts with "run-"; Cairn's start with "run_".
		env.logs.Line("")
		env.logs.Line("This saved plan waits for its apply: approve run %s in the dashboard, or apply it through the API", env.st.Run.ID)
		env.logs.Line("(POST /api/v2/runs/%s/actions/apply). `tofu apply` of the saved plan file cannot load a Cairn run.", env.st.Run.ID)
	}
	_ = env.logs.Flush(context.WithoutCancel(ctx), true)
}

// evaluatePolicy runs the policy stage on the plan JSON the sandbox wrote:
// the run's snapshotted attachments against the sanitized input, with the
// run's secrets as canaries. The evaluation writes the run's policy log;
// findings themselves are in the policy check.
func (r *Runner) evaluatePolicy(ctx context.Context, env *attemptEnv, planDigest []byte) (policy.Evaluation, error) {
	f, err := env.sb.Open(privatePath(planJSON))
	if err != nil {
		return policy.Evaluation{}, err
	}
	defer f.Close()
	ev, err := r.Runs.EvaluatePolicy(ctx, env.st, planDigest, f, env.secrets, r.Evaluator)
	if err != nil {
		return policy.Evaluation{}, fmt.Errorf("evaluating policy: %w", err)
	}
	return ev, nil
}

// storeSandboxFile seals a file of the private directory as an artifact.
func (r *Runner) storeSandboxFile(ctx context.Context, env *attemptEnv, kind, name string, limit int64) (run.Artifact, error) {
	f, err := env.sb.Open(privatePath(name))
	if err != nil {
		return run.Artifact{}, err
	}
	defer f.Close()
	return r.Runs.StoreArtifact(ctx, env.st, kind, f, limit)
}

// shownPlan takes tofu show's output: it writes it to the plan JSON file,
// up to its limit, and builds the plan diff from it as it comes, keeping
// its length and SHA-256.
type shownPlan struct {
	file  io.Writer
	limit int64
	pipe  *io.PipeWriter
	// digest, written and refused are the output's so far; sum is its
	// SHA-256 once closed.
	digest  hash.Hash
	written int64
	refused error
	sum     []byte
	// result waits for the diff.
	result func() (plandiff.Artifact, error)
}

// diffAsWritten starts building a diff from what is written to the
// returned shownPlan, which passes it on to file, up to limit bytes;
// close ends the input.
func diffAsWritten(ctx context.Context, file io.Writer, limit int64) *shownPlan {
	r, w := io.Pipe()
	s := &shownPlan{file: file, limit: limit, pipe: w, digest: sha256.New()}
	s.result = async(func() (plandiff.Artifact, error) {
		diff, err := plandiff.Build(ctx, r)
		// The rest is read and dropped, so a diff that stopped early (on
		// an error, or its context's end) never stalls show.
		_, _ = io.Copy(io.Discard, r)
		if err != nil {
			return plandiff.Artifact{}, fmt.Errorf("building plan diff: %w", err)
		}
		return diff, nil
	})
	return s
}

// Write fails only when the file does, or past the limit: the sandbox's
// own file-size limit does not apply to what the worker writes for it.
// Whatever the diff makes of the output, it reaches the file.
func (s *shownPlan) Write(p []byte) (int, error) {
	if s.written+int64(len(p)) > s.limit {
		s.refused = errPlanJSONTooLarge
		return 0, s.refused
	}
	if _, err := s.file.Write(p); err != nil {
		return 0, err
	}
	s.digest.Write(p)
	s.written += int64(len(p))
	_, _ = s.pipe.Write(p)
	return len(p), nil
}

func (s *shownPlan) close() {
	_ = s.pipe.Close()
	s.sum = s.digest.Sum(nil)
}

// checkShown holds the diff to the file the rest of the evidence is read
// from (the sealed JSON, the policy's input, a saved plan's redacted
// JSON): the file must be exactly what show wrote. Once a command has
// ended, nothing it started runs (its PID namespace went with it), so a
// difference means something in the sandbox rewrote the file meanwhile.
func (r *Runner) checkShown(env *attemptEnv, s *shownPlan) error {
	f, err := env.sb.Open(privatePath(planJSON))
	if err != nil {
		return err
	}
	defer f.Close()
	return s.matches(f)
}

// matches reports errPlanJSONChanged unless f holds what was written to s.
func (s *shownPlan) matches(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != s.written {
		return errPlanJSONChanged
	}
	digest := sha256.New()
	if _, err := io.Copy(digest, f); err != nil {
		return fmt.Errorf("reading the plan JSON: %w", err)
	}
	if !bytes.Equal(digest.Sum(nil), s.sum) {
		return errPlanJSONChanged
	}
	return nil
}

var (
	// errPlanJSONChanged fails an attempt whose plan JSON file differs
	// from what show wrote.
	errPlanJSONChanged = errors.New("the plan JSON file changed after show wrote it")
	// errPlanJSONTooLarge fails an attempt whose plan JSON exceeds
	// run.MaxPlanJSONBytes: show is stopped there.
	errPlanJSONTooLarge = fmt.Errorf("the plan JSON is larger than %d bytes", run.MaxPlanJSONBytes)
)

// planOptionArgs are the tofu plan flags of a run's options. Each address
// is its own argument (no shell is involved) and was checked to be a
// resource address when the run was created.
func planOptionArgs(o run.RunOptions) []string {
	var args []string
	if !o.Refresh {
		args = append(args, "-refresh=false")
	}
	if o.RefreshOnly {
		args = append(args, "-refresh-only")
	}
	for _, addr := range o.TargetAddrs {
		args = append(args, "-target="+addr)
	}
	for _, addr := range o.ReplaceAddrs {
		args = append(args, "-replace="+addr)
	}
	return args
}
