package main

import (
	"bufio"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/e2e/devstack"
)

var (
	concurrentRuns = flag.String("concurrent-runs", "4,16,64",
		"the concurrency phase's rounds: how many managed runs each starts at once (comma-separated)")
	concurrencyCeiling = flag.Int("concurrency-ceiling", launch.Default().Ceilings.SandboxesPerRegion["us"],
		"the concurrency phase's sandbox ceiling for its one region (the default launch control's)")
)

// concurrencyRegion is the one region every run of the phase asks for.
const concurrencyRegion = "us"

// benchConcurrency starts N managed runs at once, for each N of
// -concurrent-runs, across two workers that share one regional sandbox
// ceiling, and approves each as soon as it is planned. Each N gets a fresh
// database, API and workers, so a worker's peak memory belongs to that N.
// It reports runs per minute, queue waits from the runs' and attempts' own
// timestamps, each worker's peak resident memory (VmHWM), and fails when a
// run does not apply, the ceiling was exceeded, or a capacity lease is
// still held or outlived its attempt.
func benchConcurrency(ctx context.Context, admin string) error {
	var ns []int
	for _, f := range strings.Split(*concurrentRuns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-concurrent-runs: %q is not a positive count", f)
		}
		ns = append(ns, n)
	}
	fmt.Printf("concurrent managed runs, 50 resources each, 2 workers, one region (%s) with a ceiling of %d sandboxes, %d CPUs:\n",
		concurrencyRegion, *concurrencyCeiling, numCPU())
	for _, n := range ns {
		dbURL, err := freshDatabase(admin)
		if err != nil {
			return err
		}
		if err := concurrencyRound(ctx, dbURL, n); err != nil {
			return fmt.Errorf("concurrency, %d runs: %w", n, err)
		}
	}
	return nil
}

