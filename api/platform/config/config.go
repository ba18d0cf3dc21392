package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/cairnhq/cairn/api/platform/blobkey"
)

// MinSecretBytes is the shortest AUTH_SECRET or key we accept. A shorter
// value is treated as absent, so the surfaces that need it fail closed
// instead of running on a guessable secret.
const MinSecretBytes = 32

// Secret is a string that never prints. It keeps secrets out of logs and error
// messages even when a whole Config is logged by mistake.
type Secret string

// String hides the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// LogValue hides the value from slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText hides the value from encoders.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Reveal returns the secret itself, for the one place that needs it.
func (s Secret) Reveal() string { return string(s) }

// Config is every setting of every Cairn process, read once from the
// environment in main and passed down. Defaults exist only where they are safe
// for a local machine; secrets have none.
type Config struct {
	DatabaseURL        Secret `env:"DATABASE_URL"`
	AuthSecret         Secret `env:"AUTH_SECRET"`
	MasterKey          Secret `env:"CAIRN_MASTER_KEY"`
	IdempotencyHMACKey Secret `env:"IDEMPOTENCY_HMAC_KEY"`

	APIAddr      string `env:"CAIRN_API_ADDR" envDefault:"127.0.0.1:8080"`
	BFFAddr      string `env:"CAIRN_BFF_ADDR" envDefault:"127.0.0.1:8090"`
	MCPAddr      string `env:"CAIRN_MCP_ADDR" envDefault:"127.0.0.1:8070"`
	PublicURL    string `env:"CAIRN_PUBLIC_URL" envDefault:"http://127.0.0.1:8080"`
	DashboardURL string `env:"CAIRN_DASHBOARD_URL" envDefault:"http://127.0.0.1:8090"`
	MCPURL       string `env:"CAIRN_MCP_URL" envDefault:"http://127.0.0.1:8070"`
	DataDir      string `env:"CAIRN_DATA_DIR" envDefault:".data"`
	// BlobURL names shared artifact storage (s3://bucket?endpoint=…&region=…&use_path_style=true)
	// for several nodes; empty keeps blobs under DataDir.
	BlobURL string `env:"CAIRN_BLOB_URL"`
	// BlobPrefix confines Cairn to one prefix of a shared bucket (or of
	// the blob directory): every key it writes, reads, lists and deletes
	// lies under it. Rows store keys without it, so the objects can move
	// under another prefix without touching a row. Normalised without its
	// trailing slash by LoadFrom.
	BlobPrefix        string `env:"CAIRN_BLOB_PREFIX"`
	S3AccessKeyID     string `env:"CAIRN_S3_ACCESS_KEY_ID"`
	S3SecretAccessKey Secret `env:"CAIRN_S3_SECRET_ACCESS_KEY"`
	// BlobSweepInterval is how often a worker sweeps orphaned objects;
	// BlobSweepMinAge is how old an unreferenced object must be to go.
	BlobSweepInterval time.Duration `env:"CAIRN_BLOB_SWEEP_INTERVAL" envDefault:"24h"`
	BlobSweepMinAge   time.Duration `env:"CAIRN_BLOB_SWEEP_MIN_AGE" envDefault:"24h"`
	TLSCert           string        `env:"CAIRN_TLS_CERT"`
	TLSKey            string        `env:"CAIRN_TLS_KEY"`

	// OTLPEndpoint is the standard OpenTelemetry exporter endpoint (a base
	// URL; traces go to /v1/traces over OTLP/HTTP). Unset: no tracing.
	OTLPEndpoint string `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
	// PprofAddr is a loopback host:port where cairn-api and cairn-worker
	// serve Go's profiler; empty serves it nowhere. A profile holds
	// process memory (run tokens, unsealed variable values), so no other
	// address is accepted.
	PprofAddr string `env:"CAIRN_PPROF_ADDR"`

	// APIGoGC is cairn-api's GOGC once it serves (its start runs at Go's
	// default). A request allocates a few tens of kilobytes over a live
	// heap of a few megabytes, so at 100 the collector runs dozens of
	// times a second under load; at 300 listing workspaces at 32 clients
	// serves 8-20 % more requests with a p99 1-4 ms lower, for a heap
	// that peaks a few megabytes higher. Set GOGC itself to override.
	APIGoGC int `env:"CAIRN_API_GOGC" envDefault:"300"`

	// APIMemoryLimitMiB is cairn-api's soft heap limit (Go's GOMEMLIMIT)
	// once it serves: past it the collector runs as often as it must,
	// whatever APIGoGC allows. It bounds what a higher GOGC lets garbage
	// grow to when the live heap is large, such as a burst of sign-ups
	// holding the whole argon2id budget. Set GOMEMLIMIT to override; in a
	// container with less memory, set this to three quarters of its limit.
	APIMemoryLimitMiB int64 `env:"CAIRN_API_MEMORY_LIMIT_MIB" envDefault:"320"`

	LogLevel  string `env:"CAIRN_LOG_LEVEL" envDefault:"info"`
	LogFormat string `env:"CAIRN_LOG_FORMAT" envDefault:"json"`

	DBMaxConns int `env:"CAIRN_DB_MAX_CONNS" envDefault:"24"`

	// Argon2id parameters for passwords. The defaults follow RFC 9106's second
	// recommended option; tests lower them through the environment.
	Argon2Memory      uint32 `env:"CAIRN_ARGON2_MEMORY_KIB" envDefault:"65536"`
	Argon2Iterations  uint32 `env:"CAIRN_ARGON2_ITERATIONS" envDefault:"3"`
	Argon2Parallelism uint8  `env:"CAIRN_ARGON2_PARALLELISM" envDefault:"2"`
	// Argon2BudgetMiB is the memory all password hashes running at once may
	// use together; a burst of sign-ups waits for it instead of allocating
	// gigabytes. Argon2Wait is how long a request waits for its share before
	// it is answered 503 with Retry-After.
	Argon2BudgetMiB uint32        `env:"CAIRN_ARGON2_BUDGET_MIB" envDefault:"128"`
	Argon2Wait      time.Duration `env:"CAIRN_ARGON2_WAIT" envDefault:"2s"`

	// TrustedProxies are CIDRs of the peers whose X-Forwarded-For or
	// Forwarded headers name the client (sign-in throttling is per client
	// address). None by default: the TCP peer is the client.
	TrustedProxies []string `env:"CAIRN_TRUSTED_PROXIES" envSeparator:","`

	// SessionTTL bounds how long a sign-in lasts without activity.
	SessionTTL time.Duration `env:"CAIRN_SESSION_TTL" envDefault:"168h"`
	// OAuthAccessTokenTTL is the lifetime of agent access tokens. /v1
	// refuses a revoked one at once; cairn-mcp, which checks signatures,
	// until it expires.
	OAuthAccessTokenTTL time.Duration `env:"CAIRN_OAUTH_ACCESS_TOKEN_TTL" envDefault:"1h"`
	// SecureCookies drops the Secure attribute only when explicitly turned off
	// for plain-HTTP local use; the cookie name keeps its __Secure- prefix
	// contract, so browsers refuse it over plain HTTP anyway.
	SecureCookies bool `env:"CAIRN_SECURE_COOKIES" envDefault:"true"`

	// ToolVersions are the exact OpenTofu versions workspaces may select;
	// each must exist in the toolchain mirror.
	ToolVersions []string `env:"CAIRN_TOOL_VERSIONS" envDefault:"1.10.6" envSeparator:","`
	// TerraformVersions are the exact HashiCorp Terraform versions
	// workspaces may select besides OpenTofu's; none by default. Each must
	// exist in the toolchain mirror (as terraform/<version>/terraform).
	TerraformVersions []string `env:"CAIRN_TERRAFORM_VERSIONS" envSeparator:","`

	// The instance identity provider ("Continue with …"): an OIDC issuer
	// with discovery, or google or github by name alone. A missing or
	// weak (shorter than 16 bytes) secret closes its sign-in.
	IdPClientID     string `env:"IDP_CLIENT_ID"`
	IdPClientSecret Secret `env:"IDP_CLIENT_SECRET"`
	IdPIssuer       string `env:"CAIRN_IDP_ISSUER"`
	IdPName         string `env:"CAIRN_IDP_NAME" envDefault:"oidc"`

	// OperatorToken authorizes the operator-only API (launch control,
	// suspensions). Unset: that API answers 503.
	OperatorToken Secret `env:"CAIRN_OPERATOR_TOKEN"`

	// WorkerPollInterval is how often a worker asks PostgreSQL for jobs
	// besides the notifications it listens for. It is only a safety net:
	// every job that can start is announced (its insert's NOTIFY, River's
	// scheduler for a retry falling due, every queue after the listener
	// reconnects, and the worker's own wakes while a job it snoozed or
	// failed waits seconds for its retry). Every poll is a query per queue:
	// an idle worker's only work besides River's leader election.
	WorkerPollInterval time.Duration `env:"CAIRN_WORKER_POLL_INTERVAL" envDefault:"1m"`

	// ToolchainDir is the checksum-verified toolchain mirror
	// (<dir>/<tool>/<version>/<tool> plus SHA256SUMS) sandboxes install from.
	ToolchainDir string `env:"CAIRN_TOOLCHAIN_DIR" envDefault:".tools/toolchains"`
	// ProviderMirror is where every sandbox's tofu installs providers from,
	// instead of the public registries: an absolute filesystem-mirror
	// directory (shown read-only inside sandboxes) or an https:// network
	// mirror URL. Empty keeps OpenTofu's default installation.
	ProviderMirror string `env:"CAIRN_PROVIDER_MIRROR"`
	// SandboxIsolation is "namespaces" (the default): sandboxes run in
	// Linux namespaces through bubblewrap, and a worker where that does not
	// work refuses to run phases. "none" runs them without namespaces, next
	// to the worker: only for a single-user machine.
	SandboxIsolation string `env:"CAIRN_SANDBOX_ISOLATION" envDefault:"namespaces"`
	// SandboxBase is the managed base sandboxes start from (SPEC §1 rule
	// 10): a directory with BASE.json and rootfs/ that `make tools` builds.
	// A worker whose base is missing or does not match its digest refuses
	// to create sandboxes.
	SandboxBase string `env:"CAIRN_SANDBOX_BASE" envDefault:".tools/sandbox-base"`
	// SandboxBaseDigest pins the base's digest (sha256:…); empty accepts
	// the digest the base records, once it still matches its files.
	SandboxBaseDigest string `env:"CAIRN_SANDBOX_BASE_DIGEST"`
	// SandboxBwrap is the bwrap program; empty looks it up in PATH.
	SandboxBwrap string `env:"CAIRN_SANDBOX_BWRAP"`
	// SandboxMemoryMiB is each sandbox's memory ceiling (cgroup v2
	// memory.max, or RLIMIT_AS per process where cgroups are not delegated).
	SandboxMemoryMiB uint64 `env:"CAIRN_SANDBOX_MEMORY_MIB" envDefault:"4096"`
	// SandboxGoGC is the GOGC every command of a run phase runs with. tofu and
	// providers are short-lived Go programs whose memory the sandbox's
	// ceiling bounds (GOMEMLIMIT is set to half of it), so letting the heap
	// grow further between collections trades memory for time: at 400 a
	// 50-resource plan runs about 15 % faster than at Go's default 100.
	SandboxGoGC int `env:"CAIRN_SANDBOX_GOGC" envDefault:"400"`
	// SandboxMaxProcesses bounds each sandbox's processes and threads.
	SandboxMaxProcesses uint64 `env:"CAIRN_SANDBOX_MAX_PROCESSES" envDefault:"1024"`
	// SandboxCgroup is where sandbox cgroups go: auto (the worker's own
	// cgroup v2, when delegated), off, or a delegated cgroup v2 directory.
	SandboxCgroup string `env:"CAIRN_SANDBOX_CGROUP" envDefault:"auto"`
	// SandboxUIDBase is the first of the user IDs a root worker's
	// sandboxes run as, one per live sandbox (65,536 from here).
	SandboxUIDBase uint32 `env:"CAIRN_SANDBOX_UID_BASE" envDefault:"1879048192"`
	// SandboxSweepInterval is how often a worker removes what dead workers
	// left under the sandbox root (it also does when it starts).
	SandboxSweepInterval time.Duration `env:"CAIRN_SANDBOX_SWEEP_INTERVAL" envDefault:"5m"`
	// WorkerHealthAddr is where cairn-worker answers /health ("off": nowhere).
	WorkerHealthAddr string `env:"CAIRN_WORKER_HEALTH_ADDR" envDefault:"127.0.0.1:8071"`
	// RunnerCAFile is the CA bundle sandboxed tofu trusts for the API's
	// TLS certificate (empty: the system roots).
	RunnerCAFile string `env:"CAIRN_RUNNER_CA_FILE"`
	// AttemptHeartbeatTimeout is how long a running phase attempt may go
	// without a heartbeat before it counts as lost.
	AttemptHeartbeatTimeout time.Duration `env:"CAIRN_ATTEMPT_HEARTBEAT_TIMEOUT" envDefault:"30s"`
	// ApprovalTimeout is how long a plan waits for a decision.
	ApprovalTimeout time.Duration `env:"CAIRN_APPROVAL_TIMEOUT" envDefault:"168h"`
	// PhaseTimeout bounds one sandboxed phase.
	PhaseTimeout time.Duration `env:"CAIRN_PHASE_TIMEOUT" envDefault:"1h"`
	// JobRescueAfter is how long a River job may stay running before the
	// rescuer counts its worker as dead and releases the job (retried, or
	// discarded once out of attempts); it also bounds phase jobs. Zero
	// derives it from the longest a phase job can legitimately run
	// (PhaseTimeout plus the interrupt and evidence windows, with a
	// margin), so a live apply is never cut off or rescued; the attempt
	// reaper, not the rescuer, is what recovers a lost run.
	JobRescueAfter time.Duration `env:"CAIRN_JOB_RESCUE_AFTER"`
	// RegistryDownloadTTL is how long the signed archive URL of a
	// registry module version (modules.v1's download answer) lasts.
	RegistryDownloadTTL time.Duration `env:"CAIRN_REGISTRY_DOWNLOAD_TTL" envDefault:"1h"`
	// ApplyInterruptGrace is how long an interrupted apply's tofu gets
	// between its interrupt and SIGKILL to stop and write what state it
	// has (cancel, phase timeout, worker shutdown).
	ApplyInterruptGrace time.Duration `env:"CAIRN_APPLY_INTERRUPT_GRACE" envDefault:"60s"`
	// PlanMaxAttempts bounds the attempts of a plan whose worker dies or
	// stops under it, or whose connection is cut off.
	PlanMaxAttempts int `env:"CAIRN_PLAN_MAX_ATTEMPTS" envDefault:"3"`
	// LogSegmentBytes is how much of one phase's log stays in table rows
	// before it moves into a sealed blob; RunLogMaxBytes caps the command
	// output one run keeps (a line in the log marks the cut).
	LogSegmentBytes int64 `env:"CAIRN_LOG_SEGMENT_BYTES" envDefault:"1048576"`
	RunLogMaxBytes  int64 `env:"CAIRN_RUN_LOG_MAX_BYTES" envDefault:"67108864"`
	// PolicyEvaluationTimeout bounds one attachment's evaluation; a
	// timeout is an error result, which blocks apply.
	PolicyEvaluationTimeout time.Duration `env:"CAIRN_POLICY_EVALUATION_TIMEOUT" envDefault:"10s"`
	// PolicyBuildTimeout bounds a policy build's sandbox (SPEC §8: 15 minutes).
	PolicyBuildTimeout time.Duration `env:"CAIRN_POLICY_BUILD_TIMEOUT" envDefault:"15m"`
	// PolicyEvaluationMemoryMiB is the memory ceiling of each policy
	// evaluation process; meeting it is an error result.
	PolicyEvaluationMemoryMiB uint64 `env:"CAIRN_POLICY_EVALUATION_MEMORY_MIB" envDefault:"1024"`
	// PolicyBuildMemoryMiB and PolicyBuildCPUSeconds bound a policy
	// build's process; meeting either fails the build with
	// policy_build_limit_exceeded.
	PolicyBuildMemoryMiB  uint64 `env:"CAIRN_POLICY_BUILD_MEMORY_MIB" envDefault:"4096"`
	PolicyBuildCPUSeconds uint64 `env:"CAIRN_POLICY_BUILD_CPU_SECONDS" envDefault:"300"`

	// The code-host app. Without the app ID, private key and webhook
	// secret every code-host surface fails closed. GitHubAPIURL selects
	// GitHub Enterprise Server (https://HOST/api/v3) instead of GitHub.com.
	GitHubAppID          int64  `env:"CAIRN_GITHUB_APP_ID"`
	GitHubAppSlug        string `env:"CAIRN_GITHUB_APP_SLUG"`
	GitHubPrivateKey     Secret `env:"CAIRN_GITHUB_PRIVATE_KEY"`
	GitHubPrivateKeyFile string `env:"CAIRN_GITHUB_PRIVATE_KEY_FILE"`
	GitHubWebhookSecret  Secret `env:"CAIRN_GITHUB_WEBHOOK_SECRET"`
	GitHubAPIURL         string `env:"CAIRN_GITHUB_API_URL" envDefault:"https://api.github.com"`
	// The app's user-authorization credentials. The installation callback
	// exchanges the installer's code with them and binds an installation
	// only when that person can see it: the installation ID in the setup
	// URL is the browser's to choose. Without them installation start is
	// refused.
	GitHubClientID     string `env:"CAIRN_GITHUB_CLIENT_ID"`
	GitHubClientSecret Secret `env:"CAIRN_GITHUB_CLIENT_SECRET"`
	// ForkRunsPerHour bounds the pull requests from forks planned
	// automatically, per repository in any rolling hour, where a
	// workspace allows fork plans; past it they are held for a person.
	ForkRunsPerHour int `env:"CAIRN_FORK_RUNS_PER_HOUR" envDefault:"10"`
}

// Load reads the environment and validates what can be checked without I/O.
func Load() (Config, error) {
	return LoadFrom(nil)
}

// LoadFrom reads the given environment (nil means the process environment).
func LoadFrom(environ map[string]string) (Config, error) {
	opts := env.Options{}
	if environ != nil {
		opts.Environment = environ
	}
	cfg, err := env.ParseAsWithOptions[Config](opts)
	if err != nil {
		return Config{}, fmt.Errorf("reading configuration: %w", err)
	}
	if err := cfg.validate(); err != nil {
		return Config{}, err
	}
	cfg.BlobPrefix, _ = blobkey.ParsePrefix(cfg.BlobPrefix)
	return cfg, nil
}

// exactVersion is a plain release version, as the toolchain mirror names
// its directories.
var exactVersion = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

func (c Config) validate() error {
	var problems []error
	for name, raw := range map[string]string{
		"CAIRN_PUBLIC_URL":    c.PublicURL,
		"CAIRN_DASHBOARD_URL": c.DashboardURL,
		"CAIRN_MCP_URL":       c.MCPURL,
	} {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Errorf("%s must be an absolute http(s) URL", name))
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		problems = append(problems, errors.New("CAIRN_TLS_CERT and CAIRN_TLS_KEY must be set together"))
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		problems = append(problems, errors.New("CAIRN_LOG_FORMAT must be json or text"))
	}
	if c.DBMaxConns < 2 || c.DBMaxConns > 500 {
		problems = append(problems, errors.New("CAIRN_DB_MAX_CONNS must be between 2 and 500"))
	}
	if c.Argon2Memory < 8 || c.Argon2Iterations < 1 || c.Argon2Parallelism < 1 {
		problems = append(problems, errors.New("CAIRN_ARGON2_* must be positive (memory at least 8 KiB)"))
	}
	if uint64(c.Argon2BudgetMiB)*1024 < uint64(c.Argon2Memory) || c.Argon2BudgetMiB > 1<<20 {
		problems = append(problems, errors.New("CAIRN_ARGON2_BUDGET_MIB must hold at least one hash of CAIRN_ARGON2_MEMORY_KIB (and at most 1 TiB)"))
	}
	if c.Argon2Wait < 0 || c.Argon2Wait > time.Minute {
		problems = append(problems, errors.New("CAIRN_ARGON2_WAIT must be between 0 and 1m"))
	}
	if len(c.ToolVersions) == 0 {
		problems = append(problems, errors.New("CAIRN_TOOL_VERSIONS must list at least one OpenTofu version"))
	}
	for _, v := range c.TerraformVersions {
		if !exactVersion.MatchString(v) {
			problems = append(problems, fmt.Errorf("CAIRN_TERRAFORM_VERSIONS: %q is not an exact version such as 1.5.7", v))
		}
		// The remote-backend protocol names a version without its CLI.
		if slices.Contains(c.ToolVersions, v) {
			problems = append(problems, fmt.Errorf("CAIRN_TERRAFORM_VERSIONS: %s is also in CAIRN_TOOL_VERSIONS; a version selects one CLI", v))
		}
	}
	for _, cidr := range c.TrustedProxies {
		if _, err := netip.ParsePrefix(strings.TrimSpace(cidr)); err != nil {
			problems = append(problems, fmt.Errorf("CAIRN_TRUSTED_PROXIES: %q is not a CIDR such as 10.0.0.0/8", cidr))
		}
	}
	if c.OAuthAccessTokenTTL < 5*time.Second || c.OAuthAccessTokenTTL > 24*time.Hour {
		problems = append(problems, errors.New("CAIRN_OAUTH_ACCESS_TOKEN_TTL must be between 5s and 24h"))
	}
	if c.SessionTTL < time.Minute {
		problems = append(problems, errors.New("CAIRN_SESSION_TTL must be at least one minute"))
	}
	if c.PolicyEvaluationTimeout <= 0 || c.PolicyBuildTimeout <= 0 {
		problems = append(problems, errors.New("CAIRN_POLICY_EVALUATION_TIMEOUT and CAIRN_POLICY_BUILD_TIMEOUT must be positive"))
	}
	if c.PolicyEvaluationMemoryMiB < 256 || c.PolicyBuildMemoryMiB < 256 {
		problems = append(problems, errors.New("CAIRN_POLICY_EVALUATION_MEMORY_MIB and CAIRN_POLICY_BUILD_MEMORY_MIB must be at least 256"))
	}
	if c.PolicyBuildCPUSeconds < 1 {
		problems = append(problems, errors.New("CAIRN_POLICY_BUILD_CPU_SECONDS must be at least 1"))
	}
	if c.WorkerPollInterval < time.Millisecond || c.WorkerPollInterval > time.Hour {
		problems = append(problems, errors.New("CAIRN_WORKER_POLL_INTERVAL must be between 1ms and 1h"))
	}
	if c.ApplyInterruptGrace < time.Second || c.ApplyInterruptGrace > time.Hour {
		problems = append(problems, errors.New("CAIRN_APPLY_INTERRUPT_GRACE must be between 1s and 1h"))
	}
	if c.PhaseTimeout < time.Second {
		problems = append(problems, errors.New("CAIRN_PHASE_TIMEOUT must be at least 1s"))
	}
	if c.JobRescueAfter != 0 && (c.JobRescueAfter <= c.PhaseTimeout+c.ApplyInterruptGrace || c.JobRescueAfter > 7*24*time.Hour) {
		// It bounds phase jobs too: shorter, a live phase would be cut off.
		problems = append(problems, errors.New("CAIRN_JOB_RESCUE_AFTER must be 0 (derived) or longer than CAIRN_PHASE_TIMEOUT plus CAIRN_APPLY_INTERRUPT_GRACE, at most 168h"))
	}
	if c.RegistryDownloadTTL < time.Second || c.RegistryDownloadTTL > 24*time.Hour {
		problems = append(problems, errors.New("CAIRN_REGISTRY_DOWNLOAD_TTL must be between 1s and 24h"))
	}
	if c.PlanMaxAttempts < 1 || c.PlanMaxAttempts > 20 {
		problems = append(problems, errors.New("CAIRN_PLAN_MAX_ATTEMPTS must be between 1 and 20"))
	}
	if c.LogSegmentBytes < 64<<10 || c.LogSegmentBytes > 64<<20 {
		problems = append(problems, errors.New("CAIRN_LOG_SEGMENT_BYTES must be between 65536 and 67108864"))
	}
	if c.RunLogMaxBytes < 1<<20 || c.RunLogMaxBytes > 1<<30 {
		problems = append(problems, errors.New("CAIRN_RUN_LOG_MAX_BYTES must be between 1048576 and 1073741824"))
	}
	if _, err := blobkey.ParsePrefix(c.BlobPrefix); err != nil {
		problems = append(problems, fmt.Errorf("CAIRN_BLOB_PREFIX %w: it must be a relative path of segments of letters, digits, '.', '_' and '-' (at most %d bytes, one trailing slash at most)", err, blobkey.MaxPrefixBytes))
	}
	if c.ForkRunsPerHour < 1 || c.ForkRunsPerHour > 10000 {
		problems = append(problems, errors.New("CAIRN_FORK_RUNS_PER_HOUR must be between 1 and 10000"))
	}
	if c.PprofAddr != "" && !loopbackAddr(c.PprofAddr) {
		problems = append(problems, errors.New("CAIRN_PPROF_ADDR must be a loopback host:port (127.0.0.1:6060, [::1]:6060, localhost:6060)"))
	}
	problems = append(problems, c.validateSandbox()...)
	return errors.Join(problems...)
}

// loopbackAddr reports whether addr is a host:port on the loopback
// interface.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// overlaps reports whether one of two clean absolute paths is the other or
// lies inside it.
func overlaps(a, b string) bool {
	within := func(inner, outer string) bool {
		return inner == outer || strings.HasPrefix(inner, strings.TrimSuffix(outer, "/")+"/")
	}
	return within(a, b) || within(b, a)
}

func (c Config) validateSandbox() []error {
	var problems []error
	switch c.SandboxIsolation {
	case "namespaces", "none":
	default:
		problems = append(problems, errors.New("CAIRN_SANDBOX_ISOLATION must be namespaces or none"))
	}
	if m := c.ProviderMirror; m != "" && !strings.HasPrefix(m, "https://") {
		data, err := filepath.Abs(c.DataDir)
		switch {
		case !filepath.IsAbs(m) || m != filepath.Clean(m) || m == "/":
			problems = append(problems, errors.New("CAIRN_PROVIDER_MIRROR must be an absolute directory or an https:// URL"))
		case err != nil || overlaps(m, data):
			// The mirror is bound into every sandbox: over the data
			// directory it would show one tenant's sandboxes to another.
			problems = append(problems, errors.New("CAIRN_PROVIDER_MIRROR must lie outside CAIRN_DATA_DIR and not contain it"))
		}
	}
	switch {
	case c.SandboxBwrap == "auto" || c.SandboxBwrap == "always" || c.SandboxBwrap == "never":
		// The variable once chose the mode; an old value must not pass as a
		// program path, nor silently keep its old meaning.
		problems = append(problems, errors.New("CAIRN_SANDBOX_BWRAP now names the bwrap program; choose the isolation with CAIRN_SANDBOX_ISOLATION (namespaces, the default, or none)"))
	case c.SandboxBwrap != "" && !filepath.IsAbs(c.SandboxBwrap):
		problems = append(problems, errors.New("CAIRN_SANDBOX_BWRAP must be an absolute path"))
	}
	if c.SandboxMemoryMiB < 64 {
		problems = append(problems, errors.New("CAIRN_SANDBOX_MEMORY_MIB must be at least 64"))
	}
	if c.APIGoGC < 25 || c.APIGoGC > 2000 {
		problems = append(problems, errors.New("CAIRN_API_GOGC must be between 25 and 2000 (100 is Go's own default)"))
	}
	if c.APIMemoryLimitMiB < int64(c.Argon2BudgetMiB)+64 || c.APIMemoryLimitMiB > 1<<20 {
		problems = append(problems, errors.New("CAIRN_API_MEMORY_LIMIT_MIB must exceed CAIRN_ARGON2_BUDGET_MIB by at least 64 (and be at most 1 TiB)"))
	}
	if c.SandboxGoGC < 25 || c.SandboxGoGC > 2000 {
		problems = append(problems, errors.New("CAIRN_SANDBOX_GOGC must be between 25 and 2000 (100 is Go's own default)"))
	}
	if c.SandboxMaxProcesses < 16 {
		problems = append(problems, errors.New("CAIRN_SANDBOX_MAX_PROCESSES must be at least 16"))
	}
	if c.SandboxCgroup != "auto" && c.SandboxCgroup != "off" && !filepath.IsAbs(c.SandboxCgroup) {
		problems = append(problems, errors.New("CAIRN_SANDBOX_CGROUP must be auto, off or an absolute path"))
	}
	if c.SandboxUIDBase < 65536 || uint64(c.SandboxUIDBase)+65536 > 1<<32-2 {
		problems = append(problems, errors.New("CAIRN_SANDBOX_UID_BASE must be between 65536 and 4294901758"))
	}
	if c.SandboxSweepInterval < 10*time.Second {
		problems = append(problems, errors.New("CAIRN_SANDBOX_SWEEP_INTERVAL must be at least 10s"))
	}
	if c.WorkerHealthAddr != "off" {
		if _, _, err := net.SplitHostPort(c.WorkerHealthAddr); err != nil {
			problems = append(problems, errors.New("CAIRN_WORKER_HEALTH_ADDR must be host:port or off"))
		}
	}
	return problems
}

// AuthReady reports whether AUTH_SECRET is present and strong enough. Without
// it every authenticated surface answers 503.
func (c Config) AuthReady() bool { return len(c.AuthSecret) >= MinSecretBytes }

// Issuer is the agent authorization server's issuer: the API's public
// origin, without a trailing slash.
func (c Config) Issuer() string { return strings.TrimRight(c.PublicURL, "/") }

// AgentResource is the agent endpoint's resource identifier, {mcp_url}/mcp:
// the one audience of every agent access token.
func (c Config) AgentResource() string { return strings.TrimRight(c.MCPURL, "/") + "/mcp" }

// TrustedProxyPrefixes returns CAIRN_TRUSTED_PROXIES as prefixes (validated
// when the configuration was loaded).
func (c Config) TrustedProxyPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, cidr := range c.TrustedProxies {
		if p, err := netip.ParsePrefix(strings.TrimSpace(cidr)); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// MasterKeyBytes decodes CAIRN_MASTER_KEY (32 bytes, standard or URL base64).
// It returns nil when the key is absent or malformed, so sealing fails closed.
func (c Config) MasterKeyBytes() []byte { return decodeKey(c.MasterKey) }

// IdempotencyKeyBytes decodes IDEMPOTENCY_HMAC_KEY like MasterKeyBytes and
// also refuses a weak one (see strongKey): it keys the digests that stand
// for generic secrets in request fingerprints, where a guessable key would
// let a short secret be found from its digest.
func (c Config) IdempotencyKeyBytes() []byte {
	key := decodeKey(c.IdempotencyHMACKey)
	if !strongKey(key) {
		return nil
	}
	return key
}

// strongKey refuses a key that is not random bytes: fewer than 16
// distinct byte values in 32 (a repeated character, a short pattern, a
// counter of few values). 32 random bytes have about 30 distinct values;
// fewer than 16 happens by chance with negligible probability.
func strongKey(key []byte) bool {
	if len(key) != 32 {
		return false
	}
	distinct := map[byte]bool{}
	for _, b := range key {
		distinct[b] = true
	}
	return len(distinct) >= 16
}

func decodeKey(s Secret) []byte {
	raw := strings.TrimSpace(s.Reveal())
	if raw == "" {
		return nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(raw); err == nil && len(b) == 32 {
			return b
		}
	}
	return nil
}

// Bindings reports which external bindings are configured, as booleans only,
// for the public health endpoint.
func (c Config) Bindings() map[string]bool {
	return map[string]bool{
		"database":             c.DatabaseURL != "",
		"auth_secret":          c.AuthReady(),
		"master_key":           c.MasterKeyBytes() != nil,
		"idempotency_hmac_key": c.IdempotencyKeyBytes() != nil,
		"tls":                  c.TLSCert != "",
	}
}
