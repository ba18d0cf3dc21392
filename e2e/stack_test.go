package e2e

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/e2e/devstack"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the repository")
	}
	return filepath.Dir(filepath.Dir(file))
}

// binDir returns the directory with the built binaries: $CAIRN_BIN_DIR as
// `make test` sets it, or a fresh build for a test run by hand.
func binDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("CAIRN_BIN_DIR"); d != "" {
		return d
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cairn-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", dir+"/", "./api/cmd/cairn-api", "./api/cmd/cairn-mcp", "./jobs/cmd/cairn-worker",
			"./jobs/cmd/cairn-sandbox-exec", "./bff/cmd/cairn-bff", "./e2e/cmd/cairn-dev")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building binaries: %v\n%s", err, out)
		}
		builtDir = dir
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtDir
}

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
)

// Stack is the real cairn-api, cairn-worker, cairn-bff and cairn-mcp over
// a fresh database, each on its own loopback port.
type Stack struct {
	APIURL       string
	APIHost      string // host:port of the API, as a CLI names it
	DashboardURL string
	// MCPURL is cairn-mcp's origin ({mcp_url}); its endpoint is MCPURL/mcp.
	MCPURL      string
	DatabaseURL string
	// DataDir is every process's CAIRN_DATA_DIR (sandboxes under
	// DataDir/sandboxes).
	DataDir string
	// WorkerHealthURL is the worker's /health.
	WorkerHealthURL string
	Env             []string
	// TLS is set when the API serves HTTPS with a test CA.
	TLS    *devstack.TLSFiles
	Client *http.Client
	logs   *syncBuffer
	bin    string
	mu     sync.Mutex
	procs  map[string]*exec.Cmd
}

// startProcess starts one of the stack's binaries, with extra environment
// over the stack's; cleanup stops it.
func (s *Stack) startProcess(t *testing.T, name, bin string, extraEnv ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, bin))
	cmd.Env = append(append(os.Environ(), s.Env...), extraEnv...)
	w := devstack.NewPrefixWriter(&sync.Mutex{}, s.logs, name+" | ")
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	if s.procs == nil {
		s.procs = map[string]*exec.Cmd{}
	}
	s.procs[name] = cmd
	s.mu.Unlock()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
}

