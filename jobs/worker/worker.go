package worker

import (
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/cairnhq/cairn/api/assembly/domain"
	"github.com/cairnhq/cairn/api/checkrun"
	"github.com/cairnhq/cairn/api/dispatch"
	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/telemetry"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/registry"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/sweep"
	"github.com/cairnhq/cairn/jobs/maintenance"
	"github.com/cairnhq/cairn/jobs/moduleingest"
	"github.com/cairnhq/cairn/jobs/policybuild"
	"github.com/cairnhq/cairn/jobs/policyeval"
	"github.com/cairnhq/cairn/jobs/providercache"
	"github.com/cairnhq/cairn/jobs/runner"
	"github.com/cairnhq/cairn/jobs/runtrigger"
	"github.com/cairnhq/cairn/jobs/sandbox"
	"github.com/cairnhq/cairn/jobs/sourceingest"
)

// New builds the River client of cairn-worker with every worker and periodic
// job registered; run phases and policy builds use driver. The client
// listens for the NOTIFY every inserting transaction sends (see
// listeningDriver), so a committed job starts at once, and wakes a queue
// itself while a job it snoozed or failed waits for a retry due within
// seconds (queueWakes); it also polls every cfg.WorkerPollInterval in case
// a notification was missed.
//
// Stop it with StopAndCancel and a deadline of at least StopWindow(cfg):
// canceled phase jobs stop their sandboxed commands (an apply with its
// interrupt and grace), record what the attempt left, and only then return.
//
// tracing (nil: none) traces every job and every sandboxed phase.
func New(cfg config.Config, conn *sqlx.DB, driver sandbox.Driver, logger *slog.Logger, tracing *telemetry.Tracing) (*river.Client[*sql.Tx], error) {
	workers := river.NewWorkers()
	add := func(err error) error {
		if err != nil {
			return fmt.Errorf("registering workers: %w", err)
		}
		return nil
	}
	if err := add(river.AddWorkerSafely(workers, &maintenance.IdempotencySweepWorker{DB: conn, Logger: logger})); err != nil {
		return nil, err
	}
	if err := add(river.AddWorkerSafely(workers, &maintenance.SignInFailureSweepWorker{DB: conn})); err != nil {
		return nil, err
	}
	if err := add(river.AddWorkerSafely(workers, &maintenance.LaunchFunnelWorker{DB: conn, Logger: logger})); err != nil {
		return nil, err
	}
	periodic := []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return maintenance.IdempotencySweepArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true, ID: "idempotency_sweep"}),
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return maintenance.SignInFailureSweepArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true, ID: "sign_in_failure_sweep"}),
		river.NewPeriodicJob(river.PeriodicInterval(maintenance.FunnelInterval),
			func() (river.JobArgs, *river.InsertOpts) { return maintenance.LaunchFunnelArgs{}, nil },
			&river.PeriodicJobOpts{ID: "launch_funnel"}),
	}
	// Every worker serves every queue launch control may route a workflow
	// to, so a routed job never waits on a queue nobody listens on.
	queues := map[string]river.QueueConfig{}
	for _, q := range launch.Queues {
		queues[q] = river.QueueConfig{MaxWorkers: queueWorkers[q]}
	}

	deps, err := domain.Assemble(cfg, conn, logger)
	if err != nil {
		return nil, err
	}
	if deps.Blobs != nil {
		sweeper := sweep.NewService(conn, deps.Blobs, sweep.Options{MinAge: cfg.BlobSweepMinAge})
		if err := add(river.AddWorkerSafely(workers, &maintenance.BlobSweepWorker{Sweep: sweeper, Logger: logger})); err != nil {
			return nil, err
		}
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(max(time.Second, cfg.BlobSweepInterval)),
			func() (river.JobArgs, *river.InsertOpts) { return maintenance.BlobSweepArgs{}, nil },
			&river.PeriodicJobOpts{ID: "blob_orphan_sweep"}))
	}
	if runs := deps.Services.Runs; runs != nil {
		r, err := newRunner(cfg, runs, driver, logger)
		if err != nil {
			return nil, err
		}
		r.Tracing = tracing
		identity, err := workerIdentity()
		if err != nil {
			return nil, err
		}
		// A phase job is bounded by the rescue horizon, which outlasts
		// the longest phase: a dead worker's phase jobs are rescued.
		rescue, _ := RescueAfter(cfg)
		if err := add(river.AddWorkerSafely(workers, &runner.PhaseWorker{Runner: r, CapacityRetry: 250 * time.Millisecond, Identity: identity,
			JobTimeout: rescue})); err != nil {
			return nil, err
		}
		if err := add(river.AddWorkerSafely(workers, &runner.ExpiryWorker{Runs: runs, DB: conn})); err != nil {
			return nil, err
		}
		if err := add(river.AddWorkerSafely(workers, &runner.ReapWorker{Runs: runs, HeartbeatTimeout: cfg.AttemptHeartbeatTimeout})); err != nil {
			return nil, err
		}
		if triggers := deps.Services.Triggers; triggers != nil {
			if err := add(river.AddWorkerSafely(workers, &runtrigger.Worker{Triggers: triggers, Logger: logger})); err != nil {
				return nil, err
			}
		}
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(max(time.Second, cfg.AttemptHeartbeatTimeout/3)),
			func() (river.JobArgs, *river.InsertOpts) { return run.ReapArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true, ID: "run_attempt_reaper"}))
	}
	if checks := deps.Checks; checks != nil {
		// Check runs publish through the code-host app's installation
		// clients; without an app, a sync fails closed and its
		// publication stays pending.
		if err := add(river.AddWorkerSafely(workers, &checkrun.SyncWorker{Checks: checks})); err != nil {
			return nil, err
		}
		if err := add(river.AddWorkerSafely(workers, &checkrun.ReconcileWorker{Checks: checks})); err != nil {
			return nil, err
		}
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(checkrun.ReconcileInterval),
			func() (river.JobArgs, *river.InsertOpts) { return checkrun.ReconcileArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true, ID: "check_run_reconciler"}))
	}
	// One dispatch reconciler redelivers the lost jobs of every kind this
	// worker serves.
	dispatches := map[string]dispatch.Handler{}
	if gh := deps.Services.GitHub; gh != nil {
		if err := add(river.AddWorkerSafely(workers, &sourceingest.Worker{GitHub: gh})); err != nil {
			return nil, err
		}
		queues[github.QueueSources] = river.QueueConfig{MaxWorkers: 4}
		dispatches[github.DispatchIngestion] = gh.Redeliver
		if ch := deps.Services.RegistryCodeHost; ch != nil {
			// Module ingestions share the code host's queue.
			if err := add(river.AddWorkerSafely(workers, &moduleingest.Worker{CodeHost: ch})); err != nil {
				return nil, err
			}
			dispatches[registry.DispatchIngestion] = ch.Redeliver
		}
	}
	if policies := deps.Services.Policies; policies != nil {
		program, err := policyeval.ProgramBeside()
		if err != nil {
			return nil, fmt.Errorf("locating the policy build program: %w", err)
		}
		if err := add(river.AddWorkerSafely(workers, &policybuild.Worker{Policies: policies, Driver: driver, Program: program,
			BuildTimeout: cfg.PolicyBuildTimeout, CapacityRetry: time.Second, MaxCPUSeconds: cfg.PolicyBuildCPUSeconds,
			MaxMemoryBytes: cfg.PolicyBuildMemoryMiB << 20, Logger: logger})); err != nil {
			return nil, err
		}
		dispatches[policy.DispatchPublication] = policies.Redeliver
	}
	if len(dispatches) > 0 {
		if err := add(river.AddWorkerSafely(workers, &maintenance.DispatchReconcileWorker{DB: conn, Handlers: dispatches,
			Logger: logger})); err != nil {
			return nil, err
		}
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(dispatch.ReconcileInterval),
			func() (river.JobArgs, *river.InsertOpts) { return maintenance.DispatchReconcileArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true, ID: "workflow_dispatch_reconciler"}))
	}

	queueNames := make([]string, 0, len(queues))
	for q := range queues {
		queueNames = append(queueNames, q)
	}
	rescueAfter, jobTimeout := RescueAfter(cfg)
	wakes := newQueueWakes(queueNames, min(cfg.WorkerPollInterval, RetryPoll))
	client, err := river.NewClient(newListeningDriver(conn.DB, cfg.DatabaseURL.Reveal(), wakes), &river.Config{
		// River's routine (producer job counts, maintenance passes) is
		// debug; its warnings and errors stay as they are.
		Logger: config.LibraryLogger(logger),
		// A SIGKILLed worker leaves its jobs running in river_job; the
		// rescuer (on the elected leader) releases them after this long.
		RescueStuckJobsAfter: rescueAfter,
		JobTimeout:           jobTimeout,
		Queues:               queues,
		Workers:              workers,
		// The poll is a safety net: every job that can start is announced
		// (see queueWakes).
		FetchPollInterval: cfg.WorkerPollInterval,
		// A notified fetch waits out this cooldown after the previous
		// fetch (a poll, say): it is what dispatch latency is made of.
		FetchCooldown: min(cfg.WorkerPollInterval, FetchCooldown),
		PeriodicJobs:  periodic,
		Middleware:    jobMiddleware(logger, tracing, wakes),
	})
	if err != nil {
		return nil, fmt.Errorf("creating river client: %w", err)
	}
	return client, nil
}

