// Command cairn-bench measures Cairn against baselines taken in the same run,
// so the numbers it reports are ratios that survive a noisy machine. It
// starts the real cairn-api binary against a fresh database cloned from the
// migrated template of the throwaway cluster that `make bench` starts.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/lib/pq"

	"github.com/cairnhq/cairn/e2e/devstack"
)

var (
	duration    = flag.Duration("duration", 5*time.Second, "how long each load phase runs")
	concurrency = flag.Int("concurrency", 32, "concurrent clients")
	only        = flag.String("only", "", "run only these phases, comma-separated (see phases in main.go)")
	logMiB      = flag.Int("log-mib", 24, "size of the large run log the logs phase reads")
	rounds      = flag.Int("rounds", 5, "rounds of each tofu command (medians are reported)")
	size        = flag.Float64("size", 1, "factor on the data phases seed (state bytes, people, teams, versions, resources); the smoke test shrinks it")
)

// phase is one part of the bench. deadline is what it may take at the
// default -duration and -rounds on a slow two-core machine; a phase that
// overruns it ends the bench with a non-zero exit naming the phase, so a
// hang (a plan waiting on a worker that does not exist) cannot pass for a
// slow number.
type phase struct {
	name     string
	deadline time.Duration
	run      func(ctx context.Context, b *bench) error
}

// phases run in this order. A new phase is one line here and a function
// func(ctx context.Context, b *bench) error: run external commands with
// tool(ctx, ...) so the deadline kills them, start processes with
// startAPI/startWorker (tracked, so a phase that overruns leaves none
// behind), and scale what it seeds with sized(n).
var phases = []phase{
	// First, while nothing else of the harness loads the machine.
	{"idle", 4 * time.Minute, func(ctx context.Context, b *bench) error { return benchIdle(ctx, b.admin) }},
	{"health", 2 * time.Minute, benchHealth},
	{"mutation", 2 * time.Minute, benchMutation},
	{"replay", 2 * time.Minute, benchReplay},
	{"list", 2 * time.Minute, benchList},
	{"agents", 3 * time.Minute, benchAgentsPhase},
	{"live", 4 * time.Minute, benchLivePhase},
	{"teams", 6 * time.Minute, benchTeamsPhase},
	{"varsets", 5 * time.Minute, benchVarsetsPhase},
	{"scim", 8 * time.Minute, benchSCIMPhase},
	{"replicas", 4 * time.Minute, benchReplicasPhase},
	{"logs", 5 * time.Minute, benchLogsPhase},
	{"state", 3 * time.Minute, benchStatePhase},
	{"runs", 10 * time.Minute, benchRunsPhase},
	{"providers", 5 * time.Minute, benchProvidersPhase},
	{"codehost", 8 * time.Minute, benchCodeHostPhase},
	{"credentials", 5 * time.Minute, benchCredentialsPhase},
	{"dashboard", 8 * time.Minute, benchDashboardPhase},
	{"policy", 10 * time.Minute, benchPolicyPhase},
	{"statemode", 10 * time.Minute, benchStateModePhase},
	{"registry", 8 * time.Minute, benchRegistryPhase},
	{"scale", 25 * time.Minute, func(ctx context.Context, b *bench) error { return benchGrowth(ctx, b.dbURL) }},
	{"sso", 4 * time.Minute, benchSSOPhase},
	{"concurrency", 30 * time.Minute, func(ctx context.Context, b *bench) error { return benchConcurrency(ctx, b.admin) }},
	{"signin", 3 * time.Minute, benchSignIn},
}

// phaseAliases are older names -only still takes.
var phaseAliases = map[string]string{"tofu": "statemode"}

// selected returns the phases -only names, in table order, or an error
// naming what is not a phase (a typo must not run an empty bench).
func selected(list string) ([]phase, error) {
	if strings.TrimSpace(list) == "" {
		return phases, nil
	}
	want := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if alias, ok := phaseAliases[name]; ok {
			name = alias
		}
		if name != "" {
			want[name] = true
		}
	}
	var out []phase
	for _, p := range phases {
		if want[p.name] {
			out = append(out, p)
			delete(want, p.name)
		}
	}
	if len(want) > 0 {
		var unknown, known []string
		for name := range want {
			unknown = append(unknown, name)
		}
		for _, p := range phases {
			known = append(known, p.name)
		}
		sort.Strings(unknown)
		return nil, fmt.Errorf("no such phase %s (phases: %s)", strings.Join(unknown, ", "), strings.Join(known, ","))
	}
	return out, nil
}

