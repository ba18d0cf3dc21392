package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairnhq/cairn/api/plandiff"
	"github.com/cairnhq/cairn/api/plandiff/plandifftest"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// benchRunConfig is 50 terraform_data resources whose inputs change every
// round, so every run plans 50 updates (the first, 50 creates).
const benchRunConfig = `resource "terraform_data" "r" {
  count = 50
  input = "value-${count.index}-%d"
}
`

type benchRun struct {
	ID               string            `json:"id"`
	Status           string            `json:"status"`
	CreatedAt        time.Time         `json:"created_at"`
	StatusTimestamps map[string]string `json:"status_timestamps"`
	Plan             struct {
		PlanDigest                *string `json:"plan_digest"`
		PredecessorStateVersionID *string `json:"predecessor_state_version_id"`
	} `json:"plan"`
	Policy struct {
		ResultDigest *string `json:"result_digest"`
	} `json:"policy"`
	Pinned struct {
		DependencyLockDigest string `json:"dependency_lock_digest"`
	} `json:"pinned"`
	Evidence struct {
		Attempts []struct {
			Phase     string             `json:"phase"`
			TimingsMS map[string]float64 `json:"timings_ms"`
		} `json:"attempts"`
	} `json:"evidence"`
}

func (r benchRun) at(status string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, r.StatusTimestamps[status])
	return t
}

var benchKeys atomic.Int64

func v1(c *http.Client, method, url, session string, body []byte, contentType string, out any) (int, error) {
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	if body == nil {
		req, _ = http.NewRequest(method, url, nil)
	}
	req.Header.Set("Cookie", "__Secure-identity.session_token="+session)
	if method != http.MethodGet {
		req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), benchKeys.Add(1)))
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		_ = json.Unmarshal(raw, &env)
		_ = json.Unmarshal(env.Data, out)
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode, nil
}

func jsonBody(v any) []byte { b, _ := json.Marshal(v); return b }

// startWorker runs the real cairn-worker beside a bench API, sharing its
// data directory (sealed artifacts) and trusting its CA.
func startWorker(dbURL string, api *apiProcess, files devstack.TLSFiles, extraEnv ...string) (func(), error) {
	bin := envOr("CAIRN_BIN_DIR", "bin")
	mirror, err := filepath.Abs(filepath.Dir(filepath.Dir(devstack.ToolchainDir(".", "tofu", "1.10.6"))))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(bin, "cairn-worker"))
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL,
		"AUTH_SECRET=bench-auth-secret-0123456789abcdef0123456789abcdef",
		"CAIRN_MASTER_KEY=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"CAIRN_PUBLIC_URL="+api.URL, "CAIRN_DATA_DIR="+api.DataDir, "SSL_CERT_FILE="+files.Bundle,
		"CAIRN_TOOLCHAIN_DIR="+mirror, "CAIRN_LOG_LEVEL="+envOr("CAIRN_BENCH_API_LOG", "warn"),
		// Beside a `make run` stack, whose worker holds the default address.
		"CAIRN_WORKER_HEALTH_ADDR=off")
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Env = append(cmd.Env, "CAIRN_PPROF_ADDR="+os.Getenv("CAIRN_BENCH_WORKER_PPROF_ADDR"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	forget := track(cmd)
	return func() { defer forget(); _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); _ = cmd.Wait() }, nil
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func median(xs []float64) float64 { return percentile(xs, 0.5) }

// benchRuns measures managed runs end to end on 50 resources: creation to
// awaiting_approval and approval to applied from the run's own recorded
// timestamps, the per-step breakdown, and the same tofu commands run
// directly; then dispatch latency and plan-diff generation at 5,000
// resources.
// managedStack is a TLS API with a worker and a signed-up tenant owning one
// workspace: what every managed-run benchmark starts from.
type managedStack struct {
	api       *apiProcess
	files     devstack.TLSFiles
	email     string
	session   string
	workspace string
	stop      func()
}

func startManagedStack(dbURL, name string, extraEnv ...string) (*managedStack, error) {
	api, files, stopAPI, err := startTLSAPI(dbURL, extraEnv...)
	if err != nil {
		return nil, err
	}
	stopWorker, err := startWorker(dbURL, api, files, extraEnv...)
	if err != nil {
		stopAPI()
		return nil, err
	}
	m := &managedStack{api: api, files: files, email: fmt.Sprintf("%s-%d@example.com", name, time.Now().UnixNano()),
		stop: func() { stopWorker(); stopAPI() }}
	fail := func(err error) (*managedStack, error) {
		m.stop()
		return nil, err
	}
	c := api.Client
	if m.session, err = signUp(c, api.URL, m.email, false); err != nil {
		return fail(err)
	}
	if call(c, http.MethodPost, api.URL+"/api/auth/organization/create", m.session,
		map[string]string{"name": name, "slug": fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1e6)}, nil, nil) != http.StatusOK {
		return fail(fmt.Errorf("creating the %s organization", name))
	}
	var project, ws struct{ ID string }
	if _, err := v1(c, http.MethodPost, api.URL+"/v1/projects", m.session, jsonBody(map[string]string{"name": name}), "application/json", &project); err != nil {
		return fail(err)
	}
	if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces", m.session, jsonBody(map[string]any{"project_id": project.ID, "name": name,
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}), "application/json", &ws); err != nil {
		return fail(err)
	}
	m.workspace = ws.ID
	return m, nil
}

