package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"golang.org/x/sync/errgroup"

	"github.com/cairnhq/cairn/api/archive"
	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/platform/discovery"
	"github.com/cairnhq/cairn/api/platform/telemetry"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/workspace"
	"github.com/cairnhq/cairn/jobs/providercache"
	"github.com/cairnhq/cairn/jobs/sandbox"
)

// Runner runs phase attempts in sandboxes.
type Runner struct {
	Runs   *run.Service
	Driver sandbox.Driver
	// Tracing traces each phase attempt as a sandbox_phase span (nil: none).
	Tracing *telemetry.Tracing
	Tools   *sandbox.ToolCache
	Logger  *slog.Logger
	// APIHost is host[:port] of Cairn's HTTPS API as sandboxed tofu
	// reaches it.
	APIHost string
	// CAFile is the whole set of roots sandboxed commands trust, the
	// API's CA among them (see TrustBundle): they read it as SSL_CERT_FILE
	// and no certificate directory. "" leaves them the system's.
	CAFile string
	// ProviderMirror, when set, is the only place sandboxed tofu installs
	// providers from: a filesystem-mirror directory (bound read-only into
	// each sandbox) or an https:// network mirror.
	ProviderMirror string
	// Providers, when set, is the worker's verified provider cache filled
	// from a filesystem ProviderMirror: sandboxes install from it (read-only)
	// instead of from the mirror itself.
	Providers *providercache.Cache
	// WorkerID names this worker in attempt evidence.
	WorkerID string
	// Heartbeat is how often a running attempt proves it is alive and
	// checks for cancellation.
	Heartbeat time.Duration
	// PhaseTimeout bounds one phase, all of its commands together.
	PhaseTimeout time.Duration
	// ApplyInterruptGrace is how long an interrupted `tofu apply` gets
	// between its interrupt and SIGKILL to stop and write what state it
	// has (zero: the sandbox driver's kill grace).
	ApplyInterruptGrace time.Duration
	// LogFlush is how often buffered log lines are stored.
	LogFlush time.Duration
	// GoGC and GoMemLimit tune the Go runtime of every command of a run's
	// phase (GOGC, GOMEMLIMIT in bytes; zero leaves Go's defaults): tofu and its
	// providers are short-lived, and the sandbox's ceiling, not Go's
	// default heap growth, is what should bound their memory.
	GoGC       int
	GoMemLimit uint64
	// Evaluator runs the policy stage's evaluations (jobs/policyeval: each
	// in its own sandboxed process). Without one every result is an error.
	Evaluator policy.Evaluator
}

// Layout inside a sandbox's work directory: the configuration, and a
// private directory for what the runner writes beside it.
const (
	configDir  = "config"
	privateDir = ".cairn"
	planFile   = "plan.tfplan"
	planJSON   = "plan.json"
	varFile    = "inputs.tfvars"
	cliConfig  = "tofurc"
	// overrideFile points the configuration's backend at Cairn; the
	// _override suffix makes OpenTofu merge it over the user's own
	// backend or cloud block.
	overrideFile = "zz_cairn_backend_override.tf"
	// untrustedState is where an untrusted run's local backend would keep
	// state: it never exists before the plan, and a plan writes none.
	untrustedState = "untrusted.tfstate"
)

// errVariableInvalid means a variable's value is to be written as an HCL
// expression but is not one.
var errVariableInvalid = errors.New("a variable value is not a valid HCL expression")

// errStateMoved means the workspace's state changed while a plan was being
// made, so the plan is not bound to one predecessor state: the runner saw
// it before the commit, or the commit did.
var errStateMoved = run.ErrStateMoved

// EvidenceWindow bounds recording what an interrupted attempt left after
// its command stopped (sealing the emergency state, committing), which
// happens after the job's own context ended when the worker shuts down.
const EvidenceWindow = 45 * time.Second