// jobMiddleware wraps every job: tracing outside, and innermost the
// failure report, so a panic or an error's text reaches neither the trace
// nor River's logs and job rows. Between them, a job to be retried soon
// has its queue woken when it is due (wakes).
func jobMiddleware(logger *slog.Logger, tracing *telemetry.Tracing, wakes *queueWakes) []rivertype.Middleware {
	return []rivertype.Middleware{tracing.JobMiddleware(JobKinds), &retryWakeMiddleware{wakes: wakes}, &failureMiddleware{logger: logger}}
}

// RetryPoll is how often a queue is woken while a job snoozed or failed
// for a few seconds waits to be retried: about as long as the shortest
// snooze (a phase waiting for its region's capacity).
const RetryPoll = 250 * time.Millisecond

// JobKinds are the job kinds a river_job span may name.
var JobKinds = []string{
	maintenance.IdempotencySweepArgs{}.Kind(), maintenance.SignInFailureSweepArgs{}.Kind(), maintenance.BlobSweepArgs{}.Kind(),
	run.PhaseArgs{}.Kind(), run.ExpiryArgs{}.Kind(), run.ReapArgs{}.Kind(), run.TriggerArgs{}.Kind(),
	policy.PublicationArgs{}.Kind(), maintenance.DispatchReconcileArgs{}.Kind(),
}

