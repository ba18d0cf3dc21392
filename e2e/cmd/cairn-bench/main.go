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
	"path/filepath"
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
	only        = flag.String("only", "", "run only these phases (comma-separated: health,mutation,replay,list,agents,state,tofu,statemode,runs,providers,credentials,policy,dashboard,live,signin,codehost,replicas,logs,teams,sso,scim,registry,varsets,scale)")
	logMiB      = flag.Int("log-mib", 24, "size of the large run log the logs phase reads")
	rounds      = flag.Int("rounds", 5, "rounds of each tofu command (medians are reported)")
)

// enabled reports whether a phase should run.
func enabled(phase string) bool {
	if *only == "" {
		return true
	}
	for _, p := range strings.Split(*only, ",") {
		if strings.TrimSpace(p) == phase {
			return true
		}
	}
	return false
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
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

func run() error {
	admin := os.Getenv("CAIRN_TEST_DATABASE_URL")
	if admin == "" {
		return fmt.Errorf("CAIRN_TEST_DATABASE_URL is not set: run `make bench`")
	}
	dbURL, err := freshDatabase(admin)
	if err != nil {
		return err
	}
	api, err := startAPI(dbURL, nil)
	if err != nil {
		return err
	}
	defer api.Stop()
	apiURL := api.URL

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency * 2, MaxIdleConns: *concurrency * 2}, Timeout: 30 * time.Second}
	fmt.Printf("cairn-bench: %d concurrent clients, %s per phase, %d CPUs\n\n", *concurrency, *duration, numCPU())

	// Baseline for HTTP: an empty net/http handler in this process.
	baseURL, stopBase := startBaseline()
	defer stopBase()
	var baseline result
	if enabled("health") || enabled("list") {
		baseline = load("baseline: empty net/http handler", *concurrency, *duration, func(int, int) bool {
			return call(client, http.MethodGet, baseURL, "", nil, nil, nil) == http.StatusOK
		})
		report(baseline, result{}, "")
	}
	if enabled("health") {
		health := load("GET /health (no auth, no database)", *concurrency, *duration, func(int, int) bool {
			return call(client, http.MethodGet, apiURL+"/health", "", nil, nil, nil) == http.StatusOK
		})
		report(health, baseline, "")
	}

	// A fresh installation's gate is closed: organization-wide mutations
	// such as creating projects fail closed until it opens.
	if err := devstack.OpenPublicGate(api.Client, api.URL, benchOperatorToken, "bench-open-gate"); err != nil {
		return err
	}
	token, err := signUp(client, apiURL, "bench@example.com", true)
	if err != nil {
		return err
	}
	var projectID string
	if status := call(client, http.MethodPost, apiURL+"/v1/projects", token, map[string]string{"name": "bench"},
		map[string]any{"Idempotency-Key": "bench-project"}, &projectID); status != http.StatusCreated {
		return fmt.Errorf("creating project: %d", status)
	}
	var workspaceIDs []string
	for i := range 50 {
		var wsID string
		if status := call(client, http.MethodPost, apiURL+"/v1/workspaces", token, map[string]any{"project_id": projectID,
			"name": fmt.Sprintf("ws-%d", i), "execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}},
			map[string]any{"Idempotency-Key": fmt.Sprintf("bench-ws-%d", i)}, &wsID); status != http.StatusCreated {
			return fmt.Errorf("creating workspace: %d", status)
		}
		workspaceIDs = append(workspaceIDs, wsID)
	}

	if enabled("mutation") || enabled("replay") {
		// Baseline for mutations: the same kind of write (insert + audit
		// row in one committed transaction) straight through database/sql.
		dbConn, err := sql.Open("postgres", dbURL)
		if err != nil {
			return err
		}
		dbConn.SetMaxOpenConns(*concurrency)
		defer dbConn.Close()
		var orgID string
		if err := dbConn.QueryRow(`SELECT organization_id FROM projects WHERE id = $1`, projectID).Scan(&orgID); err != nil {
			return err
		}
		dbBaseline := load("baseline: INSERT+audit INSERT+COMMIT via database/sql", *concurrency, *duration, func(w, i int) bool {
			tx, err := dbConn.Begin()
			if err != nil {
				return false
			}
			defer tx.Rollback()
			pid := fmt.Sprintf("prj_base%d_%d_%d", w, i, time.Now().UnixNano())
			if _, err := tx.Exec(`INSERT INTO projects (id, organization_id, name, created_by) VALUES ($1, $2, $1, 'bench')`, pid, orgID); err != nil {
				return false
			}
			if _, err := tx.Exec(`INSERT INTO audit_events (id, organization_id, action, actor_type, actor_id) VALUES ($1, $2, 'project.created', 'system', 'bench')`,
				"aud_"+pid, orgID); err != nil {
				return false
			}
			return tx.Commit() == nil
		})
		report(dbBaseline, result{}, "")
		if enabled("mutation") {
			mutation := load("POST /v1/projects (session, idempotent)", *concurrency, *duration, func(w, i int) bool {
				name := fmt.Sprintf("p-%d-%d-%d", w, i, time.Now().UnixNano())
				return call(client, http.MethodPost, apiURL+"/v1/projects", token, map[string]string{"name": name},
					map[string]any{"Idempotency-Key": "k-" + name}, nil) == http.StatusCreated
			})
			report(mutation, dbBaseline, "p99 < 20 ms")
		}
		if enabled("replay") {
			// Each client replays its own key: replays of one key by many
			// clients at once would measure IDEMPOTENCY_IN_PROGRESS answers.
			for w := range *concurrency {
				call(client, http.MethodPost, apiURL+"/v1/projects", token, map[string]string{"name": fmt.Sprintf("replayed-%d", w)},
					map[string]any{"Idempotency-Key": fmt.Sprintf("replay-%d", w)}, nil)
			}
			replay := load("POST /v1/projects replay (same key)", *concurrency, *duration, func(w, _ int) bool {
				return call(client, http.MethodPost, apiURL+"/v1/projects", token, map[string]string{"name": fmt.Sprintf("replayed-%d", w)},
					map[string]any{"Idempotency-Key": fmt.Sprintf("replay-%d", w)}, nil) == http.StatusCreated
			})
			report(replay, dbBaseline, "")
		}
	}
	var sessionList result
	if enabled("list") || enabled("agents") {
		sessionList = load("GET /v1/workspaces?limit=20 (session)", *concurrency, *duration, func(int, int) bool {
			return call(client, http.MethodGet, apiURL+"/v1/workspaces?limit=20", token, nil, nil, nil) == http.StatusOK
		})
		report(sessionList, baseline, "p99 < 25 ms")
	}
	if enabled("agents") {
		if err := benchAgents(client, apiURL, token, sessionList); err != nil {
			return err
		}
	}

	if enabled("live") {
		var workspaceID string
		if status := call(client, http.MethodPost, apiURL+"/v1/workspaces", token, map[string]any{"project_id": projectID,
			"name": "live", "execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}},
			map[string]any{"Idempotency-Key": "bench-ws-live"}, &workspaceID); status != http.StatusCreated {
			return fmt.Errorf("creating the live workspace: %d", status)
		}
		if err := benchLive(api, dbURL, token, workspaceID); err != nil {
			return err
		}
	}

	if enabled("teams") {
		if err := benchTeams(client, apiURL, dbURL, token, workspaceIDs[0]); err != nil {
			return err
		}
	}

	if enabled("varsets") {
		if err := benchVarsets(api, dbURL, token); err != nil {
			return err
		}
	}

	if enabled("scim") {
		if err := benchSCIM(client, apiURL, dbURL); err != nil {
			return err
		}
	}

	if enabled("replicas") {
		if err := benchReplicas(client, api, dbURL, token, workspaceIDs[:40]); err != nil {
			return err
		}
	}

	if enabled("state") || enabled("tofu") || enabled("statemode") || enabled("runs") || enabled("providers") || enabled("codehost") || enabled("credentials") || enabled("policy") || enabled("dashboard") || enabled("logs") || enabled("registry") {
		var userToken struct {
			Data struct {
				Token string `json:"token"`
			} `json:"data"`
		}
		raw, _ := json.Marshal(map[string]string{"description": "bench"})
		req, _ := http.NewRequest(http.MethodPost, apiURL+"/v1/user-tokens", bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Cookie", "__Secure-identity.session_token="+token)
		req.Header.Set("Idempotency-Key", "bench-user-token")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_ = json.NewDecoder(resp.Body).Decode(&userToken)
		resp.Body.Close()
		if enabled("logs") {
			if err := benchLogReads(client, api, dbURL, token, userToken.Data.Token, workspaceIDs[40:], *logMiB<<20); err != nil {
				return err
			}
		}
		if enabled("state") {
			if err := benchStateTransfer(api, userToken.Data.Token, "bench", baseURL); err != nil {
				return err
			}
		}
		if enabled("runs") {
			if err := benchRuns(dbURL, *rounds); err != nil {
				return err
			}
		}
		if enabled("providers") {
			if err := benchProviderInit(dbURL, *rounds); err != nil {
				return err
			}
		}
		if enabled("codehost") {
			if err := benchCodeHost(dbURL, *rounds); err != nil {
				return err
			}
		}
		if enabled("credentials") {
			if err := benchCredentials(dbURL, *rounds); err != nil {
				return err
			}
		}
		if enabled("dashboard") {
			if err := benchDashboard(dbURL, *rounds); err != nil {
				return err
			}
		}
		if enabled("policy") {
			baseline, err := benchPolicyEvaluation(*rounds)
			if err != nil {
				return err
			}
			if err := benchPolicyEvaluator(dbURL, *rounds, baseline); err != nil {
				return err
			}
			if err := benchPolicyBuild(dbURL, *rounds); err != nil {
				return err
			}
		}
		// State mode (the CLI runs, Cairn keeps the state) for OpenTofu
		// and Terraform; "statemode" names the phase by what it measures.
		if enabled("tofu") || enabled("statemode") {
			tlsAPI, files, stop, err := startTLSAPI(dbURL)
			if err != nil {
				return err
			}
			defer stop()
			if err := benchStateMode(tlsAPI, files, userToken.Data.Token, "bench", *rounds); err != nil {
				return err
			}
		}
		if enabled("registry") {
			tlsAPI, files, stop, err := startTLSAPI(dbURL)
			if err != nil {
				return err
			}
			defer stop()
			if err := benchRegistry(tlsAPI, files, token, userToken.Data.Token, "bench", *rounds); err != nil {
				return err
			}
		}
	}

	if enabled("scale") {
		if err := benchGrowth(dbURL); err != nil {
			return err
		}
	}

	if enabled("sso") {
		if err := benchSSO(dbURL); err != nil {
			return err
		}
	}

	if enabled("signin") {
		// Sign-in cost with the production argon2id parameters (64 MiB,
		// t=3, p=2): it bounds how many sign-ins a node can take.
		for _, n := range []int{1, 4} {
			signIn := load(fmt.Sprintf("POST /api/auth/sign-in/email (argon2id default), %d clients", n), n, *duration, func(int, int) bool {
				return call(client, http.MethodPost, apiURL+"/api/auth/sign-in/email", "",
					map[string]string{"email": "bench@example.com", "password": "correct horse battery staple"}, nil, nil) == http.StatusOK
			})
			report(signIn, result{}, "")
		}
	}
	return nil
}

func numCPU() int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return 0
	}
	var n int
	fmt.Sscan(strings.TrimSpace(string(out)), &n)
	return n
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
	a.stop = func() {
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
