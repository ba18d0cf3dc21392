package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
		cmd := exec.Command("go", "build", "-o", dir+"/", "./api/cmd/cairn-api", "./jobs/cmd/cairn-worker", "./bff/cmd/cairn-bff")
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

// Stack is the real cairn-api, cairn-worker and cairn-bff over a fresh
// database, each on its own loopback port.
type Stack struct {
	APIURL       string
	DashboardURL string
	DatabaseURL  string
	Env          []string
	logs         *syncBuffer
	bin          string
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

// StartStack starts the three processes and waits until the API and the
// dashboard answer.
func StartStack(t *testing.T, extraEnv ...string) *Stack {
	t.Helper()
	_, dbURL := dbtest.NewURL(t)
	apiPort, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	bffPort, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := &Stack{
		APIURL:       fmt.Sprintf("http://127.0.0.1:%d", apiPort),
		DashboardURL: fmt.Sprintf("http://127.0.0.1:%d", bffPort),
		DatabaseURL:  dbURL,
		logs:         &syncBuffer{},
		bin:          binDir(t),
	}
	s.Env = append([]string{
		"DATABASE_URL=" + dbURL,
		"AUTH_SECRET=e2e-auth-secret-0123456789abcdef0123456789abcdef",
		"CAIRN_MASTER_KEY=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"IDEMPOTENCY_HMAC_KEY=HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=",
		"CAIRN_OPERATOR_TOKEN=e2e-operator-token-0123456789abcdef0123456789",
		fmt.Sprintf("CAIRN_API_ADDR=127.0.0.1:%d", apiPort),
		fmt.Sprintf("CAIRN_BFF_ADDR=127.0.0.1:%d", bffPort),
		"CAIRN_PUBLIC_URL=" + s.APIURL,
		"CAIRN_DASHBOARD_URL=" + s.DashboardURL,
		"CAIRN_DATA_DIR=" + t.TempDir(),
		"CAIRN_ARGON2_MEMORY_KIB=64",
		"CAIRN_ARGON2_ITERATIONS=1",
		"CAIRN_ARGON2_PARALLELISM=1",
	}, extraEnv...)
	for _, p := range []struct{ name, bin string }{{"api", "cairn-api"}, {"worker", "cairn-worker"}, {"bff", "cairn-bff"}} {
		cmd := exec.Command(filepath.Join(s.bin, p.bin))
		cmd.Env = append(os.Environ(), s.Env...)
		w := devstack.NewPrefixWriter(&sync.Mutex{}, s.logs, p.name+" | ")
		cmd.Stdout, cmd.Stderr = w, w
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", p.bin, err)
		}
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("process logs:\n%s", s.logs.String())
		}
	})
	for _, u := range []string{s.APIURL + "/health", s.DashboardURL + "/health"} {
		waitFor(t, u)
	}
	return s
}

func waitFor(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "cairn-api"), args...)
	cmd.Env = append(os.Environ(), s.Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cairn-api %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func get(t *testing.T, url string, header ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}