// defaultJobTimeout is River's own default for jobs without a Timeout.
const defaultJobTimeout = time.Minute

// RescueAfter is how long a job may run before River's rescuer takes it
// back, and the job timeout that goes with it (River refuses a rescue
// shorter than the timeout). Unset, it outlasts the longest phase job: its
// timeout, the apply's interrupt grace and the evidence window, with a
// margin. It is also the phase jobs' timeout (River rescues no unbounded
// job), so a configured value must outlast the phase timeout and its
// interrupt grace (config checks that). A setting under a minute (crash
// drills) shortens the timeout of jobs without their own to match.
func RescueAfter(cfg config.Config) (rescue, jobTimeout time.Duration) {
	rescue = cfg.JobRescueAfter
	if rescue <= 0 {
		rescue = max(time.Hour, cfg.PhaseTimeout+StopWindow(cfg)+5*time.Minute)
	}
	return rescue, min(defaultJobTimeout, rescue)
}

// FetchCooldown is the shortest time between two job fetches of one queue
// (and between two insert notifications of one process): short enough that
// a job committed just after a fetch starts within it, long enough that a
// burst of inserts does not become a burst of fetch queries.
const FetchCooldown = 2 * time.Millisecond

// StopWindow is how long a stopping worker waits for its jobs: an
// interrupted apply's grace, then recording its evidence, with a margin.
func StopWindow(cfg config.Config) time.Duration {
	return cfg.ApplyInterruptGrace + runner.EvidenceWindow + 15*time.Second
}

// queueWorkers bounds the concurrent jobs of each routable queue.
var queueWorkers = map[string]int{river.QueueDefault: 20, run.QueueRuns: 16, policy.QueuePolicy: 4}

