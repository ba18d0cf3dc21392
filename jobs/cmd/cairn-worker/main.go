// Command cairn-worker runs Cairn's background jobs from PostgreSQL through
// River: run phases, policy builds, reconcilers and sweeps. Any number of
// workers can run against one database.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/jobs/policybuild"
	"github.com/cairnhq/cairn/jobs/policyeval"
	"github.com/cairnhq/cairn/jobs/worker"
)

func main() {
	// Inside a build sandbox the worker binary is the policy build program:
	// it needs no configuration, database or secrets, and gets none.
	if len(os.Args) == 4 && os.Args[1] == "policy-build" {
		if err := policybuild.Build(context.Background(), os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "policy-build:", err)
			os.Exit(1)
		}
		return
	}
	// Inside an evaluation sandbox it is the evaluation program, with the
	// sanitized input and a bundle grant and nothing else.
	if len(os.Args) == 3 && os.Args[1] == "policy-evaluate" {
		if err := policyeval.Child(context.Background(), os.Args[2], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "policy-evaluate:", err)
			os.Exit(1)
		}
		return
	}
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	conn, err := db.Open(ctx, cfg.DatabaseURL.Reveal(), cfg.DBMaxConns)
	if err != nil {
		return err
	}
	defer conn.Close()
	client, err := worker.New(cfg, conn, logger)
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("starting river: %w", err)
	}
	logger.Info("cairn-worker started", "poll_interval", cfg.WorkerPollInterval.String())
	<-ctx.Done()
	logger.Info("cairn-worker stopping: finishing running jobs")
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return client.Stop(stopCtx)
}