// sized scales a seed size by -size, never below one.
func sized(n int) int { return max(1, int(float64(n)**size)) }

// deadlineFor grows a phase's deadline in proportion when -duration or
// -rounds is raised above its default, since both lengthen every phase.
func deadlineFor(p phase) time.Duration {
	f := max(1, float64(*duration)/float64(5*time.Second), float64(*rounds)/5)
	return time.Duration(float64(p.deadline) * f)
}

func main() {
	flag.Parse()
	err := run()
	// Whatever a failed or overrunning phase left running goes with it.
	stopChildren()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cairn-bench:", err)
		os.Exit(1)
	}
}

// result is one measured phase.
type result struct {
	name     string
	requests int
	errors   int64
	elapsed  time.Duration
	p50, p99 time.Duration
}

func (r result) rps() float64 { return float64(r.requests) / r.elapsed.Seconds() }

// load runs fn from n goroutines for d and collects latencies of successful
// calls. fn returns false for a failed call.
func load(name string, n int, d time.Duration, fn func(worker, i int) bool) result {
	var (
		mu        sync.Mutex
		latencies []time.Duration
		failures  atomic.Int64
		wg        sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []time.Duration
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				if fn(w, i) {
					local = append(local, time.Since(t0))
				} else {
					failures.Add(1)
				}
			}
			mu.Lock()
			latencies = append(latencies, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(float64(len(latencies))*p))]
	}
	return result{name: name, requests: len(latencies), errors: failures.Load(), elapsed: elapsed, p50: pct(0.50), p99: pct(0.99)}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func report(r, baseline result, target string) {
	fmt.Printf("%-44s %9.0f req/s  p50 %9s  p99 %9s  errors %d", r.name, r.rps(), ms(r.p50), ms(r.p99), r.errors)
	if baseline.requests > 0 {
		fmt.Printf("  | vs %s: p50 x%.2f, p99 x%.2f, throughput x%.2f", baseline.name,
			float64(r.p50)/float64(baseline.p50), float64(r.p99)/float64(baseline.p99), r.rps()/baseline.rps())
	}
	if target != "" {
		fmt.Printf("  [target %s]", target)
	}
	fmt.Println()
}

// bench is what every phase starts from: the harness's first cairn-api on
// a fresh database, the bench organization's owner with a project of 50
// workspaces, and the baselines some phases share, measured on first use.
type bench struct {
	admin        string // the throwaway cluster's administrative URL, for phases that make their own databases
	client       *http.Client
	api          *apiProcess
	apiURL       string
	dbURL        string
	baseURL      string // an empty net/http handler in this process
	session      string // bench@example.com, owner of the organization "bench"
	projectID    string
	workspaceIDs []string

	httpBaseline, dbBaseline, sessionList *result
	userToken                             string
}

func run() error {
	admin := os.Getenv("CAIRN_TEST_DATABASE_URL")
	if admin == "" {
		return fmt.Errorf("CAIRN_TEST_DATABASE_URL is not set: run `make bench`")
	}
	todo, err := selected(*only)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dbURL, err := freshDatabase(admin)
	if err != nil {
		return err
	}
	api, err := startAPI(dbURL, nil)
	if err != nil {
		return err
	}
	defer api.Stop()
	b := &bench{admin: admin, api: api, apiURL: api.URL, dbURL: dbURL,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency * 2, MaxIdleConns: *concurrency * 2}, Timeout: 30 * time.Second}}
	fmt.Printf("cairn-bench: %d concurrent clients, %s per phase, %d CPUs\n\n", *concurrency, *duration, numCPU())
	baseURL, stopBase := startBaseline()
	defer stopBase()
	b.baseURL = baseURL
	if err := b.setUp(); err != nil {
		return fmt.Errorf("setting up: %w", err)
	}
	for _, p := range todo {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted before phase %s", p.name)
		}
		if err := runPhase(ctx, b, p); err != nil {
			return err
		}
	}
	return nil
}

// abandonAfter is how long a phase that ignores its context may run past
// its deadline (or an interrupt) before the bench gives up on it.
var abandonAfter = 15 * time.Second