// NewSandboxDriver is the local sandbox driver under the data directory,
// with the configured isolation and ceilings. A driver that cannot isolate
// is returned too (its Status says why), so the worker can report it and
// refuse the phases it picks; only a configuration error is an error.
func NewSandboxDriver(cfg config.Config, logger *slog.Logger) (*sandbox.Local, error) {
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	mode := sandbox.RequireNamespaces
	if cfg.SandboxIsolation == "none" {
		mode = sandbox.NoIsolation
	}
	driver, err := sandbox.NewLocal(filepath.Join(dataDir, "sandboxes"), sandbox.LocalOptions{
		Isolation: mode, Base: cfg.SandboxBase, BaseDigest: cfg.SandboxBaseDigest, BwrapPath: cfg.SandboxBwrap, Cgroup: cfg.SandboxCgroup, SandboxUIDBase: cfg.SandboxUIDBase,
		Defaults: sandbox.Limits{MaxMemoryBytes: cfg.SandboxMemoryMiB << 20, MaxProcesses: cfg.SandboxMaxProcesses},
		Logger:   logger,
	})
	if err != nil {
		return nil, fmt.Errorf("creating sandbox driver: %w", err)
	}
	return driver, nil
}

// newRunner builds the sandbox runner: the sandbox driver, the toolchain
// cache under the data directory, and where sandboxed tofu finds the API.
func newRunner(cfg config.Config, runs *run.Service, driver sandbox.Driver, logger *slog.Logger) (*runner.Runner, error) {
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	mirror, err := filepath.Abs(cfg.ToolchainDir)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "https" {
		// The remote backend always speaks HTTPS; plan attempts will fail
		// with a clear classification until the API serves TLS.
		logger.Warn("CAIRN_PUBLIC_URL is not https: sandboxed tofu cannot reach the API", "public_url", cfg.PublicURL)
	}
	caFile := cfg.RunnerCAFile
	if caFile == "" {
		caFile = os.Getenv("SSL_CERT_FILE")
	}
	program, err := policyeval.ProgramBeside()
	if err != nil {
		return nil, fmt.Errorf("locating the policy evaluation program: %w", err)
	}
	// Evaluations reach the API as sandboxed tofu does: HTTPS at the
	// public host, trusting the runner's CA file.
	evaluator, err := policyeval.New(driver, policyeval.Options{Program: program, APIOrigin: "https://" + u.Host, CAFile: caFile,
		MaxMemoryBytes: cfg.PolicyEvaluationMemoryMiB << 20, Logger: logger})
	if err != nil {
		return nil, err
	}
	var providers *providercache.Cache
	if m := cfg.ProviderMirror; m != "" && !strings.HasPrefix(m, "https://") {
		providers = providercache.New(filepath.Join(dataDir, "providercache"), m, logger)
	}
	// Sandboxed tofu reads the roots from one file: the runner's CA file
	// and the system's certificate directories folded together.
	trust := filepath.Join(dataDir, "runner-trust.pem")
	if ok, err := runner.TrustBundle(trust, caFile, runner.CertDirs()); err != nil {
		return nil, err
	} else if !ok {
		trust = caFile
	}
	logger.Info("sandbox runner ready", "driver", driver.Name(), "isolation", driver.Status().Profile.Isolation, "api_host", u.Host)
	return &runner.Runner{
		Runs: runs, Driver: driver, Tools: sandbox.NewToolCache(mirror, filepath.Join(dataDir, "toolcache")), Logger: logger,
		APIHost: u.Host, CAFile: trust, ProviderMirror: cfg.ProviderMirror, Providers: providers, WorkerID: runner.WorkerName(), Heartbeat: 500 * time.Millisecond,
		PhaseTimeout: cfg.PhaseTimeout, ApplyInterruptGrace: cfg.ApplyInterruptGrace, LogFlush: 200 * time.Millisecond,
		Evaluator: evaluator,
		// GC runs when the heap grows by GoGC %, or as it nears half the
		// sandbox's ceiling, whichever comes first.
		GoGC: cfg.SandboxGoGC, GoMemLimit: cfg.SandboxMemoryMiB << 20 / 2,
	}, nil
}
