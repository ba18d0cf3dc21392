package domain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/checkrun"
	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/capability"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/notify"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/platform/secret"
	"github.com/cairnhq/cairn/api/platform/telemetry"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/registry"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/serviceaccount"
	"github.com/cairnhq/cairn/api/state"
	"github.com/cairnhq/cairn/api/team"
	"github.com/cairnhq/cairn/api/trigger"
	"github.com/cairnhq/cairn/api/varset"
	"github.com/cairnhq/cairn/api/workspace"
)

// InsertNotifyCooldown is the shortest time between two insert
// notifications of one queue from one process.
const InsertNotifyCooldown = 2 * time.Millisecond

// RunEventsChannel is the PostgreSQL notification channel the database
// signals a run's new log chunks and status changes on (migration 00021).
const RunEventsChannel = "cairn_run_events"

// Services are the domain services a process works with: the API serves
// them on /v1 and /api/v2, the worker runs their jobs. Without a database
// they are nil and every protected operation fails closed before reaching
// them.
type Services struct {
	Audit           *audit.Service
	Identity        *identity.Service
	Workspaces      *workspace.Service
	ServiceAccounts *serviceaccount.Service
	Launch          *launch.Service
	Runs            *run.Service
	State           *state.Service
	Policies        *policy.Service
	Credentials     *credential.Service
	Teams           *team.Service
	// GitHub is the code-host app; nil without a database.
	GitHub *github.Service
	// RunEvents wakes live run streams when a run's log or status changes.
	RunEvents *notify.Hub
	// Registry is the private module registry.
	Registry *registry.Service
	// RegistryCodeHost publishes module versions from the code host.
	RegistryCodeHost *registry.CodeHost
	// Varsets is the organization's variable sets.
	Varsets *varset.Service
	// Triggers are run triggers between workspaces.
	Triggers *trigger.Service
}

// Deps is everything a process is assembled with. DB is nil when
// DATABASE_URL is unset: health still answers, everything else fails
// closed.
type Deps struct {
	Config   config.Config
	DB       *sqlx.DB
	Logger   *slog.Logger
	Identity *identity.Service
	Services Services
	// Blobs is the sealed artifact store (nil without a master key).
	Blobs *blob.Store
	// Sealer seals sensitive values at rest (nil without a master key:
	// they fail closed).
	Sealer *seal.Sealer
	// Checks follows code-host runs with check runs; it observes every
	// run write. It publishes nothing until given the app's clients
	// (cairn-worker does that).
	Checks *checkrun.Service
	// Tracing exports request spans (nil: none); the process sets and
	// owns it and shuts it down after the server.
	Tracing *telemetry.Tracing
}

