package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/plandiff/plandifftest"
	"github.com/cairnhq/cairn/api/policy/inprocess"
	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// benchCorpus is the e2e corpus's publishing sets, repeated to ten
// attachments as a run would evaluate them.
var benchCorpus = []string{"require-tags", "limit-destroy", "no-sensitive-leak", "advisory-naming", "always-pass"}

func corpusDir(name string) string { return filepath.Join("e2e", "testdata", "policies", name) }

// benchMeta is the shape of a run's input metadata, as the worker writes
// it.
var benchMeta = rego.InputMeta{RunID: "run_aaaaaaaaaaaaaaaaaaaaaaaaaa", Kind: "manual", RepositoryID: "cfg_aaaaaaaaaaaaaaaaaaaaaaaaaa",
	WorkspaceID: "ws_aaaaaaaaaaaaaaaaaaaaaaaaaa", WorkspaceMetadata: map[string]any{"name": "bench",
		"project_id": "prj_aaaaaaaaaaaaaaaaaaaaaaaaaa", "organization_id": "org_aaaaaaaaaaaaaaaaaaaaaaaaaa"}}

// largestAdmitted returns the most changes n for which plan(n) yields an
// input within the bounds, by bisection.
func largestAdmitted(plan func(n int) ([]byte, error)) (int, error) {
	lo, hi := 0, rego.MaxResourceChanges // plan(lo) fits, plan(hi+1) does not
	for lo < hi {
		mid := (lo + hi + 1) / 2
		p, err := plan(mid)
		if err != nil {
			return 0, err
		}
		_, err = rego.BuildInput(context.Background(), bytes.NewReader(p), benchMeta)
		switch {
		case err == nil:
			lo = mid
		case rego.CodeOf(err) == rego.CodeInputTooLarge:
			hi = mid - 1
		default:
			return 0, err
		}
	}
	return lo, nil
}

func taggedPlan(n int) ([]byte, error) {
	var buf bytes.Buffer
	err := plandifftest.TaggedPlanJSON(&buf, n)
	return buf.Bytes(), err
}

// inProcessStage is the policy stage without processes: the sanitized
// input built from the plan JSON, converted once, and ten evaluations in
// this process; the baseline of the sandboxed evaluator.
type inProcessStage struct {
	build, parse, eval, total, decode, perEvaluation []float64
	findings                                         int
	refused                                          string
	changes                                          int
}

func measureInProcess(plan []byte, loaders []inprocess.Loader, rounds int) (inProcessStage, error) {
	ctx := context.Background()
	var st inProcessStage
	for round := 0; round <= rounds; round++ {
		start := time.Now()
		doc, err := rego.BuildInput(ctx, bytes.NewReader(plan), benchMeta)
		if code := rego.CodeOf(err); code != "" {
			// The stage stops here: every result is this error.
			st.refused = code
			if round > 0 {
				st.total = append(st.total, ms64(time.Since(start)))
			}
			continue
		}
		if err != nil {
			return st, err
		}
		built := time.Now()
		input, err := engine.ParseInput(doc)
		if err != nil {
			return st, err
		}
		parsed := time.Now()
		outcomes := inprocess.EvaluateAll(ctx, input, 10*time.Second, loaders)
		done := time.Now()
		st.findings = 0
		for _, o := range outcomes {
			if o.Err != nil {
				return st, o.Err
			}
			d, err := rego.DecisionFromJSON(o.Decision)
			if err != nil {
				return st, err
			}
			st.findings += len(d.Findings)
			if round > 0 {
				st.perEvaluation = append(st.perEvaluation, ms64(o.Duration))
			}
		}
		var decoded any
		if err := json.Unmarshal(plan, &decoded); err != nil {
			return st, err
		}
		if round == 0 {
			continue
		}
		st.build, st.parse, st.eval = append(st.build, ms64(built.Sub(start))), append(st.parse, ms64(parsed.Sub(built))), append(st.eval, ms64(done.Sub(parsed)))
		st.total, st.decode = append(st.total, ms64(done.Sub(start))), append(st.decode, ms64(time.Since(done)))
	}
	return st, nil
}