// attemptEnv is one running attempt's sandbox and bookkeeping.
type attemptEnv struct {
	st run.Started
	sb sandbox.Sandbox
	// session runs the phase's commands in one entry into sb.
	session sandbox.Session
	logs    *run.LogSink
	timings run.Timings
	// secrets are the values masked in logs and redacted from the plan
	// diff: the run token, every sensitive input and every credential.
	secrets []string
	// mirror is where this attempt's tofu installs providers from: the
	// verified cache, the operator's mirror, or "" for the registries.
	mirror string
	// predecessor is the state version a plan is made against.
	predecessor *string
	// credentialEnv is the environment the redeemed credentials set for
	// every tofu command.
	credentialEnv map[string]string
	// variableEnv is the run's pinned env-category variables.
	variableEnv map[string]string
	// cli is the program the run's pinned tool version names (tofu, or
	// terraform where the operator offers it), installed in the sandbox
	// under that name.
	cli string
	mu  sync.Mutex
	// profile is what the sandbox applied, or was refused.
	profile *run.SandboxProfile
	// workStarted is set before the first tofu command that does the
	// phase's work starts: any command of a plan, and an apply's apply
	// command (its init runs without a backend and only installs providers
	// and modules into this sandbox). Until then the attempt has changed
	// nothing, and an apply that fails needs no recovery.
	workStarted bool
	// failureSaid is the end of what the last tofu command wrote to
	// stderr, where tofu puts its diagnostics, when it exited nonzero.
	failureSaid string
	// life outlives the phase's context until the attempt is recorded:
	// heartbeats and log flushes go on while an interrupted command uses
	// its grace period.
	life context.Context
	// halted is set when the run was canceled and the heartbeat stopped
	// the attempt.
	halted atomic.Bool
	// forced is set when the run was force-canceled and the heartbeat
	// killed the sandbox.
	forced atomic.Bool
	// shuttingDown reports whether the job's context ended: the worker is
	// stopping.
	shuttingDown func() bool
	// timedOut reports whether the phase outlived PhaseTimeout.
	timedOut func() bool
}

// interruption names why a command was stopped, or "" when err is not a
// stop.
func (e *attemptEnv) interruption(err error) string {
	switch {
	case err == nil:
		return ""
	case e.halted.Load():
		return run.InterruptCanceled
	case errors.Is(err, sandbox.ErrTimedOut) || e.timedOut():
		return run.InterruptTimedOut
	case errors.Is(err, sandbox.ErrCanceled):
		return run.InterruptShutdown
	}
	return ""
}

// sandbox is the attempt's sandbox once created, for the heartbeat's
// goroutine.
func (e *attemptEnv) sandbox() sandbox.Sandbox {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sb
}

func (e *attemptEnv) timed(step string, since time.Time) {
	e.mu.Lock()
	e.timings[step] = float64(time.Since(since).Microseconds()) / 1000
	e.mu.Unlock()
}

func (e *attemptEnv) snapshot() run.Timings {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(run.Timings, len(e.timings))
	for k, v := range e.timings {
		out[k] = v
	}
	return out
}