// runPhase runs p under its deadline. A phase that honours its context
// returns when the deadline passes; one that does not is abandoned a
// little later, and main stops every process it started.
func runPhase(parent context.Context, b *bench, p phase) error {
	limit := deadlineFor(p)
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, b) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		select {
		case err = <-done:
		case <-time.After(abandonAfter):
			if parent.Err() != nil {
				return fmt.Errorf("phase %s interrupted and did not stop: abandoned", p.name)
			}
			return fmt.Errorf("phase %s exceeded its deadline of %s and did not stop: abandoned", p.name, limit)
		}
	}
	switch {
	case err != nil && parent.Err() != nil:
		return fmt.Errorf("phase %s interrupted: %w", p.name, err)
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("phase %s exceeded its deadline of %s: %w", p.name, limit, err)
	case err != nil:
		return fmt.Errorf("phase %s failed after %s: %w", p.name, time.Since(start).Round(time.Millisecond), err)
	case ctx.Err() != nil && parent.Err() == nil:
		// Finished, but only after its deadline: still a failure, or a
		// phase that ignores its context would pass however long it took.
		return fmt.Errorf("phase %s exceeded its deadline of %s (took %s)", p.name, limit, time.Since(start).Round(time.Millisecond))
	}
	fmt.Printf("-- phase %s done in %s (deadline %s)\n\n", p.name, time.Since(start).Round(time.Millisecond), limit)
	return nil
}