func benchRuns(ctx context.Context, dbURL string, rounds int) error {
	// The runs stack has an API of its own beside the harness's first one,
	// which holds CAIRN_BENCH_PPROF_ADDR.
	m, err := startManagedStack(dbURL, "runs", "CAIRN_PPROF_ADDR="+os.Getenv("CAIRN_BENCH_RUNS_PPROF_ADDR"))
	if err != nil {
		return err
	}
	defer m.stop()
	api, c, session := m.api, m.api.Client, m.session

	steps := map[string][]float64{}
	var toApproval, toApplied, dispatch []float64
	wait := func(id, want string) (benchRun, error) {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var r benchRun
			if _, err := v1(c, http.MethodGet, api.URL+"/v1/runs/"+id, session, nil, "", &r); err != nil {
				return r, err
			}
			if r.Status == want {
				return r, nil
			}
			if time.Now().After(deadline) || (r.Status != "pending" && r.Status != "plan_queued" && r.Status != "planning" &&
				r.Status != "awaiting_approval" && r.Status != "apply_queued" && r.Status != "applying") {
				return r, fmt.Errorf("run %s is %s, wanted %s", id, r.Status, want)
			}
			time.Sleep(statusPoll)
		}
	}
	// The direct commands run in the same rounds, right after each managed
	// run, so both sides of each ratio see the same machine.
	direct, err := newDirectTofu()
	if err != nil {
		return err
	}
	defer direct.close()
	for round := 0; round <= rounds; round++ {
		var cfg struct{ ID string }
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces/"+m.workspace+"/configuration-versions", session,
			devstack.TarGz(map[string]string{"main.tf": fmt.Sprintf(benchRunConfig, round)}), "application/gzip", &cfg); err != nil {
			return err
		}
		var created benchRun
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/runs", session, jsonBody(map[string]string{"workspace_id": m.workspace,
			"configuration_version_id": cfg.ID, "kind": "plan_and_apply"}), "application/json", &created); err != nil {
			return err
		}
		r, err := wait(created.ID, "awaiting_approval")
		if err != nil {
			return err
		}
		binding := map[string]any{"plan_digest": *r.Plan.PlanDigest, "policy_result_digest": *r.Policy.ResultDigest,
			"predecessor_state_version_id": r.Plan.PredecessorStateVersionID, "dependency_lock_digest": r.Pinned.DependencyLockDigest}
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/runs/"+r.ID+"/actions/approve", session, jsonBody(binding), "application/json", nil); err != nil {
			return err
		}
		if r, err = wait(r.ID, "applied"); err != nil {
			return err
		}
		if err := direct.round(ctx, round, round > 0); err != nil {
			return err
		}
		if round == 0 {
			continue // warm-up: first toolchain verification, first state
		}
		toApproval = append(toApproval, ms64(r.at("awaiting_approval").Sub(r.CreatedAt)))
		toApplied = append(toApplied, ms64(r.at("applied").Sub(r.at("apply_queued"))))
		for _, a := range r.Evidence.Attempts {
			dispatch = append(dispatch, a.TimingsMS["queue_wait"])
			for k, v := range a.TimingsMS {
				steps[a.Phase+" "+k] = append(steps[a.Phase+" "+k], v)
			}
		}
	}

	fmt.Printf("managed run, 50 resources, median of %d rounds (worker poll %s):\n", rounds, envOr("CAIRN_WORKER_POLL_INTERVAL", "100ms"))
	planDirect, applyDirect := median(direct.sums["plan"]), median(direct.sums["apply"])
	fmt.Printf("  created -> awaiting_approval %7.1f ms  [target < 400 ms]  (direct init+plan+show %7.1f ms, x%.2f; target x1.3)\n",
		median(toApproval), planDirect, median(toApproval)/planDirect)
	fmt.Printf("  approved -> applied          %7.1f ms  [target < 400 ms]  (direct init+apply %7.1f ms, x%.2f; target x1.3)\n",
		median(toApplied), applyDirect, median(toApplied)/applyDirect)
	names := make([]string, 0, len(steps))
	for k := range steps {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Printf("    %-28s %7.1f ms\n", k, median(steps[k]))
	}
	for _, k := range []string{"init", "plan", "show", "apply"} {
		fmt.Printf("    direct tofu %-16s %7.1f ms\n", k, median(direct.times[k]))
	}
	fmt.Printf("  dispatch (commit -> sandbox start), %d attempts: p50 %.1f ms, p99 %.1f ms\n", len(dispatch), percentile(dispatch, 0.5), percentile(dispatch, 0.99))
	return benchPlanDiff()
}