func concurrencyRound(ctx context.Context, dbURL string, n int) error {
	api, files, stopAPI, err := startTLSAPI(dbURL)
	if err != nil {
		return err
	}
	defer stopAPI()
	control := launch.Default()
	control.PublicGate = true
	control.Ceilings.SandboxesPerRegion[concurrencyRegion] = *concurrencyCeiling
	// A workspace's queued runs are bounded too; N runs in N workspaces
	// stay one per workspace.
	if err := devstack.WriteFirstLaunchControl(api.Client, api.URL, benchOperatorToken, "bench-concurrency", control); err != nil {
		return err
	}
	// Two workers, as two machines: each its own data directory (sandboxes,
	// toolchain cache), both the API's artifact store.
	secondDir, err := os.MkdirTemp("", "cairn-bench-worker2-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(secondDir)
	stopFirst, err := startWorker(dbURL, api, files)
	if err != nil {
		return err
	}
	defer stopFirst()
	stopSecond, err := startWorker(dbURL, api, files, "CAIRN_DATA_DIR="+secondDir,
		"CAIRN_BLOB_URL=file://"+filepath.Join(api.DataDir, "blobs"))
	if err != nil {
		return err
	}
	defer stopSecond()

	c := api.Client
	session, err := signUp(c, api.URL, fmt.Sprintf("concurrency-%d-%d@example.com", n, time.Now().UnixNano()), false)
	if err != nil {
		return err
	}
	if st := call(c, http.MethodPost, api.URL+"/api/auth/organization/create", session,
		map[string]string{"name": "concurrency", "slug": fmt.Sprintf("concurrency-%d", n)}, nil, nil); st != http.StatusOK {
		return fmt.Errorf("creating the organization: %d", st)
	}
	var project struct{ ID string }
	if _, err := v1(c, http.MethodPost, api.URL+"/v1/projects", session, jsonBody(map[string]string{"name": "concurrency"}), "application/json", &project); err != nil {
		return err
	}
	// One workspace per run, each with its configuration uploaded before
	// the clock starts: what is measured is the runs, not the setup.
	workspaces, configs := make([]string, n), make([]string, n)
	for i := range n {
		var ws, cfg struct{ ID string }
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces", session, jsonBody(map[string]any{"project_id": project.ID,
			"name": fmt.Sprintf("concurrency-%d", i), "execution_settings": map[string]string{"tool_version": "1.10.6",
				"region": concurrencyRegion, "platform": "linux_amd64"}}), "application/json", &ws); err != nil {
			return err
		}
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces/"+ws.ID+"/configuration-versions", session,
			devstack.TarGz(map[string]string{"main.tf": fmt.Sprintf(benchRunConfig, i)}), "application/gzip", &cfg); err != nil {
			return err
		}
		workspaces[i], configs[i] = ws.ID, cfg.ID
	}
	conn, err := sql.Open("postgres", dbURL)
	if err != nil {
		return err
	}
	defer conn.Close()

	// All N at once.
	start := time.Now()
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r benchRun
			_, errs[i] = v1(c, http.MethodPost, api.URL+"/v1/runs", session, jsonBody(map[string]string{"workspace_id": workspaces[i],
				"configuration_version_id": configs[i], "kind": "plan_and_apply"}), "application/json", &r)
			ids[i] = r.ID
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}

	// Statuses come from the database, not N run reviews per poll, so
	// watching does not take the CPUs the runs share; each planned run is
	// approved through the API with the binding its review shows.
	approved := map[string]bool{}
	deadline := start.Add(time.Duration(10+n/2) * time.Minute)
	for {
		statuses, err := runStatuses(conn, ids)
		if err != nil {
			return err
		}
		done := 0
		for _, id := range ids {
			switch st := statuses[id]; st {
			case "awaiting_approval":
				if approved[id] {
					continue
				}
				var r benchRun
				if _, err := v1(c, http.MethodGet, api.URL+"/v1/runs/"+id, session, nil, "", &r); err != nil {
					return err
				}
				if r.Plan.PlanDigest == nil || r.Policy.ResultDigest == nil {
					return fmt.Errorf("run %s awaits approval without plan and policy digests", id)
				}
				binding := map[string]any{"plan_digest": *r.Plan.PlanDigest, "policy_result_digest": *r.Policy.ResultDigest,
					"predecessor_state_version_id": r.Plan.PredecessorStateVersionID, "dependency_lock_digest": r.Pinned.DependencyLockDigest}
				if _, err := v1(c, http.MethodPost, api.URL+"/v1/runs/"+id+"/actions/approve", session, jsonBody(binding), "application/json", nil); err != nil {
					return err
				}
				approved[id] = true
			case "applied":
				done++
			case "pending", "plan_queued", "planning", "apply_queued", "applying":
			default:
				return fmt.Errorf("run %s ended %s", id, st)
			}
		}
		if done == n {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d runs applied after %s", done, n, time.Since(start).Round(time.Second))
		}
		// The deadline ends the wait; the deferred stops end the API
		// and both workers.
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
	elapsed := time.Since(start)
	// Peak memory is read before the workers stop.
	peaks, err := workerPeaks()
	if err != nil {
		return err
	}

	planWait, applyWait, perWorker, err := queueWaits(conn, ids)
	if err != nil {
		return err
	}
	maxLeases, held, outlived, err := leaseCheck(conn, concurrencyRegion)
	if err != nil {
		return err
	}
	fmt.Printf("  N=%-3d %6.1f runs/min (%s)  queue wait created->plan sandbox p50 %7.0f ms p99 %7.0f ms, "+
		"apply queued->sandbox p50 %6.0f ms p99 %6.0f ms  attempts per worker %v  worker peak RSS %s  leases: at most %d at once (ceiling %d), %d held, %d outlived their attempt\n",
		n, float64(n)/elapsed.Minutes(), elapsed.Round(100*time.Millisecond),
		percentile(planWait, 0.5), percentile(planWait, 0.99), percentile(applyWait, 0.5), percentile(applyWait, 0.99),
		perWorker, peaks, maxLeases, *concurrencyCeiling, held, outlived)
	switch {
	case maxLeases > *concurrencyCeiling:
		return fmt.Errorf("%d sandboxes held leases at once, over the ceiling of %d", maxLeases, *concurrencyCeiling)
	case held > 0 || outlived > 0:
		return fmt.Errorf("%d capacity leases still held and %d outlived their attempts", held, outlived)
	}
	return nil
}