// benchPolicyEvaluation times the in-process policy stage against ten
// attachments for a 5,000-change plan (which the 50,000-node input bound
// refuses: every change carries at least ten values) and for the largest
// plan of the same shape the bounds admit. It returns the latter's
// in-process numbers, the baseline of the sandboxed evaluator.
func benchPolicyEvaluation(rounds int) (inProcessStage, error) {
	ctx := context.Background()
	var policies []*engine.Policy
	for i := 0; i < 10; i++ {
		var bundle, results bytes.Buffer
		if _, err := engine.Build(ctx, corpusDir(benchCorpus[i%len(benchCorpus)]), &bundle, &results); err != nil {
			return inProcessStage{}, fmt.Errorf("building %s: %w", benchCorpus[i%len(benchCorpus)], err)
		}
		p, err := engine.Load(ctx, &bundle)
		if err != nil {
			return inProcessStage{}, err
		}
		policies = append(policies, p)
	}
	loaders := make([]inprocess.Loader, len(policies))
	for i, p := range policies {
		loaders[i] = func(context.Context) (*engine.Policy, error) { return p, nil }
	}
	full, err := taggedPlan(5000)
	if err != nil {
		return inProcessStage{}, err
	}
	refused, err := measureInProcess(full, loaders, rounds)
	if err != nil {
		return inProcessStage{}, err
	}
	n, err := largestAdmitted(taggedPlan)
	if err != nil {
		return inProcessStage{}, err
	}
	plan, err := taggedPlan(n)
	if err != nil {
		return inProcessStage{}, err
	}
	st, err := measureInProcess(plan, loaders, rounds)
	if err != nil {
		return inProcessStage{}, err
	}
	st.changes = n
	fmt.Printf("policy evaluation in-process (the baseline: no process, no memory ceiling), 10 attachments, median of %d rounds:\n", rounds)
	fmt.Printf("  5,000 resource changes (%.1f MB plan JSON): refused as %s in %7.1f ms (the 50,000-node bound admits at most %d changes of this shape)\n",
		float64(len(full))/1e6, refused.refused, median(refused.total), n)
	fmt.Printf("  %d resource changes (%.1f MB plan JSON): whole stage %7.1f ms  [target < 1000 ms]  (decoding the plan JSON alone %7.1f ms, x%.2f)\n",
		n, float64(len(plan))/1e6, median(st.total), median(st.decode), median(st.total)/median(st.decode))
	fmt.Printf("    build input %7.1f ms, convert once %7.1f ms, 10 evaluations %7.1f ms (%d findings, %d at a time, %.1f ms each)\n",
		median(st.build), median(st.parse), median(st.eval), st.findings, runtime.GOMAXPROCS(0), median(st.perEvaluation))
	return st, nil
}

// taggedConfig is n terraform_data resources like the tagged synthetic
// plan's: a size and owner and env tags, which the corpus passes.
func taggedConfig(n int) string {
	return fmt.Sprintf(`resource "terraform_data" "item" {
  count = %d
  input = { size = count.index %% 7, tags = { owner = "team-a", env = "prod" } }
}
`, n)
}

// tofuPlanJSON plans a configuration with the pinned tofu and a local
// backend and returns `tofu show -json` of the plan.
func tofuPlanJSON(ctx context.Context, config string) ([]byte, error) {
	tofu, err := filepath.Abs(filepath.Join(devstack.ToolchainDir(".", "tofu", "1.10.6"), "tofu"))
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cairn-bench-policy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o644); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1", "HOME="+dir)
	var out []byte
	for _, step := range [][]string{{"init", "-input=false", "-no-color"}, {"plan", "-input=false", "-no-color", "-out=p.tfplan"},
		{"show", "-json", "p.tfplan"}} {
		cmd := tool(ctx, tofu, step...)
		cmd.Dir, cmd.Env = dir, env
		if out, err = cmd.Output(); err != nil {
			return nil, fmt.Errorf("tofu %s: %w", step[0], err)
		}
	}
	return out, nil
}