// Execute runs one started attempt to its recorded end. It returns only
// infrastructure errors the job should retry before anything was recorded.
// ctx is the job's: when it ends the worker is stopping, and the attempt's
// command is stopped as it is on cancel (an apply gets its interrupt and
// grace), its evidence recorded, and a plan left to be retried.
func (r *Runner) Execute(ctx context.Context, st run.Started) error {
	log := r.Logger.With("run_id", st.Run.ID, "attempt_id", st.Attempt.ID, "phase", st.Attempt.Phase)
	started := time.Now()
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	defer endLife()
	// PhaseTimeout bounds the whole phase, its commands together: each
	// command's own wall clock alone would let a phase of three commands
	// run three times as long.
	timed, stopTimer := context.WithTimeoutCause(ctx, r.PhaseTimeout, sandbox.ErrTimedOut)
	defer stopTimer()
	phaseCtx, stopPhase := context.WithCancel(timed)
	defer stopPhase()
	env := &attemptEnv{st: st, life: life, shuttingDown: func() bool { return ctx.Err() != nil },
		timedOut: func() bool { return errors.Is(context.Cause(timed), sandbox.ErrTimedOut) },
		timings: run.Timings{"queue_wait": float64(st.QueueWait.Microseconds()) / 1000,
			"start": float64(st.StartTook.Microseconds()) / 1000}}
	if st.Credentials != nil {
		env.timings["credential_issue"] = float64(st.CredentialIssue.Microseconds()) / 1000
	}
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		r.heartbeat(life, st.Attempt.ID, func() { env.halted.Store(true); stopPhase() }, func() {
			// A force-cancel: the sandbox dies now, its command with it.
			env.halted.Store(true)
			env.forced.Store(true)
			stopPhase()
			if sb := env.sandbox(); sb != nil {
				if err := sb.Destroy(life); err != nil {
					log.Warn("killing the force-canceled sandbox failed", "error", err)
				}
			}
		})
	}()
	spanCtx, span := r.Tracing.Start(phaseCtx, "sandbox_phase", map[string]telemetry.Value{
		"run_id": telemetry.ID(st.Run.ID), "attempt_id": telemetry.ID(st.Attempt.ID),
		"phase":   telemetry.Enum(st.Attempt.Phase, run.PhasePlan, run.PhaseApply),
		"attempt": telemetry.Count(int64(st.Attempt.Number)),
	})
	err := r.execute(spanCtx, env)
	span.Set(map[string]telemetry.Value{"duration": telemetry.Duration(time.Since(started))})
	span.End(err)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	_ = telemetry.Emit(ctx, r.Logger, telemetry.Event{Name: "run_phase_finished", Fields: map[string]telemetry.Value{
		"run_id": telemetry.ID(st.Run.ID), "attempt_id": telemetry.ID(st.Attempt.ID),
		"phase":    telemetry.Enum(st.Attempt.Phase, run.PhasePlan, run.PhaseApply),
		"outcome":  telemetry.Enum(outcome, "ok", "error"),
		"duration": telemetry.Duration(time.Since(started)),
	}})
	stopPhase()
	endLife()
	<-beating
	if env.logs != nil {
		flushErr := env.logs.Flush(context.WithoutCancel(ctx), true)
		if flushErr != nil {
			log.Warn("storing final log lines failed", "error", flushErr)
		}
	}
	if env.sb != nil {
		start := time.Now()
		if derr := env.sb.Destroy(context.WithoutCancel(ctx)); derr != nil {
			log.Warn("destroying sandbox failed", "error", derr)
		}
		env.timed("sandbox_destroy", start)
	}
	if err == nil {
		return nil
	}
	if reason := credential.ReasonOf(err); reason != "" && !env.workStarted {
		// The pinned credentials could not be redeemed: the run ends
		// (a plan as plan_credentials_required) and nothing ran.
		log.Info("phase attempt ended without its credentials", "reason", reason)
		return r.Runs.FailCredentials(context.WithoutCancel(ctx), st.Attempt.ID, reason, env.profile)
	}
	classification := classify(err, env)
	log.Info("phase attempt ended without a result", "classification", classification, "error", err, "work_started", env.workStarted)
	if !env.workStarted {
		// Nothing that does the phase's work ran, so an apply changed
		// nothing: no recovery.
		_, ferr := r.Runs.FailUnstartedAttempt(context.WithoutCancel(ctx), st.Attempt.ID, classification, env.profile, env.snapshot())
		return ferr
	}
	_, ferr := r.Runs.FailAttempt(context.WithoutCancel(ctx), st.Attempt.ID, classification, exitCodeOf(err), env.snapshot())
	return ferr
}

// heartbeat proves liveness until ctx ends and stops the attempt once when
// its run is canceled, and kills it once when it is force-canceled. It
// keeps beating after a stop: an interrupted command may use its grace
// period, and the attempt must not look lost meanwhile.
func (r *Runner) heartbeat(ctx context.Context, attemptID string, stop, kill func()) {
	t := time.NewTicker(r.Heartbeat)
	defer t.Stop()
	var stopOnce, killOnce sync.Once
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			halt, err := r.Runs.Heartbeat(ctx, attemptID)
			switch {
			case err != nil:
			case halt == run.HaltKill:
				stopOnce.Do(func() {})
				killOnce.Do(kill)
			case halt == run.HaltStop:
				stopOnce.Do(stop)
			}
		}
	}
}

// exitError is a tofu command that exited nonzero.
type exitError struct {
	step string
	code int
}

func (e exitError) Error() string { return fmt.Sprintf("tofu %s exited %d", e.step, e.code) }

func exitCodeOf(err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return -1
}

