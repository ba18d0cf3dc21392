package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"

	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// stackMasterKey is StartStack's CAIRN_MASTER_KEY: the tests that read the
// blob store themselves open its sealed objects with it.
const stackMasterKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// drillRescueAfter is the River rescue horizon the drills configure: a
// SIGKILLed worker's running jobs must be rescued within it (plus the
// rescuer's 30 s period) for the stack to count as quiet. It bounds phase
// jobs too, so the drills shorten the phase timeout and the interrupt
// grace under it (drillEnv).
const drillRescueAfter = 60 * time.Second

// drillEnv is the worker settings of the drills: lost attempts are noticed
// after 5 s, phases are bounded well under drillRescueAfter.
var drillEnv = []string{"CAIRN_ATTEMPT_HEARTBEAT_TIMEOUT=5s", "CAIRN_PHASE_TIMEOUT=45s", "CAIRN_APPLY_INTERRUPT_GRACE=5s",
	"CAIRN_JOB_RESCUE_AFTER=" + drillRescueAfter.String()}

// TestCrashDrill runs managed runs while it SIGKILLs the API, the worker or
// PostgreSQL (the postmaster and every server process at once) at random
// moments and restarts them, then checks what must hold after any crash:
// every run ended or waits in recovery; no run, configuration or state
// version was created twice by a retried request; state version numbers
// are contiguous per workspace and serials grow with them; every applied
// run published its state; no capacity lease, workspace lock, run token or
// running attempt outlives its run; no River job is left running or
// waiting; every stored object matches its recorded digest; and every
// audit event came with its mutation and every mutation with its event.
//
// The drill owns its PostgreSQL cluster (durable, as production runs it:
// a crash must not lose a committed transaction). A run that ends in
// recovery is resolved as an operator would (current state verified), so
// the workspace's next run can go. CAIRN_CHAOS_RUNS sets the number of
// runs (default 6; `make chaos` runs 50), CAIRN_CHAOS_SEED the random
// schedule (printed, so a failure can be replayed).
func TestCrashDrill(t *testing.T) {
	t.Parallel()
	runs := 6
	if v := os.Getenv("CAIRN_CHAOS_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CAIRN_CHAOS_RUNS=%q is not a positive number", v)
		}
		runs = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CAIRN_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CAIRN_CHAOS_SEED=%q is not a number", v)
		}
		seed = n
	}
	t.Logf("crash drill: %d runs, CAIRN_CHAOS_SEED=%d", runs, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay this schedule with CAIRN_CHAOS_SEED=%d CAIRN_CHAOS_RUNS=%d", seed, runs)
		}
	})
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	pg, dbURL := privateCluster(t)
	s := runsStack(t, append([]string{"DATABASE_URL=" + dbURL}, drillEnv...)...)
	s.DatabaseURL = dbURL
	m := s.newMember(t, "chaos")

	// Two runs per workspace, one after the other: the second starts from
	// the state the first published (or the recovery left).
	workspaces := (runs + 1) / 2
	wsIDs := make([]string, workspaces)
	for i := range wsIDs {
		wsIDs[i] = s.createWorkspace(t, m, fmt.Sprintf("chaos-%02d", i), "us")
	}
	type outcome struct {
		runID, status string
		recovered     bool
	}
	var mu sync.Mutex
	var outcomes []outcome
	var driveErrs []error
	// Later runs wait for the first round of kills, so however fast the
	// runs are, the drill never ends before each victim was hit once.
	firstRound := make(chan struct{})
	var wg sync.WaitGroup
	for i, wsID := range wsIDs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := i; n < runs; n += workspaces {
				if n >= workspaces {
					<-firstRound
				}
				id, st, recovered, err := s.chaosRun(m, wsID, n, t.Logf)
				mu.Lock()
				if err != nil {
					driveErrs = append(driveErrs, fmt.Errorf("workspace %d run %d (%s): %w", i, n, id, err))
					mu.Unlock()
					return
				}
				outcomes = append(outcomes, outcome{id, st, recovered})
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// The schedule: every round kills the three in a random order, so each
	// is hit however short the drill, at a random moment, down for a
	// random while.
	kills := map[string]int{}
	deaths := map[string]int{}
	victims := []string{"api", "worker", "postgres"}
	start := time.Now()
	rounds := 0
chaos:
	for {
		rng.Shuffle(len(victims), func(i, j int) { victims[i], victims[j] = victims[j], victims[i] })
		for _, victim := range victims {
			select {
			case <-done:
				break chaos
			case <-time.After(jitter(rng, 500*time.Millisecond, 4*time.Second)):
			}
			if victim == "worker" {
				// A worker is worth killing while it runs a phase: then
				// its attempt, lease and River job are left behind.
				waitForRunningAttempt(dbURL, 10*time.Second)
			}
			down := jitter(rng, 100*time.Millisecond, 2*time.Second)
			t.Logf("%6.1fs: SIGKILL %s, down for %s", time.Since(start).Seconds(), victim, down.Round(time.Millisecond))
			switch victim {
			case "postgres":
				pg.Kill()
			default:
				s.killProcess(t, victim)
			}
			kills[victim]++
			time.Sleep(down)
			s.restart(t, victim, pg)
			// A process that exits because PostgreSQL went away is
			// restarted as a service manager would; counted, not hidden.
			for name, n := range s.revive(t) {
				deaths[name] += n
			}
		}
		if rounds++; rounds == 1 {
			close(firstRound)
		}
	}
	t.Logf("all runs ended after %s; kills %v; processes that exited on their own %v", time.Since(start).Round(time.Second), kills, deaths)
	for name, n := range s.revive(t) {
		deaths[name] += n
	}
	for _, err := range driveErrs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	counts := map[string]int{}
	for _, o := range outcomes {
		counts[o.status]++
		if o.recovered {
			counts["resolved from recovery"]++
		}
	}
	t.Logf("outcomes %v", counts)

	conn, err := sqlx.Connect("postgres", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	// Quiet: leases and jobs of killed processes must be released by the
	// stack itself (the reaper, River's rescuer) within their horizons.
	quiet := waitQuiet(ctx, conn, drillRescueAfter+30*time.Second+30*time.Second)
	for _, problem := range quiet {
		t.Error(problem)
	}
	for _, problem := range checkRunInvariants(ctx, conn, runs) {
		t.Error(problem)
	}
	store := openDirStore(t, filepath.Join(s.DataDir, "blobs"))
	verified, problems := verifyDigests(ctx, conn, store)
	for _, problem := range problems {
		t.Error(problem)
	}
	t.Logf("verified digests: %v", verified)
	for _, problem := range checkAuditPairs(ctx, conn) {
		t.Error(problem)
	}
}

// waitForRunningAttempt returns once a phase attempt is running, or after
// limit (the drill goes on either way).
func waitForRunningAttempt(dbURL string, limit time.Duration) {
	conn, err := sqlx.Open("postgres", dbURL)
	if err != nil {
		return
	}
	defer conn.Close()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var running bool
		if conn.Get(&running, `SELECT EXISTS (SELECT 1 FROM run_attempts WHERE status = 'running')`) == nil && running {
			return
		}
	}
}