// benchPolicyEvaluator measures the policy stage as a worker runs it:
// every evaluation in its own sandboxed process fetching its bundle
// through a grant. Ten published sets are attached to a workspace; plans
// of the largest size the bounds admit, and of 5,000 resources, go
// through real runs, and the stage's time is the plan attempt's recorded
// "policy" step. Per evaluation, the process's cost is its recorded
// duration next to the in-process evaluation's.
func benchPolicyEvaluator(ctx context.Context, dbURL string, rounds int, baseline inProcessStage) error {
	// The largest plan of real tofu's shape that the bounds admit: nodes
	// per change from plans of one and two resources.
	one, err := tofuPlanJSON(ctx, taggedConfig(1))
	if err != nil {
		return err
	}
	two, err := tofuPlanJSON(ctx, taggedConfig(2))
	if err != nil {
		return err
	}
	perChange, fixed, err := nodesPerChange(one, two)
	if err != nil {
		return err
	}
	largest := (rego.MaxInputNodes - fixed) / perChange

	m, err := startManagedStack(dbURL, "policyeval")
	if err != nil {
		return err
	}
	defer m.stop()
	api, c, session := m.api, m.api.Client, m.session
	for i := 0; i < 10; i++ {
		name := benchCorpus[i%len(benchCorpus)]
		archive, err := corpusArchive(name)
		if err != nil {
			return err
		}
		var set struct{ ID string }
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/policy-sets", session, jsonBody(map[string]string{"name": fmt.Sprintf("%s-%d", name, i)}),
			"application/json", &set); err != nil {
			return err
		}
		var v struct{ ID, Status string }
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces/"+m.workspace+"/policy-sets/"+set.ID+"/versions", session, archive,
			"application/gzip", &v); err != nil {
			return err
		}
		for deadline := time.Now().Add(2 * time.Minute); v.Status == "pending" && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			if _, err := v1(c, http.MethodGet, api.URL+"/v1/policy-versions/"+v.ID, session, nil, "", &v); err != nil {
				return err
			}
		}
		if v.Status != "published" {
			return fmt.Errorf("policy version %s of %s is %s", v.ID, name, v.Status)
		}
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces/"+m.workspace+"/policy-attachments", session, jsonBody(map[string]string{
			"policy_set_id": set.ID, "policy_version_id": v.ID, "enforcement_mode": "advisory"}), "application/json", nil); err != nil {
			return err
		}
	}
	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		return err
	}
	defer db.Close()

	type stage struct {
		policy, perEvaluation []float64
		codes                 map[string]int
	}
	measure := func(resources, runs int) (stage, error) {
		st := stage{codes: map[string]int{}}
		for round := 0; round < runs; round++ {
			var cfg, created struct{ ID string }
			if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces/"+m.workspace+"/configuration-versions", session,
				devstack.TarGz(map[string]string{"main.tf": taggedConfig(resources)}), "application/gzip", &cfg); err != nil {
				return st, err
			}
			if _, err := v1(c, http.MethodPost, api.URL+"/v1/runs", session, jsonBody(map[string]string{"workspace_id": m.workspace,
				"configuration_version_id": cfg.ID, "kind": "plan_only"}), "application/json", &created); err != nil {
				return st, err
			}
			var r benchRun
			for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
				if _, err := v1(c, http.MethodGet, api.URL+"/v1/runs/"+created.ID, session, nil, "", &r); err != nil {
					return st, err
				}
				if r.Status == "planned_and_finished" || r.Status == "errored" || r.Status == "canceled" {
					break
				}
				if time.Now().After(deadline) {
					return st, fmt.Errorf("run %s stayed %s", r.ID, r.Status)
				}
			}
			for _, a := range r.Evidence.Attempts {
				if a.Phase == "plan" && a.TimingsMS["policy"] > 0 {
					st.policy = append(st.policy, a.TimingsMS["policy"])
				}
			}
			rows, err := db.Query(`SELECT duration_ms, coalesce(error_code, status) FROM policy_results WHERE run_id = $1`, r.ID)
			if err != nil {
				return st, err
			}
			for rows.Next() {
				var d int
				var code string
				if err := rows.Scan(&d, &code); err != nil {
					rows.Close()
					return st, err
				}
				st.perEvaluation = append(st.perEvaluation, float64(d))
				st.codes[code]++
			}
			rows.Close()
		}
		return st, nil
	}
	// A warm-up run: the first toolchain verification and the first
	// evaluation process of each bundle.
	if _, err := measure(1, 1); err != nil {
		return err
	}
	small, err := measure(1, rounds)
	if err != nil {
		return err
	}
	big, err := measure(largest, max(1, rounds/2))
	if err != nil {
		return err
	}
	refused, err := measure(5000, 1)
	if err != nil {
		return err
	}
	fmt.Printf("policy evaluation in sandboxed processes (one per evaluation, %d at a time, bundle fetched through its grant), 10 attachments:\n", numCPU())
	fmt.Printf("  1 resource change, median of %d runs: stage %7.1f ms; per evaluation %6.1f ms (process start, grant fetch, compile, evaluate)\n",
		rounds, median(small.policy), median(small.perEvaluation))
	fmt.Printf("  %d resource changes (the most tofu's plan of this shape fits in 50,000 nodes; %d nodes each), median of %d runs: stage %7.1f ms  [target < 1000 ms]  results %v\n",
		largest, perChange, len(big.policy), median(big.policy), big.codes)
	fmt.Printf("    per evaluation %7.1f ms in its process vs %7.1f ms in-process (%d changes of the synthetic plan: convert %.1f ms + evaluate %.1f ms)\n",
		median(big.perEvaluation), median(baseline.parse)+median(baseline.perEvaluation), baseline.changes, median(baseline.parse), median(baseline.perEvaluation))
	fmt.Printf("  5,000 resource changes: stage %7.1f ms, results %v (refused before any process starts)\n", median(refused.policy), refused.codes)
	return nil
}