// KillWorker kills the worker and its whole process group at once, as a
// crashed machine would, and waits until it is gone.
func (s *Stack) KillWorker(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	cmd := s.procs["worker"]
	s.mu.Unlock()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(cmd.Process.Pid, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
}

// PID returns the process ID of one of the stack's processes ("api",
// "worker", "bff").
func (s *Stack) PID(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[name].Process.Pid
}

// StartWorker starts a fresh worker, as a replacement machine would, with
// extra environment over the stack's.
func (s *Stack) StartWorker(t *testing.T, env ...string) {
	s.startProcess(t, "worker", "cairn-worker", env...)
}

// StackOption adjusts a stack before it starts.
type StackOption func(*stackSettings)

type stackSettings struct {
	tls bool
	env []string
	// noLaunchControl leaves the database without a launch control.
	noLaunchControl bool
	// apiHostName names the API's host (default localhost).
	apiHostName string
	// bin, databaseURL and processes replace the defaults: this build's
	// binaries, a fresh clone of the migrated template, all four processes.
	bin         string
	databaseURL string
	processes   []string
}

// WithRelease starts only the named processes ("api", "worker", "bff",
// "mcp") from the binaries in bin against databaseURL, a database the
// caller prepared: an upgrade test runs an earlier release's programs
// against a schema it migrated itself.
func WithRelease(bin, databaseURL string, processes ...string) StackOption {
	return func(s *stackSettings) { s.bin, s.databaseURL, s.processes = bin, databaseURL, processes }
}

// WithDottedHost names the API 127.0.0.1 instead of localhost: a module
// registry source address needs a host name with a dot in it.
func WithDottedHost() StackOption { return func(s *stackSettings) { s.apiHostName = "127.0.0.1" } }

// WithoutLaunchControl starts the stack without writing a launch control
// (every admission is refused until one exists); by default the stack
// opens the public gate, as `make run` does.
func WithoutLaunchControl() StackOption { return func(s *stackSettings) { s.noLaunchControl = true } }

// operatorToken is the stacks' CAIRN_OPERATOR_TOKEN.
const operatorToken = "e2e-operator-token-0123456789abcdef0123456789"

// WithTLS serves the API over HTTPS at https://localhost:port with a
// freshly generated CA, as the OpenTofu CLI requires.
func WithTLS() StackOption { return func(s *stackSettings) { s.tls = true } }

// WithEnv adds environment variables to every process.
func WithEnv(kv ...string) StackOption {
	return func(s *stackSettings) { s.env = append(s.env, kv...) }
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StartStack starts the four processes and waits until the API, the
// dashboard and the agent endpoint answer.
func StartStack(t *testing.T, opts ...StackOption) *Stack {
	t.Helper()
	var settings stackSettings
	for _, o := range opts {
		o(&settings)
	}
	dbURL := settings.databaseURL
	if dbURL == "" {
		_, dbURL = dbtest.NewURL(t)
	}
	bin := settings.bin
	if bin == "" {
		bin = binDir(t)
	}
	apiPort, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	bffPort, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	healthPort, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	mcpPort, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// A short data directory, as an operator's would be: providers built
	// with older plugin libraries listen on a Unix socket in the sandbox's
	// TMPDIR, whose path (at most 108 bytes) a test's long temporary
	// directory would overflow.
	dataDir, err := os.MkdirTemp("", "cairn-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })
	s := &Stack{
		APIURL:          fmt.Sprintf("http://127.0.0.1:%d", apiPort),
		APIHost:         fmt.Sprintf("%s:%d", cmp.Or(settings.apiHostName, "localhost"), apiPort),
		DashboardURL:    fmt.Sprintf("http://127.0.0.1:%d", bffPort),
		MCPURL:          fmt.Sprintf("http://127.0.0.1:%d", mcpPort),
		DatabaseURL:     dbURL,
		DataDir:         dataDir,
		WorkerHealthURL: fmt.Sprintf("http://127.0.0.1:%d/health", healthPort),
		Client:          http.DefaultClient,
		logs:            &syncBuffer{},
		bin:             bin,
	}
	if settings.tls {
		files, err := devstack.EnsureTLS(filepath.Join(dataDir, "tls"))
		if err != nil {
			t.Fatal(err)
		}
		s.TLS = &files
		s.APIURL = "https://" + s.APIHost
		s.MCPURL = fmt.Sprintf("https://localhost:%d", mcpPort)
		pool := x509.NewCertPool()
		ca, _ := os.ReadFile(files.CA)
		pool.AppendCertsFromPEM(ca)
		s.Client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: time.Minute}
		settings.env = append(settings.env, "CAIRN_TLS_CERT="+files.Cert, "CAIRN_TLS_KEY="+files.Key, "SSL_CERT_FILE="+files.Bundle)
	}
	s.Env = append([]string{
		"DATABASE_URL=" + dbURL,
		"AUTH_SECRET=e2e-auth-secret-0123456789abcdef0123456789abcdef",
		"CAIRN_MASTER_KEY=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"IDEMPOTENCY_HMAC_KEY=HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=",
		"CAIRN_OPERATOR_TOKEN=" + operatorToken,
		fmt.Sprintf("CAIRN_API_ADDR=127.0.0.1:%d", apiPort),
		fmt.Sprintf("CAIRN_BFF_ADDR=127.0.0.1:%d", bffPort),
		fmt.Sprintf("CAIRN_WORKER_HEALTH_ADDR=127.0.0.1:%d", healthPort),
		fmt.Sprintf("CAIRN_MCP_ADDR=127.0.0.1:%d", mcpPort),
		"CAIRN_MCP_URL=" + s.MCPURL,
		"CAIRN_PUBLIC_URL=" + s.APIURL,
		"CAIRN_DASHBOARD_URL=" + s.DashboardURL,
		"CAIRN_DATA_DIR=" + dataDir,
		"CAIRN_SANDBOX_BASE=" + devstack.SandboxBaseDir(repoRoot(t)),
		"CAIRN_ARGON2_MEMORY_KIB=64",
		"CAIRN_ARGON2_ITERATIONS=1",
		"CAIRN_ARGON2_PARALLELISM=1",
	}, settings.env...)
	started := map[string]bool{}
	for _, p := range []struct{ name, bin string }{{"api", "cairn-api"}, {"worker", "cairn-worker"}, {"bff", "cairn-bff"}, {"mcp", "cairn-mcp"}} {
		if settings.processes == nil || slices.Contains(settings.processes, p.name) {
			s.startProcess(t, p.name, p.bin)
			started[p.name] = true
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("process logs:\n%s", s.logs.String())
		}
	})
	for name, u := range map[string]string{"api": s.APIURL + "/health", "bff": s.DashboardURL + "/health", "mcp": s.MCPURL + "/health"} {
		if started[name] {
			waitFor(t, s.Client, u)
		}
	}
	if !settings.noLaunchControl {
		if err := devstack.OpenPublicGate(s.Client, s.APIURL, operatorToken, "e2e-open-gate"); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func waitFor(t *testing.T, client *http.Client, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come up: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Logs returns everything the processes printed.
func (s *Stack) Logs() string { return s.logs.String() }

// Run runs a cairn-api subcommand against the stack's database.
func (s *Stack) Run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := s.RunErr(args...)
	if err != nil {
		t.Fatalf("cairn-api %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// RunErr is Run for a command that may fail.
func (s *Stack) RunErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "cairn-api"), args...)
	cmd.Env = append(os.Environ(), s.Env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func get(t *testing.T, url string, header ...string) (int, []byte) {
	t.Helper()
	return call(t, http.DefaultClient, http.MethodGet, url, nil, header...)
}

// call makes one request and reads the whole answer.
func call(t *testing.T, client *http.Client, method, url string, body []byte, header ...string) (int, []byte) {
	t.Helper()
	status, _, answer := callWithHeader(t, client, method, url, body, header...)
	return status, answer
}

// callWithHeader is call that also returns the answer's headers.
func callWithHeader(t *testing.T, client *http.Client, method, url string, body []byte, header ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, answer
}
