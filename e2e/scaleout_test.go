package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"

	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/blobtest"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/sweep"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// loadBalancer is a small TLS reverse proxy in front of API replicas: each
// request goes to the next replica that accepts connections, as a load
// balancer with health checks would send it.
type loadBalancer struct {
	backends []string // host:port
	next     atomic.Uint64
	served   sync.Map // backend -> *atomic.Int64
	srv      *http.Server
	// cut, when set, picks responses the proxy cuts off halfway through
	// their body, as a replica that dies while it answers does.
	cut atomic.Pointer[func(*http.Request) bool]
}

func startLoadBalancer(t *testing.T, files *devstack.TLSFiles, port int, backends ...string) *loadBalancer {
	t.Helper()
	lb := &loadBalancer{backends: backends}
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(ca)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			backend := lb.pick()
			pr.SetURL(&url.URL{Scheme: "https", Host: backend})
			pr.Out.Host = pr.In.Host
			n, _ := lb.served.LoadOrStore(backend, &atomic.Int64{})
			n.(*atomic.Int64).Add(1)
		},
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}, MaxIdleConnsPerHost: 64,
			DialContext: lb.dial},
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if cut := lb.cut.Load(); cut != nil && (*cut)(resp.Request) {
				resp.Body = &cutBody{ReadCloser: resp.Body, left: max(resp.ContentLength/2, 1)}
			}
			return nil
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	lb.srv = &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = lb.srv.ServeTLS(ln, files.Cert, files.Key) }()
	t.Cleanup(func() { _ = lb.srv.Close() })
	return lb
}