// nodesPerChange derives, from the inputs of two plans that differ by one
// change, the nodes a change adds and the nodes of everything else.
func nodesPerChange(one, two []byte) (perChange, fixed int, err error) {
	count := func(plan []byte) (int, error) {
		doc, err := rego.BuildInput(context.Background(), bytes.NewReader(plan), benchMeta)
		if err != nil {
			return 0, err
		}
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return 0, err
		}
		var walk func(any) int
		walk = func(v any) int {
			n := 1
			switch x := v.(type) {
			case map[string]any:
				for _, e := range x {
					n += walk(e)
				}
			case []any:
				for _, e := range x {
					n += walk(e)
				}
			}
			return n
		}
		return walk(v), nil
	}
	a, err := count(one)
	if err != nil {
		return 0, 0, err
	}
	b, err := count(two)
	if err != nil {
		return 0, 0, err
	}
	return b - a, a - (b - a), nil
}

// benchPolicyBuild times publication of a small set through the service
// (upload, sandboxed build, sealed outputs, verified completion) against
// building the same set in-process.
func benchPolicyBuild(dbURL string, rounds int) error {
	m, err := startManagedStack(dbURL, "policy")
	if err != nil {
		return err
	}
	defer m.stop()
	api, c, session := m.api, m.api.Client, m.session
	var set struct{ ID string }
	if _, err := v1(c, http.MethodPost, api.URL+"/v1/policy-sets", session, jsonBody(map[string]string{"name": "require-tags"}), "application/json", &set); err != nil {
		return err
	}
	archive, err := corpusArchive("require-tags")
	if err != nil {
		return err
	}
	var published, direct []float64
	for round := 0; round <= rounds; round++ {
		start := time.Now()
		var v struct{ ID, Status string }
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces/"+m.workspace+"/policy-sets/"+set.ID+"/versions", session, archive,
			"application/gzip", &v); err != nil {
			return err
		}
		for v.Status == "pending" {
			time.Sleep(10 * time.Millisecond)
			if _, err := v1(c, http.MethodGet, api.URL+"/v1/policy-versions/"+v.ID, session, nil, "", &v); err != nil {
				return err
			}
			if time.Since(start) > 2*time.Minute {
				return fmt.Errorf("policy version %s stayed pending", v.ID)
			}
		}
		if v.Status != "published" {
			return fmt.Errorf("policy version %s is %s", v.ID, v.Status)
		}
		elapsed := time.Since(start)
		began := time.Now()
		if _, err := engine.Build(context.Background(), corpusDir("require-tags"), io.Discard, io.Discard); err != nil {
			return err
		}
		if round > 0 {
			published, direct = append(published, ms64(elapsed)), append(direct, ms64(time.Since(began)))
		}
	}
	fmt.Printf("policy build of a small set (require-tags: 2 modules, 10 tests), median of %d rounds:\n", rounds)
	fmt.Printf("  upload -> published %7.1f ms  (in-process compile+test+bundle %7.1f ms, x%.2f)\n",
		median(published), median(direct), median(published)/median(direct))
	return nil
}

func corpusArchive(name string) ([]byte, error) {
	entries, err := os.ReadDir(corpusDir(name))
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".rego") {
			body, err := os.ReadFile(filepath.Join(corpusDir(name), e.Name()))
			if err != nil {
				return nil, err
			}
			files[e.Name()] = string(body)
		}
	}
	return devstack.TarGz(files), nil
}