// Assemble wires every domain service from configuration. Without a
// database or AUTH_SECRET the services stay nil, and the surfaces that need
// them fail closed.
func Assemble(cfg config.Config, conn *sqlx.DB, logger *slog.Logger) (Deps, error) {
	deps := Deps{Config: cfg, DB: conn, Logger: logger}
	if conn == nil || !cfg.AuthReady() {
		return deps, nil
	}
	ident, err := identity.NewService(conn, IdentityOptions(cfg))
	if err != nil {
		return Deps{}, err
	}
	deps.Identity = ident
	// A missing master key leaves the sealer nil: sensitive values then
	// fail closed while everything else keeps working.
	sealer, _ := seal.NewSealer(cfg.MasterKeyBytes())
	deps.Sealer = sealer
	blobs, err := openBlobs(cfg)
	if err != nil {
		return Deps{}, err
	}
	deps.Blobs = blobs
	variableDigestKey := secret.Derive(cfg.AuthSecret, "variable-digest")
	tools := workspace.ToolVersions{OpenTofu: cfg.ToolVersions, Terraform: cfg.TerraformVersions}
	workspaces := workspace.NewService(conn, sealer, variableDigestKey, tools.Pinned())
	workspaces.ReserveEnvironmentNames(credential.RunnerOwnsEnvironmentName)
	states := state.NewService(conn, blobs, workspaces, logger)
	admission := launch.NewService(conn, logger)
	// An insert-only River client: jobs a mutation implies are inserted in
	// its transaction, with a NOTIFY on their queue that wakes a worker when
	// it commits. River spaces its notifications per queue by its
	// FetchCooldown (100 ms by default); the announcing wrapper notifies
	// every job that can start, since an idle worker polls only once a
	// minute.
	riverClient, err := river.NewClient(riverdatabasesql.New(conn.DB), &river.Config{Logger: config.LibraryLogger(logger),
		FetchCooldown: InsertNotifyCooldown})
	if err != nil {
		return Deps{}, fmt.Errorf("creating job inserter: %w", err)
	}
	inserter := notify.AnnouncingInserter{Jobs: riverClient}
	policies := policy.NewService(conn, blobs, workspaces, admission, inserter, logger, policy.Options{
		EvaluationTimeout: cfg.PolicyEvaluationTimeout, Capabilities: capability.NewSigner(cfg.AuthSecret)})
	// The workload-identity issuer signs with keys of its own, sealed
	// under the master key like every other secret at rest.
	issuer := credential.NewIssuer(conn, sealer, cfg.Issuer()+credential.IssuerPath)
	creds := credential.NewService(conn, sealer, workspaces, admission, issuer, credential.Options{
		HMACKey:       cfg.IdempotencyKeyBytes(),
		HandleKey:     secret.Derive(cfg.AuthSecret, "credential-handle"),
		TokenLifetime: cfg.PhaseTimeout,
	})
	app, err := github.NewApp(cfg)
	if err != nil {
		return Deps{}, err
	}
	// Every run write passes the check-run observer; only cairn-worker
	// publishes (through the app's installation clients).
	checks := checkrun.NewService(conn, inserter, logger, checkrun.Options{DashboardURL: cfg.DashboardURL,
		Clients: app.CheckClients(), AppID: app.ID()})
	deps.Checks = checks
	runs := run.NewService(conn, blobs, workspaces, states, admission, policies, creds, inserter, logger, run.Options{
		ApprovalTimeout: cfg.ApprovalTimeout,
		TokenKey:        secret.Derive(cfg.AuthSecret, "run-token"),
		PlanMaxAttempts: cfg.PlanMaxAttempts,
		LogSegmentBytes: cfg.LogSegmentBytes,
		RunLogMaxBytes:  cfg.RunLogMaxBytes,
		Observer:        checks,
		ToolVersions:    tools.Pinned(),
	})
	states.Observe(runs)
	workspaces.ReadCurrentRuns(run.CurrentRunLateral)
	teams := team.NewService(conn, workspaces)
	modules := registry.NewService(conn, blobs, registry.Options{Logger: logger,
		CursorKey: secret.Derive(cfg.AuthSecret, "registry-cursor")})
	// Tag pushes of bound repositories publish module versions: the code
	// host's acceptance transaction hands them to the registry.
	moduleCodeHost := registry.NewCodeHost(conn, modules, app, inserter, logger)
	deps.Services = Services{
		Audit:           audit.NewService(conn),
		Identity:        ident,
		Workspaces:      workspaces,
		ServiceAccounts: serviceaccount.NewService(conn, secret.Derive(cfg.AuthSecret, "service-account-token")),
		Launch:          admission,
		State:           states,
		Policies:        policies,
		Credentials:     creds,
		Teams:           teams,
		Runs:            runs,
		GitHub: github.NewService(conn, app, workspaces, runs, inserter,
			secret.Derive(cfg.AuthSecret, "github-installation-state"), logger,
			github.Options{Checks: checks, ForkRunsPerHour: cfg.ForkRunsPerHour, Tags: moduleCodeHost}),
		RunEvents:        notify.New(cfg.DatabaseURL.Reveal(), RunEventsChannel, logger),
		Registry:         modules,
		RegistryCodeHost: moduleCodeHost,
		// Set values are pinned and checked like workspace variables:
		// the same sealer and digest key.
		Varsets:  varset.NewService(conn, sealer, variableDigestKey),
		Triggers: trigger.NewService(conn, workspaces, runs, logger),
	}
	return deps, nil
}

// openBlobs opens sealed artifact storage: CAIRN_BLOB_URL when set (S3 for
// several nodes), else the data directory. Without a master key there is
// none: storing or reading artifacts fails closed.
func openBlobs(cfg config.Config) (*blob.Store, error) {
	sealer, err := seal.NewStreamSealer(cfg.MasterKeyBytes())
	if errors.Is(err, seal.ErrNoKey) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if cfg.BlobURL != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return blob.OpenURL(ctx, cfg.BlobURL, cfg.BlobPrefix, blob.S3Credentials{
			AccessKeyID:     cfg.S3AccessKeyID,
			SecretAccessKey: cfg.S3SecretAccessKey.Reveal(),
		}, sealer)
	}
	return blob.OpenDir(filepath.Join(cfg.DataDir, "blobs"), cfg.BlobPrefix, sealer)
}

// IdentityOptions derives the identity service's settings and keys.
func IdentityOptions(cfg config.Config) identity.Options {
	return identity.Options{
		Password: identity.PasswordParams{
			MemoryKiB:   cfg.Argon2Memory,
			Iterations:  cfg.Argon2Iterations,
			Parallelism: cfg.Argon2Parallelism,
		},
		HashBudgetKiB: int64(cfg.Argon2BudgetMiB) * 1024,
		HashWait:      cfg.Argon2Wait,
		SessionTTL:    cfg.SessionTTL,
		TokenKey:      secret.Derive(cfg.AuthSecret, "session-token"),
		SubjectKey:    secret.Derive(cfg.AuthSecret, "sign-in-subject"),
		InvitationKey: secret.Derive(cfg.AuthSecret, "invitation-token"),
	}
}