// directTofu times the same commands the runner runs, on the same
// configuration, with a local backend and no sandbox: init, plan, show and
// apply in one directory whose state carries over from round to round.
type directTofu struct {
	tofu, dir string
	env       []string
	// times are each command's durations; sums the plan phase's
	// (init+plan+show) and the apply phase's (init+apply) per round.
	times, sums map[string][]float64
}

func newDirectTofu() (*directTofu, error) {
	tofu, err := filepath.Abs(filepath.Join(devstack.ToolchainDir(".", "tofu", "1.10.6"), "tofu"))
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cairn-bench-direct-")
	if err != nil {
		return nil, err
	}
	return &directTofu{tofu: tofu, dir: dir, env: append(os.Environ(), "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1", "HOME="+dir),
		times: map[string][]float64{}, sums: map[string][]float64{}}, nil
}

func (d *directTofu) close() { os.RemoveAll(d.dir) }

// round runs the commands on round's configuration, keeping the times
// when keep is set.
func (d *directTofu) round(ctx context.Context, round int, keep bool) error {
	if err := os.WriteFile(filepath.Join(d.dir, "main.tf"), []byte(fmt.Sprintf(benchRunConfig, round)), 0o644); err != nil {
		return err
	}
	took := map[string]float64{}
	for _, step := range [][]string{{"init", "-input=false", "-no-color"}, {"plan", "-input=false", "-no-color", "-out=p.tfplan"},
		{"show", "-json", "p.tfplan"}, {"apply", "-input=false", "-no-color", "p.tfplan"}} {
		cmd := tool(ctx, d.tofu, step...)
		cmd.Dir, cmd.Env = d.dir, d.env
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("direct tofu %s: %v\n%s", step[0], err, out)
		}
		took[step[0]] = ms64(time.Since(start))
	}
	if keep {
		for k, v := range took {
			d.times[k] = append(d.times[k], v)
		}
		d.sums["plan"] = append(d.sums["plan"], took["init"]+took["plan"]+took["show"])
		d.sums["apply"] = append(d.sums["apply"], took["init"]+took["apply"])
	}
	return nil
}

// benchPlanDiff builds the plan diff of a 5,000-resource plan and reports
// its time and the peak heap while building.
func benchPlanDiff() error {
	var buf bytes.Buffer
	if err := plandifftest.PlanJSON(&buf, sized(5000)); err != nil {
		return err
	}
	plan := buf.Bytes()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var m runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
			}
		}
	}()
	start := time.Now()
	a, err := plandiff.Build(context.Background(), bytes.NewReader(plan))
	elapsed := time.Since(start)
	close(done)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(a)
	growth := int64(peak.Load()) - int64(before.HeapInuse)
	fmt.Printf("plan diff, 5,000 resources (%.1f MB plan JSON -> %.1f MB artifact): %.1f ms, peak heap growth %.1f MiB\n",
		float64(len(plan))/1e6, float64(len(body))/1e6, ms64(elapsed), float64(max(growth, 0))/(1<<20))
	return nil
}

// statusPoll is how often the harness reads a run's status while it waits
// (CAIRN_BENCH_STATUS_POLL). The times it reports are the run's own
// recorded ones, so polling only adds load to the two CPUs the run shares:
// every read is a full run view. At 10 ms the reads took about a tenth of a
// CPU and slowed the phases by 5 to 8 ms. 100 ms is still ten times as
// often as the tofu CLI polls a remote run (every second or more), and the
// dashboard is pushed its changes.
var statusPoll = func() time.Duration {
	d, err := time.ParseDuration(envOr("CAIRN_BENCH_STATUS_POLL", "100ms"))
	if err != nil || d <= 0 {
		return 100 * time.Millisecond
	}
	return d
}()