func classify(err error, env *attemptEnv) string {
	var ee exitError
	var ae run.ArchiveError
	switch {
	case env.halted.Load() || errors.Is(err, run.ErrAttemptNotCurrent):
		return run.InterruptCanceled
	case errors.Is(err, sandbox.ErrIsolationUnavailable):
		return "sandbox_isolation_unavailable"
	case errors.Is(err, sandbox.ErrTimedOut) || env.timedOut():
		return run.InterruptTimedOut
	case errors.Is(err, sandbox.ErrCanceled) || env.shuttingDown():
		return run.InterruptShutdown
	case errors.Is(err, sandbox.ErrNotEntered):
		// After the interrupts: a shutdown or timeout that killed the
		// entry while it came up is that interrupt, not a broken entry.
		return "sandbox_entry_failed"
	case errors.Is(err, errProviderChecksum):
		return "provider_checksum_mismatch"
	case errors.As(err, &ee) && lostConnection(env.failureSaid):
		return run.FailureConnectionLost
	case errors.As(err, &ee):
		return ee.step + "_failed"
	case errors.Is(err, errStateMoved):
		return "state_changed_during_plan"
	case errors.Is(err, errPlanJSONTooLarge):
		return "plan_json_too_large"
	case errors.Is(err, errPlanJSONChanged):
		return "plan_json_changed"
	case errors.Is(err, errVariableInvalid):
		return "variable_value_invalid"
	case errors.Is(err, workspace.ErrSnapshotChanged):
		return "input_snapshot_unavailable"
	case errors.Is(err, run.ErrUntrustedInputs):
		return "untrusted_inputs_refused"
	case errors.As(err, &ae), archive.CodeOf(err) != "":
		return "configuration_invalid"
	case errors.Is(err, sandbox.ErrChecksumMismatch):
		return "toolchain_checksum_mismatch"
	case errors.Is(err, providercache.ErrTampered):
		return "provider_cache_checksum_mismatch"
	}
	return "runner_error"
}

func (r *Runner) execute(ctx context.Context, env *attemptEnv) error {
	st := env.st
	if err := r.refuseUnisolated(ctx, env); err != nil {
		return err
	}
	// What the attempt reads and writes in the database is gathered
	// while its sandbox is made: neither needs the other. Nothing else
	// happens before both are done, in the order it always did, and
	// nothing gathered outlives the attempt.
	gatherStart := time.Now()
	gathered := async(func() (attemptFacts, error) {
		facts, err := r.gather(ctx, st)
		if err == nil {
			env.timed("gather", gatherStart)
		}
		return facts, err
	})
	defer func() { _, _ = gathered() }()

	start := time.Now()
	var err error
	spec := sandbox.Spec{Name: st.SandboxName, Limits: sandbox.Limits{WallClock: r.PhaseTimeout}, Env: map[string]string{
		"TF_IN_AUTOMATION": "1", "TF_INPUT": "0", "CHECKPOINT_DISABLE": "1", "TF_FORCE_LOCAL_BACKEND": "1",
		// Provider plugins listen on a Unix socket made in this directory;
		// the sandbox's own TMPDIR can be longer than a socket path may be.
		"PLUGIN_UNIX_SOCKET_DIR": "/tmp",
	}}
	if r.GoGC > 0 {
		spec.Env["GOGC"] = strconv.Itoa(r.GoGC)
	}
	if r.GoMemLimit > 0 {
		spec.Env["GOMEMLIMIT"] = strconv.FormatUint(r.GoMemLimit, 10)
	}
	if r.CAFile != "" {
		spec.ReadOnlyFiles = map[string]string{"ca.pem": r.CAFile}
	}
	mirror := r.ProviderMirror
	if r.Providers != nil {
		// Verified before any sandbox sees it: a tampered package fails
		// the attempt before anything ran.
		if mirror, err = r.Providers.Prepare(ctx); err != nil {
			return fmt.Errorf("preparing the provider cache: %w", err)
		}
		env.timed("provider_cache", start)
		start = time.Now()
	}
	env.mirror = mirror
	if mirror != "" && !strings.HasPrefix(mirror, "https://") {
		spec.ReadOnlyDirs = []string{mirror}
	}
	sb, err := r.Driver.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("creating sandbox: %w", err)
	}
	env.mu.Lock()
	env.sb = sb
	env.mu.Unlock()
	env.session = sb.Session()
	defer env.session.Close()
	env.timed("sandbox_create", start)

	// The toolchain is installed and the sandbox entered before anything
	// else is written into it: bwrap sets up the namespaces and starts the
	// supervisor while the attempt's facts, credentials and configuration
	// are made ready, instead of when the first command is due. The entry
	// runs nothing of the configuration's; its first command still waits
	// for the sandbox evidence below. A failure here is returned where the
	// toolchain step always was, once the sandbox evidence is being
	// recorded and the log has its banner: the attempt ends with both.
	start = time.Now()
	cli, version := workspace.ToolOf(st.Run.ToolVersion)
	env.cli = cli
	entryErr := r.enter(ctx, env, cli, version)
	env.timed("toolchain_install", start)

	facts, err := gathered()
	if err != nil {
		return err
	}
	env.predecessor = facts.predecessor
	secrets := phaseSecrets(facts.token, facts.inputs)
	env.secrets = secrets
	env.variableEnv = variableEnvironment(facts.inputs)
	if env.logs, err = r.Runs.NewLogSink(ctx, st.Run.ID, st.Attempt.Phase, secrets); err != nil {
		return err
	}
	stopFlush := r.flushLoop(env.life, env.logs)
	defer stopFlush()
	profile := evidenceProfile(env.sb.Profile())
	env.profile = &profile
	// The evidence is written while the sandbox is made ready, and must
	// be there before tofu starts.
	recorded := make(chan error, 1)
	go func() { recorded <- r.Runs.RecordSandbox(ctx, st.Attempt.ID, env.sb.ID(), profile) }()
	waitRecorded := sync.OnceValue(func() error { return <-recorded })
	defer waitRecorded()
	// Inside sandbox start, the attempt redeems its one-time credential
	// handle; what it yields goes to this sandbox only and is masked
	// from here on.
	start = time.Now()
	if err := r.redeemCredentials(ctx, env); err != nil {
		return err
	}
	env.timed("credential_redeem", start)
	// Three banner lines: the remote-backend CLI drops the first three
	// lines of an apply log, as HCP Terraform repeats a banner there.
	env.logs.Line("Cairn %s phase of %s, attempt %d", st.Attempt.Phase, st.Run.ID, st.Attempt.Number)
	env.logs.Line("%s %s on %s", cliTitle[cli], version, st.Run.Platform)
	env.logs.Line("Sandbox %s: %s", env.sb.ID(), describeProfile(profile))
	if st.Run.Untrusted() {
		env.logs.Line("Untrusted configuration (%s): this plan gets no state, no sensitive variable, no credential and no", untrustedWho(st.Run))
		env.logs.Line("run token; it plans as if nothing existed yet and can never be applied.")
	}
	if entryErr != nil {
		return entryErr
	}

	start = time.Now()
	if err := r.prepare(ctx, env, facts); err != nil {
		return err
	}
	env.timed("configuration", start)
	if err := waitRecorded(); err != nil {
		return err
	}

	if st.Attempt.Phase == run.PhasePlan {
		return r.plan(ctx, env)
	}
	return r.apply(ctx, env)
}

