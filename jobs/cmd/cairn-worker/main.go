// Command cairn-worker runs Cairn's background jobs from PostgreSQL through
// River: run phases, policy builds, reconcilers and sweeps. Any number of
// workers can run against one database. Policy builds and evaluations run
// in sandboxes as cairn-policy, installed beside this binary; the worker
// itself never links the policy engine.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/telemetry"
	"github.com/cairnhq/cairn/jobs/policyeval"
	"github.com/cairnhq/cairn/jobs/worker"
)

func main() {
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cairn-worker:", err)
		os.Exit(2)
	}
	logger := cfg.Logger("worker")
	if err := run(cfg); err != nil {
		logger.Error("cairn-worker failed", "error", err)
		os.Exit(1)
	}
}

func run(cfg config.Config) error {
	logger := cfg.Logger("worker")
	if cfg.DatabaseURL == "" {
		return errors.New("DATABASE_URL is required: the worker takes all its work from PostgreSQL")
	}
	signals, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	// The sandbox driver comes first: whether this worker can isolate user
	// code is said at start and in /health, whatever else works.
	driver, err := worker.NewSandboxDriver(cfg, logger)
	if err != nil {
		return err
	}
	worker.ReportIsolation(logger, driver.Status())
	reportPolicyProgram(logger)
	telemetry.ServeProfiler(cfg.PprofAddr, logger)
	// Leftovers of a dead worker go before this one answers or takes work.
	worker.SweepSandboxes(signals, driver, cfg.SandboxSweepInterval, logger)
	if cfg.WorkerHealthAddr != "off" {
		if err := worker.ServeHealth(signals, cfg.WorkerHealthAddr, worker.HealthHandler(driver, telemetry.NewMetrics(nil).Handler()), logger); err != nil {
			return fmt.Errorf("serving /health on CAIRN_WORKER_HEALTH_ADDR: %w", err)
		}
	}
	conn, err := db.Open(signals, cfg.DatabaseURL.Reveal(), cfg.DBMaxConns)
	if err != nil {
		return err
	}
	defer conn.Close()
	tracing, err := telemetry.StartTracing(signals, cfg.OTLPEndpoint, "cairn_worker")
	if err != nil {
		return err
	}
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tracing.Shutdown(flushCtx)
	}()
	client, err := worker.New(cfg, conn, driver, logger, tracing)
	if err != nil {
		return err
	}
	// River runs until told to stop below, not until the signal: its jobs
	// must get their stop through StopAndCancel, with the window they need.
	if err := client.Start(context.Background()); err != nil {
		return fmt.Errorf("starting river: %w", err)
	}
	logger.Info("cairn-worker started", "poll_interval", cfg.WorkerPollInterval.String())
	<-signals.Done()
	// A second signal now ends the process at once.
	stopSignals()
	window := worker.StopWindow(cfg)
	logger.Info("cairn-worker stopping: interrupting running jobs and recording what they leave",
		"apply_interrupt_grace", cfg.ApplyInterruptGrace.String(), "stop_window", window.String())
	stopCtx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	if err := client.StopAndCancel(stopCtx); err != nil {
		return fmt.Errorf("stopping river: %w", err)
	}
	logger.Info("cairn-worker stopped")
	return nil
}

// reportPolicyProgram says at start, not at the first run with a policy,
// that this worker cannot build or evaluate policies: each build then
// fails with policy_toolchain_unavailable and each evaluation is an error
// (policy_evaluator_failed), never a pass.
func reportPolicyProgram(logger *slog.Logger) {
	path, err := policyeval.ProgramBeside()
	if err == nil {
		_, err = policyeval.CheckProgram(path)
	}
	if err != nil {
		logger.Error("policy builds and evaluations will fail: the policy program is unusable", "error", err)
	}
}