// jitter is a random duration in [lo, hi).
func jitter(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// restart brings a killed process (or PostgreSQL) back and waits until it
// serves.
func (s *Stack) restart(t *testing.T, name string, pg *devstack.Postgres) {
	t.Helper()
	switch name {
	case "postgres":
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := pg.Start(ctx); err != nil {
			t.Fatalf("restarting PostgreSQL after a crash: %v", err)
		}
	case "api":
		s.startProcess(t, "api", "cairn-api")
		waitFor(t, s.Client, s.APIURL+"/health")
	case "worker":
		s.StartWorker(t)
	default:
		s.startProcess(t, name, "cairn-"+name)
	}
}

// revive restarts every stack process that is no longer running and
// returns how many it found dead, by name.
func (s *Stack) revive(t *testing.T) map[string]int {
	t.Helper()
	dead := map[string]int{}
	for _, name := range []string{"api", "worker", "bff", "mcp"} {
		if syscall.Kill(s.PID(name), 0) == nil {
			continue
		}
		t.Logf("%s had exited; restarting it", name)
		dead[name]++
		s.restart(t, name, nil)
	}
	return dead
}

// privateCluster starts a PostgreSQL cluster of the test's own, durable as
// production runs it, with a migrated database "cairn"; the test may kill
// and restart it. It returns the cluster and the database's URL.
func privateCluster(t *testing.T) (*devstack.Postgres, string) {
	t.Helper()
	pg, dbURL := emptyCluster(t)
	migrateDatabase(t, dbURL)
	return pg, dbURL
}

// emptyCluster starts a durable PostgreSQL cluster of the test's own with
// an empty database "cairn", and returns it with the database's URL.
func emptyCluster(t *testing.T) (*devstack.Postgres, string) {
	t.Helper()
	port, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: the server runs as the postgres user when the tests
	// run as root, and must reach its directory through every parent.
	base, err := os.MkdirTemp("", "cairn-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	pg := &devstack.Postgres{Dir: filepath.Join(base, "data"), Port: port, User: "cairn", Password: devstack.RandomSecret(16),
		Durable: true}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := pg.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	if err := pg.CreateDatabase(ctx, "cairn"); err != nil {
		t.Fatal(err)
	}
	return pg, pg.URL("cairn")
}

// migrateDatabase runs the built cairn-api's migrations on a database.
func migrateDatabase(t *testing.T, dbURL string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir(t), "cairn-api"), "migrate")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "CAIRN_LOG_LEVEL=warn")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cairn-api migrate: %v\n%s", err, out)
	}
}