// enter verifies and installs the phase's toolchain, then enters the
// sandbox's session.
func (r *Runner) enter(ctx context.Context, env *attemptEnv, cli, version string) error {
	tool, err := r.Tools.Verified(ctx, cli, version)
	if err != nil {
		return fmt.Errorf("verifying toolchain: %w", err)
	}
	if err := env.sb.InstallTool(ctx, tool); err != nil {
		return fmt.Errorf("installing toolchain: %w", err)
	}
	if err := env.session.Enter(); err != nil {
		return fmt.Errorf("entering the sandbox: %w", err)
	}
	return nil
}

func (r *Runner) flushLoop(ctx context.Context, sink *run.LogSink) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.LogFlush)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				_ = sink.Flush(ctx, false)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// cliTitle is each CLI's name as a phase log's banner shows it.
var cliTitle = map[string]string{workspace.CLITofu: "OpenTofu", workspace.CLITerraform: "Terraform"}

// attemptFacts are what an attempt reads and writes in the database while
// its sandbox is made. They do not depend on each other, so gather does them
// at once.
type attemptFacts struct {
	inputs    []workspace.ResolvedVariable
	token     string
	workspace workspace.Workspace
	org       string
	// predecessor is the state version a plan is made against, read before
	// tofu reads any state.
	predecessor *string
}

func (r *Runner) gather(ctx context.Context, st run.Started) (attemptFacts, error) {
	var f attemptFacts
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { f.inputs, err = r.Runs.RunInputs(gctx, st.Run); return err })
	g.Go(func() (err error) { f.workspace, err = r.Runs.WorkspaceOf(gctx, st.Run); return err })
	g.Go(func() (err error) { f.org, err = r.Runs.OrganizationSlug(gctx, st.Run.OrganizationID); return err })
	// An untrusted run's configuration gets no token to read the state
	// with, and plans against none.
	if !st.Run.Untrusted() {
		g.Go(func() (err error) { f.token, err = r.Runs.IssueToken(gctx, st, r.tokenLifetime()); return err })
		if st.Attempt.Phase == run.PhasePlan {
			g.Go(func() (err error) { f.predecessor, err = r.Runs.CurrentStateVersionID(gctx, st.Run); return err })
		}
	}
	return f, g.Wait()
}

