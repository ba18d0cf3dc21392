package policybuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/riverqueue/river"

	"github.com/cairnhq/cairn/api/archive"
	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/telemetry"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/jobs/policyeval"
	"github.com/cairnhq/cairn/jobs/sandbox"
)

// Layout of a build sandbox's work directory. The build program
// (jobs/policyprogram) writes the files into its out directory.
const (
	sourceDir       = "source"
	outDir          = "out"
	BundleFile      = "bundle.tar.gz"
	TestResultsFile = "test-results.json"
	ReportFile      = "report.json"
)

// Report is what the build program leaves for the worker: a failure code,
// or the count of passing tests.
type Report struct {
	FailureCode string `json:"failure_code,omitempty"`
	TestsPassed int    `json:"tests_passed"`
}

// Worker runs policy publication jobs.
type Worker struct {
	river.WorkerDefaults[policy.PublicationArgs]
	Policies *policy.Service
	Driver   sandbox.Driver
	// Program is the host path of the policy program
	// (policyeval.ProgramName), which builds when invoked as "build SRC
	// OUT". It is checked before each build: without it every build fails
	// with policy_toolchain_unavailable.
	Program string
	// BuildTimeout bounds the sandbox's life (SPEC §8: 15 minutes).
	BuildTimeout time.Duration
	// CapacityRetry is how long a build waits for a full region.
	CapacityRetry time.Duration
	// MaxCPUSeconds and MaxMemoryBytes bound the build program, so a
	// test that loops or allocates without end inside one built-in call
	// (which the per-test timeout cannot interrupt) fails the build
	// instead of holding a processor or the worker's memory. Zero leaves
	// the sandbox's defaults.
	MaxCPUSeconds  uint64
	MaxMemoryBytes uint64
	Logger         *slog.Logger
}

// Timeout leaves room for storing outputs after the sandbox's deadline.
func (w *Worker) Timeout(*river.Job[policy.PublicationArgs]) time.Duration {
	return w.BuildTimeout + time.Minute
}

// Work builds one pending version. A version no longer pending is a replay
// and done. A build launch control does not admit now, or whose region is
// full, waits without spending an attempt. Infrastructure failures retry;
// the last attempt records an orchestration failure so the version never
// stays pending forever.
func (w *Worker) Work(ctx context.Context, job *river.Job[policy.PublicationArgs]) error {
	b, ok, err := w.Policies.StartBuild(ctx, job.Args.PolicyVersionID)
	switch {
	case errors.Is(err, policy.ErrBuildNoCapacity):
		return river.JobSnooze(w.CapacityRetry)
	case errors.Is(err, policy.ErrBuildNotAdmitted):
		return river.JobSnooze(30 * time.Second)
	case err != nil || !ok:
		return err
	}
	if err := w.build(ctx, b); err != nil {
		w.Logger.ErrorContext(ctx, "policy build failed to run", "policy_version_id", b.Version.ID, "attempt", job.Attempt, "error", err)
		if job.Attempt >= job.MaxAttempts {
			_, ferr := w.Policies.FailBuild(context.WithoutCancel(ctx), b.Version.ID, policy.FailureOrchestration)
			return errors.Join(err, ferr)
		}
		return err
	}
	return nil
}

