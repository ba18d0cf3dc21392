// Command cairn-dev is what `make run`, `make test` and `make bench` call.
// It starts a private PostgreSQL cluster, applies migrations and then either
// runs Cairn's processes in the foreground (run), runs the test suite against
// a throwaway cluster (test), or runs the benchmark harness (bench).
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairnhq/cairn/e2e/devstack"
)

const usage = `usage: cairn-dev <command> [args]

commands:
  run     start PostgreSQL (unless DATABASE_URL is set), migrate, bootstrap,
          then run cairn-api, cairn-worker, cairn-bff and cairn-mcp in the foreground
  test    run go vet and go test -race against a throwaway cluster, then
          every fuzz target for a few seconds
  fuzz    run every fuzz target in turn for -fuzztime (FUZZTIME, default 30s)
  bench   run the benchmark harness against a throwaway cluster
  compat  run go-tfe's integration tests against a real cairn-api and cairn-worker [-run REGEX]
  tools   build the pinned OpenTofu into .tools/toolchains, versitygw
          into .tools/versitygw and hashicorp/null into the provider
          mirror .tools/providers, Dex (the SSO tests' identity
          provider, from e2e/tools/dex) into .tools/dex and Terraform
          1.5.7 into .tools/toolchains/terraform (each once), and the
          sandboxes' managed base into .tools/sandbox-base
  cluster start a throwaway cluster with a migrated template, print the test
          environment and wait (for running single tests by hand)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "run":
		err = run(ctx)
	case "test":
		err = test(ctx, os.Args[2:])
	case "bench":
		err = bench(ctx, os.Args[2:])
	case "fuzz":
		err = fuzzCommand(ctx, os.Args[2:])
	case "cluster":
		err = cluster(ctx)
	case "compat":
		err = compat(ctx, os.Args[2:])
	case "tools":
		if _, err = devstack.EnsureTofu(ctx, ".", tofuVersion, os.Stdout); err == nil {
			_, err = devstack.EnsureVersity(ctx, ".", os.Stdout)
		}
		if err == nil {
			_, err = devstack.EnsureProviderMirror(ctx, ".", os.Stdout)
		}
		if err == nil {
			_, err = devstack.EnsureDex(ctx, ".", os.Stdout)
		}
		if err == nil {
			_, err = devstack.EnsureTerraform(ctx, ".", terraformVersion, os.Stdout)
		}
		if err == nil {
			_, err = devstack.EnsureSandboxBase(ctx, ".", os.Stdout)
		}
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cairn-dev:", err)
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		os.Exit(1)
	}
}

// binDir is where `make build` put the binaries.
func binDir() string {
	if d := os.Getenv("CAIRN_BIN_DIR"); d != "" {
		abs, _ := filepath.Abs(d)
		return abs
	}
	abs, _ := filepath.Abs("bin")
	return abs
}

// sandboxBaseDir is the managed base `make tools` assembled.
func sandboxBaseDir() string {
	abs, _ := filepath.Abs(".")
	return devstack.SandboxBaseDir(abs)
}

// throwawayPlace makes a fresh temporary directory and picks a free
// loopback port for one throwaway server; the directory is removed again
// when no port is free, so a failed start leaves nothing behind.
func throwawayPlace(pattern string) (string, int, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", 0, err
	}
	port, err := devstack.FreePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", 0, err
	}
	return dir, port, nil
}

// throwawayCluster starts a cluster in a fresh temporary directory with a
// migrated template database, and returns a function that removes it all.
func throwawayCluster(ctx context.Context, logPrefix string) (*devstack.Postgres, func(), error) {
	dir, port, err := throwawayPlace("cairn-pg-")
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	pg := &devstack.Postgres{
		Dir:      filepath.Join(dir, "data"),
		Port:     port,
		User:     "cairn",
		Password: devstack.RandomSecret(16),
		Output:   devstack.NewPrefixWriter(&mu, os.Stderr, logPrefix),
	}
	cleanup := func() {
		_ = pg.Stop()
		_ = os.RemoveAll(dir)
	}
	if err := pg.Init(ctx); err != nil {
		cleanup()
		return nil, nil, err
	}
	if err := pg.Start(ctx); err != nil {
		cleanup()
		return nil, nil, err
	}
	if err := pg.CreateDatabase(ctx, templateDB); err != nil {
		cleanup()
		return nil, nil, err
	}
	if err := migrate(ctx, pg.URL(templateDB)); err != nil {
		cleanup()
		return nil, nil, err
	}
	return pg, cleanup, nil
}

// tofuVersion is the OpenTofu version the toolchain mirror carries.
const tofuVersion = "1.10.6"

// terraformVersion is the Terraform CLI the registry's end-to-end tests
// drive beside OpenTofu: its last MPL release.
const terraformVersion = "1.5.7"

// templateDB is the migrated database that tests clone for each test.
const templateDB = "cairn_template"

func migrate(ctx context.Context, databaseURL string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(binDir(), "cairn-api"), "migrate")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+databaseURL, "CAIRN_LOG_FORMAT=text", "CAIRN_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cairn-api migrate: %w", err)
	}
	return nil
}

// throwawayS3 starts a versitygw over a fresh temporary directory: the
// real S3-compatible store that blob tests and multi-node tests use.
func throwawayS3(ctx context.Context, logPrefix string) (*devstack.S3Server, func(), error) {
	bin, err := devstack.EnsureVersity(ctx, ".", os.Stdout)
	if err != nil {
		return nil, nil, err
	}
	dir, port, err := throwawayPlace("cairn-s3-")
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	s3 := &devstack.S3Server{
		Bin:       bin,
		Dir:       dir,
		Port:      port,
		AccessKey: "cairn" + devstack.RandomSecret(8),
		SecretKey: devstack.RandomSecret(24),
		Output:    devstack.NewPrefixWriter(&mu, os.Stderr, logPrefix),
	}
	cleanup := func() {
		_ = s3.Stop()
		_ = os.RemoveAll(dir)
	}
	if err := s3.Start(ctx); err != nil {
		cleanup()
		return nil, nil, err
	}
	return s3, cleanup, nil
}

// throwawayStack starts the throwaway cluster and S3 store that tests and
// benchmarks run against, and returns a function that removes both.
func throwawayStack(ctx context.Context) (*devstack.Postgres, *devstack.S3Server, func(), error) {
	pg, stopPG, err := throwawayCluster(ctx, "postgres | ")
	if err != nil {
		return nil, nil, nil, err
	}
	s3, stopS3, err := throwawayS3(ctx, "s3 | ")
	if err != nil {
		stopPG()
		return nil, nil, nil, err
	}
	return pg, s3, func() { stopS3(); stopPG() }, nil
}

// testEnv is how tests find the throwaway cluster, the S3 store and the
// built binaries.
func testEnv(pg *devstack.Postgres, s3 *devstack.S3Server) []string {
	env := []string{
		"CAIRN_TEST_DATABASE_URL=" + pg.URL("postgres"),
		"CAIRN_TEST_TEMPLATE_DB=" + templateDB,
		"CAIRN_BIN_DIR=" + binDir(),
		// Workers the tests start run in the package's directory, where the
		// default relative path finds no managed base.
		"CAIRN_SANDBOX_BASE=" + sandboxBaseDir(),
	}
	if s3 != nil {
		env = append(env,
			"CAIRN_TEST_S3_ENDPOINT="+s3.Endpoint(),
			"CAIRN_TEST_S3_ACCESS_KEY="+s3.AccessKey,
			"CAIRN_TEST_S3_SECRET_KEY="+s3.SecretKey,
			"CAIRN_TEST_VERSITYGW="+s3.Bin)
	}
	return env
}

func test(ctx context.Context, args []string) error {
	pg, s3, cleanup, err := throwawayStack(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	env := append(os.Environ(), testEnv(pg, s3)...)
	vet := exec.CommandContext(ctx, "go", "vet", "./...")
	vet.Env, vet.Stdout, vet.Stderr = env, os.Stdout, os.Stderr
	fmt.Println("==> go vet ./...")
	if err := vet.Run(); err != nil {
		return fmt.Errorf("go vet: %w", err)
	}
	testArgs := append([]string{"test", "-race", "-count=1", "-timeout=40m"}, args...)
	if len(args) == 0 {
		testArgs = append(testArgs, "./...")
	}
	fmt.Println("==> go", strings.Join(testArgs, " "))
	gotest := exec.CommandContext(ctx, "go", testArgs...)
	gotest.Env, gotest.Stdout, gotest.Stderr = env, os.Stdout, os.Stderr
	if err := gotest.Run(); err != nil || len(args) > 0 {
		return err
	}
	// The seed corpora ran above as unit tests; a few seconds of mutation
	// per target catches what a change broke past the seeds.
	targets, err := findFuzzTargets(".")
	if err != nil {
		return err
	}
	return runFuzzTargets(ctx, targets, briefFuzzTime, time.Second, 0)
}

func bench(ctx context.Context, args []string) error {
	pg, s3, cleanup, err := throwawayStack(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	// Built and run directly rather than with `go run`, whose child would
	// outlive an interrupted bench: the bench itself gets SIGTERM and stops
	// the servers it started.
	dir, err := os.MkdirTemp("", "cairn-bench-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "cairn-bench")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./e2e/cmd/cairn-bench")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building cairn-bench: %w", err)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	cmd.Env = append(os.Environ(), testEnv(pg, s3)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

func cluster(ctx context.Context) error {
	pg, s3, cleanup, err := throwawayStack(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	for _, kv := range testEnv(pg, s3) {
		fmt.Println("export " + kv)
	}
	<-ctx.Done()
	return nil
}

// dataDir is where `make run` keeps everything it creates.
func dataDir() string {
	d := os.Getenv("CAIRN_DATA_DIR")
	if d == "" {
		d = ".data"
	}
	abs, _ := filepath.Abs(d)
	return abs
}

// loadOrCreateSecrets returns the local secrets, generating them on first
// use into a 0600 file; variables already set in the environment win.
func loadOrCreateSecrets(dir string) ([]string, error) {
	path := filepath.Join(dir, "secrets.env")
	values := map[string]string{}
	if f, err := os.Open(path); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), "="); ok {
				values[k] = v
			}
		}
		f.Close()
	}
	changed := false
	for _, name := range []string{"AUTH_SECRET", "CAIRN_MASTER_KEY", "IDEMPOTENCY_HMAC_KEY"} {
		if values[name] == "" {
			b := make([]byte, 32)
			_, _ = rand.Read(b)
			values[name] = base64.StdEncoding.EncodeToString(b)
			changed = true
		}
	}
	if changed {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		var sb strings.Builder
		for _, name := range []string{"AUTH_SECRET", "CAIRN_MASTER_KEY", "IDEMPOTENCY_HMAC_KEY"} {
			fmt.Fprintf(&sb, "%s=%s\n", name, values[name])
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
			return nil, err
		}
	}
	var env []string
	for name, v := range values {
		if os.Getenv(name) == "" {
			env = append(env, name+"="+v)
		}
	}
	return env, nil
}

// localCluster starts (creating on first use) the durable cluster of
// `make run` under .data/postgres.
func localCluster(ctx context.Context, dir string, out *devstack.PrefixWriter) (*devstack.Postgres, error) {
	pwPath := filepath.Join(dir, "postgres-password")
	pg := &devstack.Postgres{
		Dir:     filepath.Join(dir, "postgres"),
		Port:    54329,
		User:    "cairn",
		Durable: true,
		Output:  out,
	}
	if p := os.Getenv("CAIRN_DEV_PG_PORT"); p != "" {
		if _, err := fmt.Sscan(p, &pg.Port); err != nil {
			return nil, fmt.Errorf("CAIRN_DEV_PG_PORT: %w", err)
		}
	}
	if !pg.Initialized() {
		pg.Password = devstack.RandomSecret(16)
		fmt.Println("==> creating the local PostgreSQL cluster in", pg.Dir)
		if err := pg.Init(ctx); err != nil {
			return nil, err
		}
		if err := os.WriteFile(pwPath, []byte(pg.Password), 0o600); err != nil {
			return nil, err
		}
	} else {
		pw, err := os.ReadFile(pwPath)
		if err != nil {
			return nil, fmt.Errorf("the cluster in %s has no password file %s: %w", pg.Dir, pwPath, err)
		}
		pg.Password = strings.TrimSpace(string(pw))
	}
	fmt.Printf("==> starting PostgreSQL on 127.0.0.1:%d\n", pg.Port)
	if err := pg.Start(ctx); err != nil {
		return nil, err
	}
	if err := pg.CreateDatabase(ctx, "cairn"); err != nil {
		_ = pg.Stop()
		return nil, err
	}
	return pg, nil
}

func run(ctx context.Context) error {
	dir := dataDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	env, err := loadOrCreateSecrets(dir)
	if err != nil {
		return err
	}
	env = append(env, "CAIRN_DATA_DIR="+dir)
	// The OpenTofu CLI only speaks HTTPS to a remote backend, so the local
	// API serves TLS with a CA made for this installation.
	if os.Getenv("CAIRN_TLS_CERT") == "" {
		files, err := devstack.EnsureTLS(filepath.Join(dir, "tls"))
		if err != nil {
			return err
		}
		env = append(env, "CAIRN_TLS_CERT="+files.Cert, "CAIRN_TLS_KEY="+files.Key, "SSL_CERT_FILE="+files.Bundle)
		if os.Getenv("CAIRN_PUBLIC_URL") == "" {
			env = append(env, "CAIRN_PUBLIC_URL=https://localhost:8080")
		}
		if os.Getenv("CAIRN_MCP_URL") == "" {
			// cairn-mcp serves TLS with the same certificate.
			env = append(env, "CAIRN_MCP_URL=https://localhost:8070")
		}
	}
	if os.Getenv("CAIRN_LOG_FORMAT") == "" {
		// People read these logs in a terminal.
		env = append(env, "CAIRN_LOG_FORMAT=text")
	}
	var mu sync.Mutex
	databaseURL := os.Getenv("DATABASE_URL")
	if databaseURL == "" {
		pg, err := localCluster(ctx, dir, devstack.NewPrefixWriter(&mu, os.Stdout, "postgres | "))
		if err != nil {
			return err
		}
		defer func() {
			fmt.Println("==> stopping PostgreSQL")
			_ = pg.Stop()
		}()
		databaseURL = pg.URL("cairn")
		env = append(env, "DATABASE_URL="+databaseURL)
	}
	fmt.Println("==> applying migrations")
	if err := migrate(ctx, databaseURL); err != nil {
		return err
	}
	if err := bootstrap(ctx, env); err != nil {
		return err
	}
	apiURL := envOr("CAIRN_PUBLIC_URL", lookupEnv(env, "CAIRN_PUBLIC_URL", "http://127.0.0.1:8080"))
	dashboardURL := envOr("CAIRN_DASHBOARD_URL", "http://127.0.0.1:8090")
	mcpURL := envOr("CAIRN_MCP_URL", lookupEnv(env, "CAIRN_MCP_URL", "http://127.0.0.1:8070"))
	example, err := writeExample(dir, apiURL)
	if err != nil {
		return err
	}
	fmt.Println("==> starting api, worker, bff and mcp")
	procs := []devstack.Process{
		{Name: "api", Path: filepath.Join(binDir(), "cairn-api"), Args: []string{"serve"}, Env: env},
		{Name: "worker", Path: filepath.Join(binDir(), "cairn-worker"), Env: env},
		{Name: "bff", Path: filepath.Join(binDir(), "cairn-bff"), Env: env},
		{Name: "mcp", Path: filepath.Join(binDir(), "cairn-mcp"), Env: env},
	}
	// The next steps come last, once every process answers, so that the
	// start-up lines do not scroll them away; idle processes log nothing.
	go func() {
		health := []string{apiURL + "/health", dashboardURL + "/health", mcpURL + "/health"}
		if addr := lookupEnv(env, "CAIRN_WORKER_HEALTH_ADDR", envOr("CAIRN_WORKER_HEALTH_ADDR", "127.0.0.1:8071")); addr != "off" {
			health = append(health, "http://"+addr+"/health")
		}
		if !waitAnswering(ctx, lookupEnv(env, "SSL_CERT_FILE", os.Getenv("SSL_CERT_FILE")), health, 2*time.Minute) {
			return
		}
		// Let the processes finish their own start-up lines first.
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		_, _ = os.Stdout.WriteString(nextSteps(dashboardURL, apiURL, mcpURL, dir, lookupEnv(env, "SSL_CERT_FILE", ""), example))
	}()
	err = devstack.Supervise(ctx, procs, os.Stdout)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// bootstrap creates the local organization and owner on first run; it
// prints the generated password once and keeps it in .data/dev-credentials.
func bootstrap(ctx context.Context, env []string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(binDir(), "cairn-api"), "bootstrap")
	cmd.Env = append(append(os.Environ(), env...), "CAIRN_LOG_FORMAT=text", "CAIRN_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cairn-api bootstrap: %w", err)
	}
	return nil
}

// lookupEnv finds a variable in a KEY=VALUE list.
func lookupEnv(env []string, name, fallback string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return fallback
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// nextSteps is what `make run` prints last: where to sign in, the CLI's
// environment and a configuration to try.
func nextSteps(dashboardURL, apiURL, mcpURL, dir, bundle, example string) string {
	cli := "export TF_CLI_CONFIG_FILE=" + filepath.Join(dir, "tofurc")
	if bundle != "" {
		cli += " SSL_CERT_FILE=" + bundle
	}
	return fmt.Sprintf("==> Cairn is ready: API %s (contract %s/v1/openapi.json), agents %s/mcp. Ctrl-C stops everything.\n"+
		"    Next steps:\n"+
		"    1. Sign in:     %s  (e-mail and password in %s)\n"+
		"    2. Use the CLI: %s\n"+
		"    3. Try it:      cd %s && %s init && %s plan   (settings: docs/reference/configuration.md)\n",
		apiURL, apiURL, mcpURL, dashboardURL, filepath.Join(dir, "dev-credentials"), cli,
		filepath.Dir(example), tofuPath(), tofuPath())
}

// tofuPath is the pinned OpenTofu `make tools` builds, by absolute path so
// the printed command works from the example's directory.
func tofuPath() string {
	p, _ := filepath.Abs(filepath.Join(".tools", "toolchains", "tofu", "1.10.6", "tofu"))
	return p
}

// writeExample writes, once, a configuration with a cloud block for this
// installation's `local` organization, for the first `tofu plan`.
func writeExample(dir, apiURL string) (string, error) {
	path := filepath.Join(dir, "example", "main.tf")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	host := strings.TrimPrefix(strings.TrimPrefix(apiURL, "https://"), "http://")
	body := fmt.Sprintf(`terraform {
  cloud {
    hostname     = %q
    organization = "local"
    workspaces { name = "example" }
  }
}

resource "terraform_data" "hello" {
  input = "hello from Cairn"
}
`, strings.TrimSuffix(host, "/"))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(body), 0o644)
}

// waitAnswering polls each URL until it answers at all (a worker without
// isolation answers 503, and is up), or the time runs out.
func waitAnswering(ctx context.Context, bundle string, urls []string, limit time.Duration) bool {
	tlsConfig := &tls.Config{}
	if pem, err := os.ReadFile(bundle); err == nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tlsConfig.RootCAs = pool
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	deadline := time.Now().Add(limit)
	for _, u := range urls {
		for {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return false
			}
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				break
			}
			if ctx.Err() != nil || time.Now().After(deadline) {
				return false
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return true
}