// tokenLifetime is how long a run token can be needed: the whole phase,
// and an interrupted apply's grace, in which tofu still publishes the state
// it has; a minute more covers the database's clock against the worker's.
// The attempt's end revokes it sooner.
func (r *Runner) tokenLifetime() time.Duration {
	return r.PhaseTimeout + r.ApplyInterruptGrace + time.Minute
}

// prepare extracts the pinned configuration, writes the backend override,
// the CLI configuration with the run token and the pinned variables.
func (r *Runner) prepare(ctx context.Context, env *attemptEnv, facts attemptFacts) error {
	inputs, token, w, org := facts.inputs, facts.token, facts.workspace, facts.org
	work := env.sb.WorkDir()
	for _, d := range []string{configDir, privateDir} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o700); err != nil {
			return err
		}
	}
	rc, err := r.Runs.OpenArchive(ctx, env.st.Configuration)
	if err != nil {
		return err
	}
	_, err = archive.Extract(ctx, rc, filepath.Join(work, configDir), archive.DefaultLimits())
	rc.Close()
	if err != nil {
		return fmt.Errorf("extracting configuration: %w", err)
	}
	// A value written as HCL must be exactly one expression: a run
	// variable is checked only now, as HCP Terraform checks it at plan.
	for _, v := range inputs {
		if v.Category != workspace.CategoryEnv && !workspace.IsIdentifier(v.Key) {
			env.logs.Line("Warning: variable %q is not passed to tofu: a name that starts with a digit cannot be declared by any configuration.", v.Key)
			continue
		}
		if v.HCL && workspace.ValidateValue(v.Value, true) != nil {
			env.logs.Line("Error: the value of variable %q is not a valid HCL expression (a string is written quoted, as \"text\").", v.Key)
			return errVariableInvalid
		}
	}
	override := backendOverride(r.APIHost, org, w.CloudName)
	if env.st.Run.Untrusted() {
		override = emptyStateOverride(env.private(untrustedState))
	}
	files := map[string][]byte{
		filepath.Join(configDir, overrideFile): override,
		filepath.Join(privateDir, cliConfig):   cliConfigFile(r.APIHost, token, env.mirror),
		filepath.Join(privateDir, varFile):     tfvars(inputs),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(work, name), body, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

// redeemCredentials redeems the attempt's credential handle, writes the
// files the credentials need into the private directory and keeps their
// environment for the tofu commands. Every secret among them is masked in
// the log and redacted from the plan.
func (r *Runner) redeemCredentials(ctx context.Context, env *attemptEnv) error {
	if env.st.Credentials == nil {
		return nil
	}
	dir := filepath.Join(env.sb.WorkDir(), privateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	m, err := r.Runs.RedeemCredentials(ctx, env.st, dir)
	if err != nil {
		return err
	}
	env.secrets = append(env.secrets, m.Secrets...)
	env.logs.AddSecrets(m.Secrets)
	for name, body := range m.Files {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	env.credentialEnv = m.Env
	return nil
}

// cliConfigFile is the sandbox's own CLI configuration: the run token for
// Cairn's host, the host's services and, with a provider mirror, that
// mirror as the only provider source (a closed network needs no registry).
// Naming the services spares every command that configures the backend a
// discovery request, on a TLS connection of its own: a few milliseconds of
// each init, plan, show and apply.
func cliConfigFile(host, token, mirror string) []byte {
	var f hclFile
	if token != "" {
		f.block("credentials", []string{host}, func() { f.str("token", token) })
	}
	f.block("host", []string{host}, func() { f.strMap("services", discovery.Services(true)) })
	if mirror != "" {
		f.block("provider_installation", nil, func() {
			if strings.HasPrefix(mirror, "https://") {
				f.block("network_mirror", nil, func() { f.str("url", strings.TrimSuffix(mirror, "/")+"/") })
			} else {
				f.block("filesystem_mirror", nil, func() { f.str("path", mirror) })
			}
		})
	}
	return f.Bytes()
}

// backendOverride points the remote backend at this service's workspace.
func backendOverride(host, organization, workspaceName string) []byte {
	var f hclFile
	f.block("terraform", nil, func() {
		f.block("backend", []string{"remote"}, func() {
			f.str("hostname", host)
			f.str("organization", organization)
			f.block("workspaces", nil, func() { f.str("name", workspaceName) })
		})
	})
	return f.Bytes()
}

// untrustedWho says why a run's configuration is untrusted, for its log.
func untrustedWho(r run.Run) string {
	if r.UntrustedReason != nil && *r.UntrustedReason == run.UntrustedFork {
		return "a pull request from a fork"
	}
	return "started by an agent; a person can run it with credentials"
}

// emptyStateOverride points an untrusted run's configuration at a local
// state that does not exist yet, in the runner's private directory: it
// plans as if nothing existed, and no state of the workspace's is within its
// reach.
func emptyStateOverride(path string) []byte {
	var f hclFile
	f.block("terraform", nil, func() {
		f.block("backend", []string{"local"}, func() { f.str("path", path) })
	})
	return f.Bytes()
}

// phaseSecrets are the values masked in a phase's log and redacted from
// its plan: the run token and every sensitive input, terraform or env.
func phaseSecrets(token string, inputs []workspace.ResolvedVariable) []string {
	var secrets []string
	if token != "" {
		secrets = append(secrets, token)
	}
	for _, v := range inputs {
		if v.Sensitive {
			secrets = append(secrets, v.Value)
		}
	}
	return secrets
}

// variableEnvironment is the env-category variables of a run's inputs,
// for its tofu commands' environment. A name the runner owns is refused
// when written, and dropped here too: a value written before the name was
// refused (or pinned by an older run) never reaches the sandbox.
func variableEnvironment(inputs []workspace.ResolvedVariable) map[string]string {
	out := map[string]string{}
	for _, v := range inputs {
		if v.Category == workspace.CategoryEnv && !credential.RunnerOwnsEnvironmentName(v.Key) {
			out[v.Key] = v.Value
		}
	}
	return out
}

// tfvars renders the pinned terraform-category variables a configuration
// can declare: HCL values as written, the rest as quoted strings (so "${" in a
// value stays literal).
func tfvars(inputs []workspace.ResolvedVariable) []byte {
	var f hclFile
	for _, v := range inputs {
		if v.Category == workspace.CategoryEnv || !workspace.IsIdentifier(v.Key) {
			continue
		}
		if v.HCL {
			f.raw(v.Key, v.Value)
			continue
		}
		f.str(v.Key, v.Value)
	}
	return f.Bytes()
}

// tofu runs one CLI command in the configuration directory, its output
// going to the masked log.
func (r *Runner) tofu(ctx context.Context, env *attemptEnv, step string, stdout io.Writer, args ...string) (int, error) {
	return r.runTofu(ctx, env, step, r.tofuCommand(env, stdout, args...))
}

func (r *Runner) tofuCommand(env *attemptEnv, stdout io.Writer, args ...string) sandbox.Command {
	cmdEnv := map[string]string{}
	maps.Copy(cmdEnv, env.credentialEnv)
	// Variable sets' env variables come after the credentials' (their
	// names never include a federation's: both refuse the same list).
	maps.Copy(cmdEnv, env.variableEnv)
	// The runner's own variables are set last: a credential or an env
	// variable never replaces them (the names are refused when written).
	cmdEnv["TF_CLI_CONFIG_FILE"] = filepath.Join(env.sb.WorkDir(), privateDir, cliConfig)
	// Links the state version the CLI publishes to this run.
	cmdEnv["TFE_RUN_ID"] = env.st.Run.ID
	if r.CAFile != "" {
		cmdEnv["SSL_CERT_FILE"] = env.sb.FilePath("ca.pem")
		cmdEnv["SSL_CERT_DIR"] = noCertDir
	}
	if stdout == nil {
		stdout = env.logs
	}
	return sandbox.Command{Args: append([]string{env.cli}, args...), Dir: configDir, Env: cmdEnv, Stdout: stdout, Stderr: env.logs}
}

func (r *Runner) runTofu(ctx context.Context, env *attemptEnv, step string, cmd sandbox.Command) (int, error) {
	start := time.Now()
	defer env.timed("tofu_"+step, start)
	startedBefore := env.workStarted
	if step != "init" || env.st.Attempt.Phase != run.PhaseApply {
		env.workStarted = true
	}
	env.failureSaid = ""
	said := &sandbox.TailBuffer{Limit: 64 << 10}
	// tofuCommand always sends stderr to the phase's log.
	cmd.Stderr = io.MultiWriter(cmd.Stderr, said)
	code, err := env.session.Run(ctx, cmd)
	if errors.Is(err, sandbox.ErrNotEntered) {
		// The sandbox never came up, so this command never started.
		env.workStarted = startedBefore
	}
	if err == nil && code != 0 {
		// tofu wraps its diagnostics to the terminal's width: words are
		// compared, not lines.
		env.failureSaid = strings.Join(strings.Fields(said.String()), " ")
	}
	return code, err
}

// private is where the runner keeps a file of its own beside the
// configuration, as commands see it.
func (e *attemptEnv) private(name string) string {
	return filepath.Join(e.sb.WorkDir(), privatePath(name))
}

// privatePath is that file's path relative to the work directory, for the
// sandbox's Open and Create.
func privatePath(name string) string { return filepath.Join(privateDir, name) }

// lockMismatch is how tofu init says a provider package does not match
// the hashes the configuration's lock file pins.
const lockMismatch = "checksums previously recorded in the dependency lock file"

// errProviderChecksum means tofu init refused a provider package whose
// hashes the configuration's lock file does not list.
var errProviderChecksum = errors.New("a provider package does not match the dependency lock file")

// connectionCutOff are how Go's HTTP client, inside tofu and its
// providers, says a connection ended in the middle of an exchange: the
// peer reset it or its stream, or closed it before the body ended. A
// replica of the API that dies while it answers causes exactly these. A
// refused connection, a failed name lookup or a timeout are left out: a
// misconfigured address fails that way every time, and retrying it would
// only multiply the wait.
var connectionCutOff = []string{
	"connection reset by peer",
	"unexpected EOF",
	`": EOF`,
	"broken pipe",
	"stream error: stream ID",
	"http2: client connection lost",
	"http2: server sent GOAWAY",
	"server closed idle connection",
	"use of closed network connection",
}

// lostConnection reports whether a failed command's diagnostics say a
// connection was cut off under it.
func lostConnection(said string) bool {
	for _, phrase := range connectionCutOff {
		if strings.Contains(said, phrase) {
			return true
		}
	}
	return false
}

// init runs `tofu init` with the given extra arguments.
func (r *Runner) init(ctx context.Context, env *attemptEnv, extra ...string) error {
	code, err := r.tofu(ctx, env, "init", nil, append([]string{"init", "-input=false", "-no-color"}, extra...)...)
	if err != nil {
		return err
	}
	if code != 0 {
		// The error is read from what tofu said, which also went to the log.
		if strings.Contains(env.failureSaid, lockMismatch) {
			return fmt.Errorf("%w: %w", errProviderChecksum, exitError{step: "init", code: code})
		}
		return exitError{step: "init", code: code}
	}
	return r.warnDeprecated(ctx, env)
}

// warnDeprecated writes a warning into the phase's log for every
// deprecated registry module version the attempt's init downloaded, with
// the reason its publisher gave: the CLIs themselves say nothing about it.
func (r *Runner) warnDeprecated(ctx context.Context, env *attemptEnv) error {
	modules, err := r.Runs.AttemptRegistryModules(ctx, env.st.Attempt.ID)
	if err != nil {
		return err
	}
	for _, m := range modules {
		if !m.Deprecated {
			continue
		}
		if m.DeprecationReason == nil || strings.TrimSpace(*m.DeprecationReason) == "" {
			env.logs.Line("Warning: registry module %s version %s is deprecated.", m.Address, m.Version)
			continue
		}
		env.logs.Line("Warning: registry module %s version %s is deprecated: %s", m.Address, m.Version, oneLine(*m.DeprecationReason))
	}
	return nil
}

// oneLine keeps a publisher's text on one log line: line breaks and other
// control characters become spaces, so it cannot pass for the runner's or
// the CLI's own lines.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
}

func sameID(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// WorkerName is a default worker identity: host and process.
func WorkerName() string {
	host, _ := os.Hostname()
	return strings.TrimSpace(fmt.Sprintf("%s/%d", host, os.Getpid()))
}