// cutBody ends in an error after its first left bytes: the proxy then
// drops the client's connection mid-body.
type cutBody struct {
	io.ReadCloser
	left int64
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errors.New("the replica died mid-response")
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// pick returns the next backend, round robin, skipping any that refuses a
// connection (a killed replica).
func (lb *loadBalancer) pick() string {
	start := lb.next.Add(1)
	for i := range uint64(len(lb.backends)) {
		b := lb.backends[(start+i)%uint64(len(lb.backends))]
		if c, err := net.DialTimeout("tcp", b, 200*time.Millisecond); err == nil {
			c.Close()
			return b
		}
	}
	return lb.backends[start%uint64(len(lb.backends))]
}

// dial connects to the chosen backend and, when it refuses, to the next
// one that accepts: a replica can die between pick's check and the
// request's own connection, and a load balancer redispatches a request
// that never reached a server (nginx's proxy_next_upstream error, HAProxy's
// redispatch). A request cut off after it reached a replica is not retried.
func (lb *loadBalancer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err == nil {
		return c, nil
	}
	for _, b := range lb.backends {
		if b == addr {
			continue
		}
		if c, other := d.DialContext(ctx, network, b); other == nil {
			return c, nil
		}
	}
	return nil, err
}

// killProcess SIGKILLs one of the stack's processes with its process group
// and waits until it is gone.
func (s *Stack) killProcess(t *testing.T, name string) {
	t.Helper()
	s.mu.Lock()
	cmd := s.procs[name]
	s.mu.Unlock()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(cmd.Process.Pid, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
}

// retrying makes a request through the load balancer, repeating it (with
// the same idempotency key) while the answer is a proxy's 502 or 503 or the
// connection fails: what a client sees for the request in flight when a
// replica dies.
func (s *Stack) retrying(method, path string, body []byte, out any, header ...string) (int, error) {
	var last error
	for range 20 {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, _ := http.NewRequest(method, s.APIURL+path, rd)
		if body != nil && req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := s.Client.Do(req)
		if err != nil {
			last = err
			time.Sleep(250 * time.Millisecond)
			continue
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable {
			last = fmt.Errorf("%s %s: %d", method, path, resp.StatusCode)
			time.Sleep(250 * time.Millisecond)
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
		return resp.StatusCode, nil
	}
	return 0, last
}

// driveRun uploads a configuration, creates a plan_and_apply run, approves
// its plan and waits for it to end; it returns the run ID and its final
// status.
func (s *Stack) driveRun(m member, wsID string, n int, logf func(string, ...any)) (string, string, error) {
	config := fmt.Sprintf(`resource "terraform_data" "item" {
  count = 40
  input = { generation = %d, index = count.index }
}
`, n)
	var cv struct{ ID string }
	hdr := append(m.mutate(uniqueKey("cfg")), "Content-Type", "application/gzip")
	if st, err := s.retrying(http.MethodPost, "/v1/workspaces/"+wsID+"/configuration-versions",
		devstack.TarGz(map[string]string{"main.tf": config}), &cv, hdr...); err != nil || st != http.StatusCreated {
		return "", "", fmt.Errorf("configuration: %d %v", st, err)
	}
	var r runView
	body, _ := json.Marshal(map[string]string{"workspace_id": wsID, "configuration_version_id": cv.ID, "kind": "plan_and_apply", "message": "scale"})
	if st, err := s.retrying(http.MethodPost, "/v1/runs", body, &r, m.mutate(uniqueKey("run"))...); err != nil || st != http.StatusCreated {
		return "", "", fmt.Errorf("run: %d %v", st, err)
	}
	approved := false
	seen := ""
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		if st, err := s.retrying(http.MethodGet, "/v1/runs/"+r.ID, nil, &r, m.cookie()...); err != nil || st != http.StatusOK {
			return r.ID, "", fmt.Errorf("reading run %s: %d %v", r.ID, st, err)
		}
		if r.Status != seen {
			seen = r.Status
			logf("run %s: %s", r.ID, r.Status)
		}
		switch r.Status {
		case "awaiting_approval":
			if !approved {
				body, _ := json.Marshal(r.binding())
				if st, err := s.retrying(http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", body, nil, m.mutate(uniqueKey("approve"))...); err != nil || st != http.StatusOK {
					return r.ID, "", fmt.Errorf("approve %s: %d %v", r.ID, st, err)
				}
				approved = true
			}
		case "applied", "planned_and_finished", "errored", "recovery_required", "canceled", "rejected", "expired":
			return r.ID, r.Status, nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	return r.ID, r.Status, errors.New("run did not end within 10 minutes")
}

// TestScaleOutSurvivesKilledNodes is the multi-node installation on one
// machine: two cairn-api replicas behind a load balancer, three workers,
// one PostgreSQL and a real S3 server (versitygw). Runs across several
// workspaces go through the load balancer; meanwhile the worker running a
// plan and then an API replica are killed with SIGKILL and restarted.
// A remote plan from the tofu CLI goes through the load balancer too.
// Every run must end as the spec says (a killed plan is retried by another
// worker; an apply is never run twice), the runs spread over the workers,
// every current state's digest matches its object, active capacity leases
// stay within the ceiling, and after the orphan sweep no object in the
// bucket is unreferenced.
//
// CAIRN_E2E_SCALE=workspaces×runs sizes it (default 10x3, the 30
// runs across 10 workspaces).
func TestScaleOutSurvivesKilledNodes(t *testing.T) {
	t.Parallel()
	workspaces, perWorkspace := 10, 3
	if v := os.Getenv("CAIRN_E2E_SCALE"); v != "" {
		if _, err := fmt.Sscanf(v, "%dx%d", &workspaces, &perWorkspace); err != nil {
			t.Fatalf("CAIRN_E2E_SCALE=%q is not WxR", v)
		}
	}
	srv := blobtest.S3(t)
	_, storeURL := srv.Bucket(t)
	lbPort, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	api2Port, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := runsStack(t, "CAIRN_BLOB_URL="+storeURL, "CAIRN_S3_ACCESS_KEY_ID="+srv.Creds.AccessKeyID,
		"CAIRN_S3_SECRET_ACCESS_KEY="+srv.Creds.SecretAccessKey,
		"CAIRN_PUBLIC_URL=https://localhost:"+strconv.Itoa(lbPort), "CAIRN_ATTEMPT_HEARTBEAT_TIMEOUT=5s")
	api1 := s.APIHost
	api2 := "localhost:" + strconv.Itoa(api2Port)
	s.startProcess(t, "api2", "cairn-api", "CAIRN_API_ADDR=127.0.0.1:"+strconv.Itoa(api2Port))
	waitFor(t, s.Client, "https://"+api2+"/health")
	workerDirs := map[string]string{"worker": s.DataDir}
	for _, name := range []string{"worker2", "worker3"} {
		workerDirs[name] = t.TempDir()
		s.startProcess(t, name, "cairn-worker", "CAIRN_DATA_DIR="+workerDirs[name], "CAIRN_WORKER_HEALTH_ADDR=off")
	}
	lb := startLoadBalancer(t, s.TLS, lbPort, api1, api2)
	s.APIURL, s.APIHost = "https://localhost:"+strconv.Itoa(lbPort), "localhost:"+strconv.Itoa(lbPort)
	waitFor(t, s.Client, s.APIURL+"/health")

	conn, err := sqlx.Connect("postgres", s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m := s.newMember(t, "scale")

	// Active leases, sampled throughout.
	var maxLeases atomic.Int64
	sampling, stopSampling := context.WithCancel(context.Background())
	defer stopSampling()
	go func() {
		for sampling.Err() == nil {
			var n int64
			if conn.Get(&n, `SELECT coalesce(max(c), 0) FROM (SELECT count(*) c FROM capacity_leases WHERE released_at IS NULL GROUP BY region) t`) == nil {
				for cur := maxLeases.Load(); n > cur && !maxLeases.CompareAndSwap(cur, n); cur = maxLeases.Load() {
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	ids := make([]string, workspaces)
	for i := range ids {
		ids[i] = s.createWorkspace(t, m, fmt.Sprintf("scale-%02d", i), "us")
	}
	type outcome struct{ runID, status string }
	var mu sync.Mutex
	var outcomes []outcome
	var wg sync.WaitGroup
	for i, wsID := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range perWorkspace {
				runID, st, err := s.driveRun(m, wsID, i*100+n, t.Logf)
				if err != nil {
					t.Errorf("workspace %d run %d (%s): %v", i, n, runID, err)
					return
				}
				mu.Lock()
				outcomes = append(outcomes, outcome{runID, st})
				mu.Unlock()
			}
		}()
	}

	// Chaos: the worker running a plan dies, then an API replica.
	killedWorker, killedAttempt := "", ""
	deadline := time.Now().Add(5 * time.Minute)
	for killedWorker == "" && time.Now().Before(deadline) {
		var running []struct {
			ID       string `db:"id"`
			WorkerID string `db:"worker_id"`
		}
		_ = conn.Select(&running, `SELECT id, worker_id FROM run_attempts WHERE phase = 'plan' AND status = 'running' AND worker_id IS NOT NULL`)
		for _, a := range running {
			for _, name := range []string{"worker", "worker2", "worker3"} {
				if strings.HasSuffix(a.WorkerID, "/"+strconv.Itoa(s.PID(name))) {
					killedWorker, killedAttempt = name, a.ID
				}
			}
		}
		if killedWorker == "" {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if killedWorker == "" {
		t.Fatal("no plan was seen running on a worker")
	}
	s.killProcess(t, killedWorker)
	t.Logf("killed %s during plan attempt %s", killedWorker, killedAttempt)
	time.Sleep(2 * time.Second)
	extra := []string{"CAIRN_DATA_DIR=" + workerDirs[killedWorker]}
	if killedWorker != "worker" {
		extra = append(extra, "CAIRN_WORKER_HEALTH_ADDR=off")
	}
	s.startProcess(t, killedWorker, "cairn-worker", extra...)

	time.Sleep(3 * time.Second)
	s.killProcess(t, "api")
	t.Log("killed api replica 1")
	time.Sleep(3 * time.Second)
	s.startProcess(t, "api", "cairn-api")
	waitFor(t, s.Client, "https://"+api1+"/health")

	// The CLI through the load balancer too: a remote plan streams its log
	// back from whichever replica answers each poll.
	tf := newTofuDir(t, s, m)
	if err := os.WriteFile(filepath.Join(tf.dir, "main.tf"), []byte(fmt.Sprintf(remoteConfig, s.APIHost, m.slug)), 0o644); err != nil {
		t.Fatal(err)
	}
	tf.run(t, "init")
	var remote struct{ ID string }
	if st, err := s.retrying(http.MethodPatch, "/api/v2/organizations/"+m.slug+"/workspaces/remote",
		[]byte(`{"data":{"type":"workspaces","attributes":{"execution-mode":"remote"}}}`), &remote,
		"Authorization", "Bearer "+m.token, "Content-Type", "application/vnd.api+json"); err != nil || st != http.StatusOK {
		t.Fatalf("switching to remote execution: %d %v", st, err)
	}
	s.setVariable(t, m, remote.ID, "n", "2", false, true)
	s.setVariable(t, m, remote.ID, "api_key", canary, true, false)
	if out := tf.run(t, "plan"); !strings.Contains(out, "Plan: 3 to add, 0 to change, 0 to destroy.") || strings.Contains(out, canary) {
		t.Errorf("remote plan through the load balancer:\n%s", out)
	}

	wg.Wait()
	stopSampling()
	if t.Failed() {
		return
	}

	// Every run ended as the spec says.
	if len(outcomes) != workspaces*perWorkspace {
		t.Fatalf("%d runs ended, want %d", len(outcomes), workspaces*perWorkspace)
	}
	var killedRun string
	if err := conn.Get(&killedRun, `SELECT run_id FROM run_attempts WHERE id = $1`, killedAttempt); err != nil {
		t.Fatal(err)
	}
	for _, o := range outcomes {
		switch o.status {
		case "applied":
		case "recovery_required":
			// Only an apply the kill interrupted may go to recovery.
			var onKilled int
			_ = conn.Get(&onKilled, `SELECT count(*) FROM run_attempts WHERE run_id = $1 AND phase = 'apply' AND status <> 'succeeded'`, o.runID)
			if onKilled == 0 {
				t.Errorf("run %s in recovery without an interrupted apply", o.runID)
			}
		default:
			t.Errorf("run %s ended %s", o.runID, o.status)
		}
	}
	var planAttempts int
	if err := conn.Get(&planAttempts, `SELECT count(*) FROM run_attempts WHERE run_id = $1 AND phase = 'plan'`, killedRun); err != nil || planAttempts < 2 {
		t.Errorf("the killed plan's run has %d plan attempts (%v); it should have been retried", planAttempts, err)
	}
	var twiceApplied []string
	if err := conn.Select(&twiceApplied, `SELECT run_id FROM run_attempts WHERE phase = 'apply' GROUP BY run_id HAVING count(*) > 1`); err != nil || len(twiceApplied) > 0 {
		t.Errorf("applies run more than once: %v %v", twiceApplied, err)
	}
	var workers int
	if err := conn.Get(&workers, `SELECT count(DISTINCT worker_id) FROM run_attempts WHERE worker_id IS NOT NULL`); err != nil || workers < 3 {
		t.Errorf("attempts ran on %d workers (%v), want them spread over at least 3 (counting the restart)", workers, err)
	}
	served := map[string]int64{}
	lb.served.Range(func(k, v any) bool { served[k.(string)] = v.(*atomic.Int64).Load(); return true })
	if served[api1] == 0 || served[api2] == 0 {
		t.Errorf("the load balancer did not use both replicas: %v", served)
	}
	control := launch.Default()
	if ceiling := int64(launch.SandboxCeiling(&control, "us")); ceiling > 0 && maxLeases.Load() > ceiling {
		t.Errorf("%d active leases in a region, over its ceiling %d", maxLeases.Load(), ceiling)
	}

	// Every state version's object matches its recorded digest.
	versions := 0
	for _, wsID := range ids {
		var shown []struct {
			ID     string `json:"id"`
			SHA256 string `json:"sha256"`
		}
		s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+wsID+"/state-versions?limit=100", nil, &shown, m.cookie()...)
		if len(shown) < perWorkspace {
			t.Errorf("workspace %s has %d state versions after %d applies", wsID, len(shown), perWorkspace)
		}
		for _, v := range shown {
			st, raw := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/state-versions/"+v.ID+"/download", nil, "Authorization", "Bearer "+m.token)
			sum := sha256.Sum256(raw)
			if st != http.StatusOK || (hex.EncodeToString(sum[:]) != v.SHA256 && base64.StdEncoding.EncodeToString(sum[:]) != v.SHA256) {
				t.Errorf("state version %s: %d, digest %s does not match its object", v.ID, st, v.SHA256)
			}
			versions++
		}
	}

	// After the sweep (age threshold lowered), nothing in the bucket is
	// unreferenced.
	key, _ := base64.StdEncoding.DecodeString("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	sealer, err := seal.NewStreamSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	store, err := blob.OpenURL(context.Background(), storeURL, "", blob.S3Credentials{AccessKeyID: srv.Creds.AccessKeyID,
		SecretAccessKey: srv.Creds.SecretAccessKey}, sealer)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sweeper := sweep.NewService(conn, store, sweep.Options{MinAge: time.Nanosecond})
	first, err := sweeper.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	second, err := sweeper.Sweep(context.Background())
	if err != nil || second.Deleted != 0 || second.Kept != second.Listed-second.Foreign {
		t.Errorf("after the sweep: %+v %v", second, err)
	}
	t.Logf("%d runs over %d workspaces, %d state versions verified; requests per replica %v; max active leases %d; sweep removed %d of %d objects",
		len(outcomes), workspaces, versions, served, maxLeases.Load(), first.Deleted, first.Listed)
}

// TestPlanIsRetriedWhenTheAPICutsItOff cuts off, halfway through its body,
// the API's answer to one of the workspace reads a plan's tofu makes: the
// first during `tofu init`, then the first during `tofu plan`, as a
// replica dying under the request does. The attempt ends classified
// connection_lost and the plan is retried as a new attempt, which
// succeeds; a plan that fails for its own reasons is not retried.
func TestPlanIsRetriedWhenTheAPICutsItOff(t *testing.T) {
	t.Parallel()
	lbPort, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := runsStack(t, "CAIRN_PUBLIC_URL=https://localhost:"+strconv.Itoa(lbPort))
	lb := startLoadBalancer(t, s.TLS, lbPort, s.APIHost)
	m := s.newMember(t, "cutoff")
	config := map[string]string{"main.tf": `resource "terraform_data" "item" {
  count = 5
  input = count.index
}`}
	for nth, during := range []string{"init", "plan"} {
		name := "cutoff-" + during
		wsID := s.createWorkspace(t, m, name, "us")
		cfg := s.uploadConfiguration(t, m, wsID, config)
		var reads atomic.Int64
		cut := func(r *http.Request) bool {
			return strings.HasSuffix(r.URL.Path, "/workspaces/"+name) && reads.Add(1) == int64(nth+1)
		}
		lb.cut.Store(&cut)
		_, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
		r = s.waitRun(t, m, r.ID, 2*time.Minute, status("awaiting_approval", "errored"))
		var attempts []string
		for _, a := range r.Evidence.Attempts {
			attempts = append(attempts, a.Phase+"/"+a.Status+"/"+deref(a.TerminalClassification))
		}
		if r.Status != "awaiting_approval" || strings.Join(attempts, " ") != "plan/failed/connection_lost plan/succeeded/succeeded" {
			t.Errorf("cut off during %s: %s (%v), attempts %v", during, r.Status, deref(r.TerminalReason), attempts)
			continue
		}
		// The cut hit the command it was meant for: a plan cut off in
		// init never ran tofu plan.
		if _, planned := r.Evidence.Attempts[0].TimingsMS["tofu_plan"]; planned != (during == "plan") {
			t.Errorf("cut off during %s, but the failed attempt's timings are %v", during, r.Evidence.Attempts[0].TimingsMS)
		}
	}
	lb.cut.Store(nil)

	wsID := s.createWorkspace(t, m, "cutoff-broken", "us")
	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": `resource "terraform_data" "item" {
  input = jsondecode("{\"unfinished\":")
}`})
	_, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
	r = s.waitRun(t, m, r.ID, 2*time.Minute, status("awaiting_approval", "errored"))
	if r.Status != "errored" || len(r.Evidence.Attempts) != 1 || deref(r.Evidence.Attempts[0].TerminalClassification) != "plan_failed" {
		t.Errorf("a plan failing on its own: %s, attempts %+v", r.Status, r.Evidence.Attempts)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