// setUp opens the launch gate and creates the bench organization, its
// owner, a project and 50 workspaces.
func (b *bench) setUp() error {
	// A fresh installation's gate is closed: organization-wide mutations
	// such as creating projects fail closed until it opens.
	if err := devstack.OpenPublicGate(b.api.Client, b.api.URL, benchOperatorToken, "bench-open-gate"); err != nil {
		return err
	}
	var err error
	if b.session, err = signUp(b.client, b.apiURL, "bench@example.com", true); err != nil {
		return err
	}
	if status := call(b.client, http.MethodPost, b.apiURL+"/v1/projects", b.session, map[string]string{"name": "bench"},
		map[string]any{"Idempotency-Key": "bench-project"}, &b.projectID); status != http.StatusCreated {
		return fmt.Errorf("creating project: %d", status)
	}
	for i := range 50 {
		var wsID string
		if status := call(b.client, http.MethodPost, b.apiURL+"/v1/workspaces", b.session, map[string]any{"project_id": b.projectID,
			"name": fmt.Sprintf("ws-%d", i), "execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}},
			map[string]any{"Idempotency-Key": fmt.Sprintf("bench-ws-%d", i)}, &wsID); status != http.StatusCreated {
			return fmt.Errorf("creating workspace: %d", status)
		}
		b.workspaceIDs = append(b.workspaceIDs, wsID)
	}
	return nil
}

// call performs one request; when into is non-nil it receives data.id.
func call(c *http.Client, method, url, token string, body any, headers map[string]any, into *string) int {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Cookie", "__Secure-identity.session_token="+token)
	}
	for k, v := range headers {
		req.Header.Set(k, fmt.Sprint(v))
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if into != nil {
		var env struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(raw, &env)
		*into = env.Data.ID
	}
	return resp.StatusCode
}

func signUp(c *http.Client, apiURL, email string, withOrg bool) (string, error) {
	raw, _ := json.Marshal(map[string]string{"email": email, "password": "correct horse battery staple", "name": "Bench"})
	resp, err := c.Post(apiURL+"/api/auth/sign-up/email", "application/json", bytes.NewReader(raw))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Token string `json:"token"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Data.Token == "" {
		return "", fmt.Errorf("sign-up failed: %d", resp.StatusCode)
	}
	if withOrg {
		if status := call(c, http.MethodPost, apiURL+"/api/auth/organization/create", out.Data.Token,
			map[string]string{"name": "Bench", "slug": "bench"}, nil, nil); status != http.StatusOK {
			return "", fmt.Errorf("creating organization: %d", status)
		}
	}
	return out.Data.Token, nil
}

func startBaseline() (string, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }
}

func freshDatabase(admin string) (string, error) {
	conn, err := sql.Open("postgres", admin)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	name := fmt.Sprintf("bench_%d", time.Now().UnixNano())
	template := os.Getenv("CAIRN_TEST_TEMPLATE_DB")
	if template == "" {
		template = "cairn_template"
	}
	if _, err := conn.Exec(`CREATE DATABASE ` + name + ` TEMPLATE ` + template); err != nil {
		return "", fmt.Errorf("creating benchmark database: %w", err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// apiProcess is a running cairn-api.
type apiProcess struct {
	URL     string
	Host    string
	PID     int
	Client  *http.Client
	DataDir string
	stop    func()
}

func (a *apiProcess) Stop() { a.stop() }

// benchOperatorToken lets the harness open the launch gate.
const benchOperatorToken = "bench-operator-token-0123456789abcdef0123456"

// startAPI runs the real cairn-api with production settings (argon2id
// defaults included) and waits for /health. With tlsFiles it serves HTTPS
// at localhost, as the OpenTofu CLI requires.
func startAPI(dbURL string, tlsFiles *devstack.TLSFiles, extraEnv ...string) (*apiProcess, error) {
	port, err := devstack.FreePort()
	if err != nil {
		return nil, err
	}
	bin := os.Getenv("CAIRN_BIN_DIR")
	if bin == "" {
		bin = "bin"
	}
	dataDir, err := os.MkdirTemp("", "cairn-bench-data-")
	if err != nil {
		return nil, err
	}
	a := &apiProcess{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Host: fmt.Sprintf("localhost:%d", port),
		Client: http.DefaultClient, DataDir: dataDir}
	env := []string{
		"DATABASE_URL=" + dbURL,
		"AUTH_SECRET=bench-auth-secret-0123456789abcdef0123456789abcdef",
		"CAIRN_MASTER_KEY=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"IDEMPOTENCY_HMAC_KEY=HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=",
		"CAIRN_OPERATOR_TOKEN=" + benchOperatorToken,
		fmt.Sprintf("CAIRN_API_ADDR=127.0.0.1:%d", port),
		"CAIRN_DATA_DIR=" + dataDir,
		"CAIRN_LOG_LEVEL=" + envOr("CAIRN_BENCH_API_LOG", "warn"),
		"CAIRN_DB_MAX_CONNS=40",
		"CAIRN_PPROF_ADDR=" + os.Getenv("CAIRN_BENCH_PPROF_ADDR"),
	}
	if tlsFiles != nil {
		a.URL = "https://" + a.Host
		pool := x509.NewCertPool()
		ca, _ := os.ReadFile(tlsFiles.CA)
		pool.AppendCertsFromPEM(ca)
		a.Client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		env = append(env, "CAIRN_TLS_CERT="+tlsFiles.Cert, "CAIRN_TLS_KEY="+tlsFiles.Key)
	}
	env = append(env, "CAIRN_PUBLIC_URL="+a.URL)
	env = append(env, extraEnv...)
	cmd := exec.Command(filepath.Join(bin, "cairn-api"), "serve")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a.PID = cmd.Process.Pid
	forget := track(cmd)
	a.stop = func() {
		defer forget()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		_ = os.RemoveAll(dataDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if resp, err := a.Client.Get(a.URL + "/health"); err == nil {
			resp.Body.Close()
			return a, nil
		}
		select {
		case <-ctx.Done():
			a.stop()
			return nil, fmt.Errorf("cairn-api did not start")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startTLSAPI runs cairn-api over HTTPS with a fresh CA, as the OpenTofu
// CLI requires; stop also removes the CA.
func startTLSAPI(dbURL string, extraEnv ...string) (*apiProcess, devstack.TLSFiles, func(), error) {
	tlsDir, err := os.MkdirTemp("", "cairn-bench-tls-")
	if err != nil {
		return nil, devstack.TLSFiles{}, nil, err
	}
	files, err := devstack.EnsureTLS(tlsDir)
	if err != nil {
		os.RemoveAll(tlsDir)
		return nil, devstack.TLSFiles{}, nil, err
	}
	api, err := startAPI(dbURL, &files, extraEnv...)
	if err != nil {
		os.RemoveAll(tlsDir)
		return nil, devstack.TLSFiles{}, nil, err
	}
	return api, files, func() { api.Stop(); os.RemoveAll(tlsDir) }, nil
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// numCPU is the CPUs this process may use (its affinity), which the
// numbers depend on.
func numCPU() int { return runtime.NumCPU() }