// runStatuses reads the runs' statuses in one query.
func runStatuses(conn *sql.DB, ids []string) (map[string]string, error) {
	rows, err := conn.Query(`SELECT id, status FROM runs WHERE id = ANY(string_to_array($1, ','))`, strings.Join(ids, ","))
	if err != nil {
		return nil, fmt.Errorf("reading run statuses: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			return nil, err
		}
		out[id] = st
	}
	return out, rows.Err()
}

// queueWaits returns, per run, how long it waited from creation until its
// first plan attempt's sandbox started (the attempt's lease was granted),
// and how long its apply attempt waited from being queued until its
// sandbox started, in milliseconds; and how many attempts each worker ran.
func queueWaits(conn *sql.DB, ids []string) (plan, apply []float64, perWorker []int, err error) {
	rows, err := conn.Query(`
		SELECT a.phase, a.worker_id,
		       extract(epoch FROM a.started_at - CASE WHEN a.phase = 'plan' THEN r.created_at ELSE a.queued_at END) * 1000
		FROM run_attempts a JOIN runs r ON r.id = a.run_id
		WHERE a.run_id = ANY(string_to_array($1, ',')) AND a.attempt = 1 AND a.started_at IS NOT NULL`, strings.Join(ids, ","))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading attempts: %w", err)
	}
	defer rows.Close()
	workers := map[string]int{}
	for rows.Next() {
		var phase, worker string
		var wait float64
		if err := rows.Scan(&phase, &worker, &wait); err != nil {
			return nil, nil, nil, err
		}
		workers[worker]++
		if phase == "plan" {
			plan = append(plan, wait)
		} else {
			apply = append(apply, wait)
		}
	}
	for _, k := range workers {
		perWorker = append(perWorker, k)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(perWorker)))
	return plan, apply, perWorker, rows.Err()
}

// leaseCheck returns the most leases a region's sandboxes held at once
// (from the leases' own intervals), how many are still held, and how many
// were released more than a second after their attempt finished, or
// whose attempt never finished.
func leaseCheck(conn *sql.DB, region string) (maxAtOnce, held, outlived int, err error) {
	if err := conn.QueryRow(`
		SELECT count(*) FILTER (WHERE l.released_at IS NULL),
		       count(*) FILTER (WHERE l.released_at IS NOT NULL AND l.attempt_id IS NOT NULL
		                        AND (a.finished_at IS NULL OR l.released_at > a.finished_at + interval '1 second'))
		FROM capacity_leases l LEFT JOIN run_attempts a ON a.id = l.attempt_id
		WHERE l.region = $1`, region).Scan(&held, &outlived); err != nil {
		return 0, 0, 0, fmt.Errorf("checking leases: %w", err)
	}
	// The most intervals overlapping: +1 at each grant, -1 at each
	// release, releases first at equal times (a lease handed on).
	if err := conn.QueryRow(`
		SELECT coalesce(max(active), 0) FROM (
			SELECT sum(d) OVER (ORDER BY at, d) AS active FROM (
				SELECT acquired_at AS at, 1 AS d FROM capacity_leases WHERE region = $1
				UNION ALL
				SELECT released_at, -1 FROM capacity_leases WHERE region = $1 AND released_at IS NOT NULL
			) events
		) running`, region).Scan(&maxAtOnce); err != nil {
		return 0, 0, 0, fmt.Errorf("counting concurrent leases: %w", err)
	}
	return maxAtOnce, held, outlived, nil
}

// workerPeaks reads the peak resident memory (VmHWM) of every cairn-worker
// this process started, from /proc: the workers' own memory, not their
// sandboxes', which are processes of their own.
func workerPeaks() (string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return "", err
	}
	self := os.Getpid()
	var peaks []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := readProcStatus(pid)
		if err != nil || status["Name"] != "cairn-worker" || status["PPid"] != strconv.Itoa(self) {
			continue
		}
		kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(status["VmHWM"]), " kB"))
		peaks = append(peaks, fmt.Sprintf("%.0f MiB", float64(kb)/1024))
	}
	if len(peaks) != 2 {
		return "", fmt.Errorf("found %d running workers of this harness, want 2", len(peaks))
	}
	sort.Strings(peaks)
	return strings.Join(peaks, ", "), nil
}

func readProcStatus(pid int) (map[string]string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, sc.Err()
}