// patient makes a request and repeats it, with the same idempotency key,
// while the API cannot answer: the connection fails, or the answer is a
// 5xx (the API is down, or its database is). It gives up after two
// minutes. out receives the answer's data.
func (s *Stack) patient(method, path string, body []byte, out any, header ...string) (int, error) {
	var last error
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, _ := http.NewRequest(method, s.APIURL+path, rd)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := s.Client.Do(req)
		if err != nil {
			last = err
			time.Sleep(300 * time.Millisecond)
			continue
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			last = fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, answer)
			time.Sleep(300 * time.Millisecond)
			continue
		}
		if out != nil && resp.StatusCode < 300 {
			var env struct {
				Data json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(answer, &env); err != nil {
				return resp.StatusCode, fmt.Errorf("%s %s: %s", method, path, answer)
			}
			if err := json.Unmarshal(env.Data, out); err != nil {
				return resp.StatusCode, fmt.Errorf("%s %s: %s", method, path, answer)
			}
		}
		if resp.StatusCode >= 300 {
			return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, answer)
		}
		return resp.StatusCode, nil
	}
	return 0, fmt.Errorf("gave up after two minutes: %w", last)
}

// chaosRun uploads a configuration, creates a plan_and_apply run, approves
// its plan and follows it to its end; a run that lands in recovery is
// resolved (the current state verified) so the workspace can move on. It
// returns the run's ID, the status it ended in and whether it was resolved
// from recovery.
func (s *Stack) chaosRun(m member, wsID string, n int, logf func(string, ...any)) (string, string, bool, error) {
	// The provisioner keeps each apply open for a few seconds, so that
	// kills land in applies as well as in plans.
	config := fmt.Sprintf(`resource "terraform_data" "item" {
  count = 20
  input = { generation = %d, index = count.index }
}

resource "terraform_data" "slow" {
  input      = %d
  depends_on = [terraform_data.item]
  provisioner "local-exec" {
    command = "sleep 3"
  }
}
`, n, n)
	var cv struct{ ID string }
	hdr := append(m.mutate(uniqueKey("cfg")), "Content-Type", "application/gzip")
	if _, err := s.patient(http.MethodPost, "/v1/workspaces/"+wsID+"/configuration-versions",
		devstack.TarGz(map[string]string{"main.tf": config}), &cv, hdr...); err != nil {
		return "", "", false, fmt.Errorf("configuration: %w", err)
	}
	var r runView
	body, _ := json.Marshal(map[string]string{"workspace_id": wsID, "configuration_version_id": cv.ID, "kind": "plan_and_apply", "message": "chaos"})
	if _, err := s.patient(http.MethodPost, "/v1/runs", body, &r, m.mutate(uniqueKey("run"))...); err != nil {
		return "", "", false, fmt.Errorf("run: %w", err)
	}
	approveKey, recovered, seen := uniqueKey("approve"), false, ""
	deadline := time.Now().Add(8 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := s.patient(http.MethodGet, "/v1/runs/"+r.ID, nil, &r, m.cookie()...); err != nil {
			return r.ID, "", recovered, err
		}
		if r.Status != seen {
			seen = r.Status
			logf("run %s: %s", r.ID, r.Status)
		}
		switch r.Status {
		case "awaiting_approval":
			body, _ := json.Marshal(r.binding())
			if _, err := s.patient(http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", body, nil, m.mutate(approveKey)...); err != nil {
				return r.ID, "", recovered, fmt.Errorf("approve: %w", err)
			}
		case "recovery_required":
			if err := s.resolveRecovery(m, r.ID); err != nil {
				return r.ID, r.Status, recovered, err
			}
			recovered = true
		case "applied", "planned_and_finished", "errored", "canceled", "rejected", "expired", "recovered":
			return r.ID, r.Status, recovered, nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	return r.ID, r.Status, recovered, fmt.Errorf("run did not end within 8 minutes (%s, attempts %+v)", r.Status, r.Evidence.Attempts)
}

// resolveRecovery steps up and resolves a run in recovery with the
// workspace's current state verified, as shown in the run's review.
func (s *Stack) resolveRecovery(m member, runID string) error {
	var rec recoveryView
	if _, err := s.patient(http.MethodGet, "/v1/runs/"+runID, nil, &rec, m.cookie()...); err != nil {
		return err
	}
	if rec.Recovery == nil {
		return fmt.Errorf("run %s in recovery shows no recovery evidence", runID)
	}
	if _, err := s.patient(http.MethodPost, "/api/auth/reauthenticate",
		mustJSON(map[string]string{"password": "correct horse battery staple"}), nil, m.cookie()...); err != nil {
		return fmt.Errorf("step-up: %w", err)
	}
	body := mustJSON(map[string]any{"resolution": "current_state_verified",
		"current_state_version_id": rec.Recovery.CurrentStateVersionID, "current_state_digest": rec.Recovery.CurrentStateDigest,
		"reason": "crash drill: the current state was checked", "confirm_fence_advance": true})
	if _, err := s.patient(http.MethodPost, "/v1/runs/"+runID+"/actions/recover", body, nil, m.mutate(uniqueKey("recover"))...); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	return nil
}

// runTerminal lists the statuses a run never leaves.
var runTerminal = []string{"applied", "planned_and_finished", "errored", "rejected", "canceled", "expired", "recovered"}

// waitQuiet waits up to limit for what the stack must release on its own
// after a crash: capacity leases of ended attempts, attempts left running
// or queued, and River jobs left running by a killed worker (rescued) or
// waiting unserved. It returns what is still held at the limit.
func waitQuiet(ctx context.Context, conn *sqlx.DB, limit time.Duration) []string {
	deadline := time.Now().Add(limit)
	for {
		var problems []string
		var leases []string
		_ = conn.SelectContext(ctx, &leases, `SELECT l.id || ' (attempt ' || l.attempt_id || ', ' || a.status || ')'
			FROM capacity_leases l JOIN run_attempts a ON a.id = l.attempt_id WHERE l.released_at IS NULL`)
		if len(leases) > 0 {
			problems = append(problems, fmt.Sprintf("capacity leases still held: %v", leases))
		}
		var attempts []string
		_ = conn.SelectContext(ctx, &attempts, `SELECT a.id || ' (' || a.phase || ' ' || a.status || ', run ' || r.status || ')'
			FROM run_attempts a JOIN runs r ON r.id = a.run_id WHERE a.status IN ('queued', 'running')`)
		if len(attempts) > 0 {
			problems = append(problems, fmt.Sprintf("attempts still queued or running: %v", attempts))
		}
		// Periodic jobs run briefly all the time; a job counts as stuck
		// once it has been running, or available, for 10 s.
		var jobs []string
		_ = conn.SelectContext(ctx, &jobs, `SELECT kind || ' #' || id || ' ' || state FROM river_job
			WHERE (state = 'running' AND attempted_at < now() - interval '10 seconds')
			   OR (state = 'available' AND scheduled_at < now() - interval '10 seconds')`)
		if len(jobs) > 0 {
			problems = append(problems, fmt.Sprintf("River jobs stuck: %v", jobs))
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			return problems
		}
		time.Sleep(time.Second)
	}
}

// checkRunInvariants checks the runs, state versions and locks once the
// stack is quiet; want is the number of runs the drill created.
func checkRunInvariants(ctx context.Context, conn *sqlx.DB, want int) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	query := func(dest any, q string, args ...any) {
		if err := conn.SelectContext(ctx, dest, q, args...); err != nil {
			fail("%v in %s", err, q)
		}
	}
	// A retried request created nothing twice.
	var n int
	_ = conn.GetContext(ctx, &n, `SELECT count(*) FROM runs`)
	if n != want {
		fail("%d runs exist, the drill created %d", n, want)
	}
	_ = conn.GetContext(ctx, &n, `SELECT count(*) FROM configuration_versions WHERE status = 'uploaded'`)
	if n != want {
		fail("%d configuration versions were uploaded, the drill uploaded %d", n, want)
	}
	var open []string
	query(&open, `SELECT id || ' ' || status FROM runs WHERE NOT (status = ANY($1)) AND status <> 'recovery_required'`, pqArray(runTerminal))
	if len(open) > 0 {
		fail("runs neither ended nor in recovery: %v", open)
	}
	// State versions: numbered 1..k per workspace, serials growing with
	// the numbers, no serial published twice.
	var gaps []string
	query(&gaps, `SELECT workspace_id || ': ' || string_agg(number::text || '/' || serial::text, ' ' ORDER BY number)
		FROM state_versions WHERE status = 'finalized' GROUP BY workspace_id
		HAVING max(number) <> count(*) OR min(number) <> 1 OR count(DISTINCT number) <> count(*) OR count(DISTINCT serial) <> count(*)`)
	if len(gaps) > 0 {
		fail("state version numbers not contiguous or serials repeated (number/serial): %v", gaps)
	}
	var backwards []string
	query(&backwards, `SELECT a.id || ' -> ' || b.id FROM state_versions a JOIN state_versions b
		ON b.workspace_id = a.workspace_id AND b.number = a.number + 1 WHERE b.serial <= a.serial`)
	if len(backwards) > 0 {
		fail("a newer state version with a serial not above its predecessor's: %v", backwards)
	}
	// Every applied run published a state, and its review names its own.
	var unpublished []string
	query(&unpublished, `SELECT r.id FROM runs r WHERE r.status = 'applied' AND NOT EXISTS (
		SELECT 1 FROM state_versions v WHERE v.run_id = r.id AND v.status = 'finalized')`)
	if len(unpublished) > 0 {
		fail("applied runs without a finalized state version: %v", unpublished)
	}
	var foreign []string
	query(&foreign, `SELECT v.id FROM state_versions v WHERE v.status = 'finalized' AND v.run_id IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = v.run_id AND r.workspace_id = v.workspace_id)`)
	if len(foreign) > 0 {
		fail("state versions naming a run of another workspace or none: %v", foreign)
	}
	// Nothing an ended run held is still held.
	var locks []string
	query(&locks, `SELECT w.id || ' by ' || r.id || ' (' || r.status || ')' FROM workspaces w JOIN runs r ON r.id = w.locked_by_id
		WHERE w.locked_by_kind = 'run' AND r.status = ANY($1)`, pqArray(runTerminal))
	if len(locks) > 0 {
		fail("workspaces still locked by ended runs: %v", locks)
	}
	var tokens []string
	query(&tokens, `SELECT t.id || ' (run ' || r.status || ')' FROM run_tokens t JOIN runs r ON r.id = t.run_id
		WHERE t.revoked_at IS NULL AND t.expires_at > now() AND r.status = ANY($1)`, pqArray(runTerminal))
	if len(tokens) > 0 {
		fail("live run tokens of ended runs: %v", tokens)
	}
	var recoveries []string
	query(&recoveries, `SELECT c.id FROM run_recoveries c JOIN runs r ON r.id = c.run_id
		WHERE c.status = 'prepared' AND r.status = ANY($1)`, pqArray(runTerminal))
	if len(recoveries) > 0 {
		fail("recoveries still prepared for ended runs: %v", recoveries)
	}
	return problems
}

// pqArray passes a list of text as a PostgreSQL array literal.
func pqArray(list []string) string { return "{" + strings.Join(list, ",") + "}" }

// openDirStore opens a directory blob store sealed with the stack's
// master key.
func openDirStore(t *testing.T, dir string) *blob.Store {
	t.Helper()
	key, _ := base64.StdEncoding.DecodeString(stackMasterKey)
	sealer, err := seal.NewStreamSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	store, err := blob.OpenDir(dir, "", sealer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// verifyDigests reads every published object the database references —
// finalized state versions, run artifacts (plans, emergency states),
// uploaded configuration archives — and compares its SHA-256 with the
// recorded one. It returns how many of each it verified.
func verifyDigests(ctx context.Context, conn *sqlx.DB, store *blob.Store) (map[string]int, []string) {
	type object struct {
		Kind     string `db:"kind"`
		ID       string `db:"id"`
		Key      string `db:"blob_key"`
		Identity string `db:"identity"`
		SHA256   []byte `db:"sha256"`
	}
	var objects []object
	err := conn.SelectContext(ctx, &objects, `
		SELECT 'state_version' AS kind, id, blob_key, 'state/' || id AS identity, sha256 FROM state_versions WHERE status = 'finalized'
		UNION ALL
		SELECT 'run_artifact.' || kind, id, blob_key, 'cairn/run-artifact/' || organization_id || '/' || run_id || '/' || kind, sha256
		FROM run_artifacts
		UNION ALL
		SELECT 'configuration_version', id, blob_key, 'cairn/configuration-version/' || organization_id || '/' || id, sha256
		FROM configuration_versions WHERE status = 'uploaded'`)
	if err != nil {
		return nil, []string{fmt.Sprintf("listing published objects: %v", err)}
	}
	counts := map[string]int{}
	var problems []string
	for _, o := range objects {
		r, err := store.Open(ctx, o.Key, o.Identity)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %s: object %s: %v", o.Kind, o.ID, o.Key, err))
			continue
		}
		h := sha256.New()
		_, err = io.Copy(h, r)
		r.Close()
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %s: reading object %s: %v", o.Kind, o.ID, o.Key, err))
			continue
		}
		if !bytes.Equal(h.Sum(nil), o.SHA256) {
			problems = append(problems, fmt.Sprintf("%s %s: object %s does not match its recorded digest", o.Kind, o.ID, o.Key))
			continue
		}
		counts[o.Kind]++
	}
	return counts, problems
}

// checkAuditPairs checks that each mutation the drill makes committed with
// its audit event and each event with its mutation: a run and its
// run.created, an approval and its run.approved, a resolved recovery and
// its run.recovered, a state version and its state_version.created (and
// .finalized once finalized), an uploaded archive and its
// configuration_version.uploaded.
func checkAuditPairs(ctx context.Context, conn *sqlx.DB) []string {
	pairs := []struct{ what, query string }{
		{"runs without exactly one run.created", `SELECT r.id FROM runs r
			WHERE (SELECT count(*) FROM audit_events a WHERE a.action = 'run.created' AND a.target_id = r.id) <> 1`},
		{"approved runs without exactly one run.approved", `SELECT r.id FROM runs r WHERE r.decision_action = 'approved'
			AND (SELECT count(*) FROM audit_events a WHERE a.action = 'run.approved' AND a.target_id = r.id) <> 1`},
		{"run.approved events of runs not approved", `SELECT a.id FROM audit_events a WHERE a.action = 'run.approved'
			AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = a.target_id AND r.decision_action = 'approved')`},
		{"recovered runs without exactly one run.recovered", `SELECT r.id FROM runs r WHERE r.status = 'recovered'
			AND (SELECT count(*) FROM audit_events a WHERE a.action = 'run.recovered' AND a.target_id = r.id) <> 1`},
		{"run.recovered events of runs not recovered", `SELECT a.id FROM audit_events a WHERE a.action = 'run.recovered'
			AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = a.target_id AND r.status = 'recovered')`},
		{"run events naming no run", `SELECT a.id || ' ' || a.action FROM audit_events a WHERE a.target_type = 'run'
			AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = a.target_id)`},
		{"state versions without exactly one state_version.created", `SELECT v.id FROM state_versions v
			WHERE (SELECT count(*) FROM audit_events a WHERE a.action = 'state_version.created' AND a.target_id = v.id) <> 1`},
		{"finalized state versions without exactly one state_version.finalized", `SELECT v.id FROM state_versions v
			WHERE v.status = 'finalized'
			AND (SELECT count(*) FROM audit_events a WHERE a.action = 'state_version.finalized' AND a.target_id = v.id) <> 1`},
		{"state_version events naming no state version (or one not finalized)", `SELECT a.id || ' ' || a.action FROM audit_events a
			WHERE a.action LIKE 'state_version.%' AND NOT EXISTS (SELECT 1 FROM state_versions v WHERE v.id = a.target_id
				AND (a.action <> 'state_version.finalized' OR v.status = 'finalized'))`},
		{"uploaded configuration versions without exactly one configuration_version.uploaded", `SELECT c.id FROM configuration_versions c
			WHERE c.status = 'uploaded'
			AND (SELECT count(*) FROM audit_events a WHERE a.action = 'configuration_version.uploaded' AND a.target_id = c.id) <> 1`},
		{"configuration_version.uploaded events of archives not uploaded", `SELECT a.id FROM audit_events a
			WHERE a.action = 'configuration_version.uploaded'
			AND NOT EXISTS (SELECT 1 FROM configuration_versions c WHERE c.id = a.target_id AND c.status = 'uploaded')`},
	}
	var problems []string
	for _, p := range pairs {
		var ids []string
		if err := conn.SelectContext(ctx, &ids, p.query); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", p.what, err))
			continue
		}
		if len(ids) > 0 {
			problems = append(problems, fmt.Sprintf("%s: %v", p.what, ids))
		}
	}
	return problems
}
