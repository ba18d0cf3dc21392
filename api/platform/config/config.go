package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
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
	TLSCert      string `env:"CAIRN_TLS_CERT"`
	TLSKey       string `env:"CAIRN_TLS_KEY"`

	LogLevel  string `env:"CAIRN_LOG_LEVEL" envDefault:"info"`
	LogFormat string `env:"CAIRN_LOG_FORMAT" envDefault:"json"`

	DBMaxConns int `env:"CAIRN_DB_MAX_CONNS" envDefault:"24"`

	// Argon2id parameters for passwords. The defaults follow RFC 9106's second
	// recommended option; tests lower them through the environment.
	Argon2Memory      uint32 `env:"CAIRN_ARGON2_MEMORY_KIB" envDefault:"65536"`
	Argon2Iterations  uint32 `env:"CAIRN_ARGON2_ITERATIONS" envDefault:"3"`
	Argon2Parallelism uint8  `env:"CAIRN_ARGON2_PARALLELISM" envDefault:"2"`

	// SessionTTL bounds how long a sign-in lasts without activity.
	SessionTTL time.Duration `env:"CAIRN_SESSION_TTL" envDefault:"168h"`
	// SecureCookies drops the Secure attribute only when explicitly turned off
	// for plain-HTTP local use; the cookie name keeps its __Secure- prefix
	// contract, so browsers refuse it over plain HTTP anyway.
	SecureCookies bool `env:"CAIRN_SECURE_COOKIES" envDefault:"true"`

	// ToolVersions are the exact OpenTofu versions workspaces may select;
	// each must exist in the toolchain mirror.
	ToolVersions []string `env:"CAIRN_TOOL_VERSIONS" envDefault:"1.10.6" envSeparator:","`

	// OperatorToken authorizes the operator-only API (launch control,
	// suspensions). Unset: that API answers 503.
	OperatorToken Secret `env:"CAIRN_OPERATOR_TOKEN"`

	// WorkerPollInterval is how often an idle worker asks PostgreSQL for jobs;
	// the database/sql River driver has no LISTEN, so this bounds dispatch
	// latency.
	WorkerPollInterval time.Duration `env:"CAIRN_WORKER_POLL_INTERVAL" envDefault:"100ms"`

	// ToolchainDir is the checksum-verified toolchain mirror
	// (<dir>/<tool>/<version>/<tool> plus SHA256SUMS) sandboxes install from.
	ToolchainDir string `env:"CAIRN_TOOLCHAIN_DIR" envDefault:".tools/toolchains"`
	// SandboxBwrap is how the local sandbox driver uses bubblewrap: auto
	// (when installed), always (refuse to run without it) or never.
	SandboxBwrap string `env:"CAIRN_SANDBOX_BWRAP" envDefault:"auto"`
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
	return cfg, nil
}

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
	if c.WorkerPollInterval < time.Millisecond || c.WorkerPollInterval > time.Minute {
		problems = append(problems, errors.New("CAIRN_WORKER_POLL_INTERVAL must be between 1ms and 1m"))
	}
	return errors.Join(problems...)
}

// AuthReady reports whether AUTH_SECRET is present and strong enough. Without
// it every authenticated surface answers 503.
func (c Config) AuthReady() bool { return len(c.AuthSecret) >= MinSecretBytes }

// MasterKeyBytes decodes CAIRN_MASTER_KEY (32 bytes, standard or URL base64).
// It returns nil when the key is absent or malformed, so sealing fails closed.
func (c Config) MasterKeyBytes() []byte { return decodeKey(c.MasterKey) }

// IdempotencyKeyBytes decodes IDEMPOTENCY_HMAC_KEY like MasterKeyBytes.
func (c Config) IdempotencyKeyBytes() []byte { return decodeKey(c.IdempotencyHMACKey) }

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

// Logger builds the process logger from the log settings.
func (c Config) Logger(process string) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if c.LogFormat == "text" {
		h = slog.NewTextHandler(os.Stderr, opts)
	} else {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	return slog.New(h).With("process", process)
}