func (w *Worker) build(ctx context.Context, b policy.BuildJob) error {
	started := time.Now()
	sb, err := w.Driver.Create(ctx, sandbox.Spec{Name: "policy-" + b.Version.ID, Limits: sandbox.Limits{WallClock: w.BuildTimeout,
		MaxCPUSeconds: w.MaxCPUSeconds, MaxDataBytes: w.MaxMemoryBytes}})
	if err != nil {
		return fmt.Errorf("creating build sandbox: %w", err)
	}
	defer func() { _ = sb.Destroy(context.WithoutCancel(ctx)) }()
	program, err := policyeval.CheckProgram(w.Program)
	if err == nil {
		err = sb.InstallTool(ctx, sandbox.VerifiedTool{Name: policyeval.ProgramName, Path: program})
	}
	if err != nil {
		w.Logger.ErrorContext(ctx, "policy build refused", "policy_version_id", b.Version.ID, "error", err)
		_, ferr := w.Policies.FailBuild(ctx, b.Version.ID, policy.FailureToolchain)
		return ferr
	}
	for _, dir := range []string{sourceDir, outDir} {
		if err := os.MkdirAll(filepath.Join(sb.WorkDir(), dir), 0o700); err != nil {
			return err
		}
	}
	src, err := w.Policies.OpenSource(ctx, b)
	if err != nil {
		return err
	}
	_, err = archive.Extract(ctx, src, filepath.Join(sb.WorkDir(), sourceDir), archive.DefaultLimits())
	src.Close()
	if err != nil {
		return fmt.Errorf("extracting policy source: %w", err)
	}
	var logs bytes.Buffer
	capped := &cappedWriter{w: &logs, left: 64 << 10}
	code, err := sb.Run(ctx, sandbox.Command{Args: []string{policyeval.ProgramName, "build", sourceDir, outDir}, Stdout: capped, Stderr: capped})
	// The build's output can quote the policy source: only its size
	// crosses the telemetry boundary.
	outcome := "ok"
	switch {
	case errors.Is(err, sandbox.ErrTimedOut):
		outcome = "timed_out"
	case err != nil || code != 0:
		outcome = "failed"
	}
	_ = telemetry.Emit(ctx, w.Logger, telemetry.Event{Name: "policy_build_finished", Fields: map[string]telemetry.Value{
		"policy_version_id": telemetry.ID(b.Version.ID),
		"outcome":           telemetry.Enum(outcome, "ok", "failed", "timed_out"),
		"duration":          telemetry.Duration(time.Since(started)),
		"output":            telemetry.Bytes(int64(logs.Len())),
	}})
	if errors.Is(err, sandbox.ErrTimedOut) {
		_, ferr := w.Policies.FailBuild(ctx, b.Version.ID, policy.FailureLimit)
		return ferr
	}
	if err != nil {
		return fmt.Errorf("running policy build: %w", err)
	}
	if code != 0 {
		failure := policy.FailureToolchain
		if policyeval.MetLimit(code, logs.Bytes()) != "" {
			failure = policy.FailureLimit
		}
		_, ferr := w.Policies.FailBuild(ctx, b.Version.ID, failure)
		return ferr
	}
	var report Report
	body, err := readReport(sb)
	if err == nil {
		err = json.Unmarshal(body, &report)
	}
	if err != nil {
		_, ferr := w.Policies.FailBuild(ctx, b.Version.ID, policy.FailureToolchain)
		return ferr
	}
	if report.FailureCode != "" {
		_, err := w.Policies.FailBuild(ctx, b.Version.ID, report.FailureCode)
		return err
	}
	return w.publish(ctx, b, sb, report)
}

// publish streams the outputs into sealed storage and asks the policy
// service to publish; it compares the committed digests itself.
func (w *Worker) publish(ctx context.Context, b policy.BuildJob, sb sandbox.Sandbox, report Report) error {
	store := func(kind, name string) (policy.Artifact, error) {
		f, err := sb.Open(filepath.Join(outDir, name))
		if err != nil {
			return policy.Artifact{}, err
		}
		defer f.Close()
		return w.Policies.StoreBuildArtifact(ctx, b.Version, kind, f)
	}
	bundle, err := store(policy.ArtifactBundle, BundleFile)
	if errors.Is(err, blob.ErrTooLarge) {
		_, ferr := w.Policies.FailBuild(ctx, b.Version.ID, policy.FailureOutputBound)
		return ferr
	}
	if err != nil {
		return err
	}
	results, err := store(policy.ArtifactTestResults, TestResultsFile)
	if errors.Is(err, blob.ErrTooLarge) {
		_, ferr := w.Policies.FailBuild(ctx, b.Version.ID, policy.FailureOutputBound)
		return ferr
	}
	if err != nil {
		return err
	}
	_, err = w.Policies.CompleteBuild(ctx, policy.Completion{
		OrganizationID: b.Version.OrganizationID, PolicyVersionID: b.Version.ID, SourceSHA256: b.Version.SourceSHA256,
		BundleArtifactID: bundle.ID, BundleSHA256: bundle.SHA256, TestResultsArtifactID: results.ID,
		TestResultsSHA256: results.SHA256, TestsPassed: report.TestsPassed,
	})
	return err
}

// maxReportBytes bounds the build report the worker reads into memory.
const maxReportBytes = 1 << 20

// readReport reads the build's report through the sandbox, which refuses
// links and special files, within maxReportBytes.
func readReport(sb sandbox.Sandbox) ([]byte, error) {
	f, err := sb.Open(filepath.Join(outDir, ReportFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	body, err := io.ReadAll(io.LimitReader(f, maxReportBytes+1))
	if err == nil && len(body) > maxReportBytes {
		err = fmt.Errorf("the build report exceeds %d bytes", maxReportBytes)
	}
	return body, err
}

// cappedWriter keeps the first bytes of a build's output for the log.
type cappedWriter struct {
	w    io.Writer
	left int
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if c.left > 0 {
		n := min(len(p), c.left)
		_, _ = c.w.Write(p[:n])
		c.left -= n
	}
	return len(p), nil
}
