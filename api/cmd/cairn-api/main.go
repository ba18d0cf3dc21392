// Command cairn-api serves Cairn's HTTP API and runs its operator
// subcommands: serve (default), migrate, bootstrap and launch.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/assembly"
	"github.com/cairnhq/cairn/api/authcache"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/telemetry"
	"github.com/cairnhq/cairn/api/server"
)

const usage = `usage: cairn-api [command]

commands:
  serve      serve the API (default)
  migrate    apply database migrations (Cairn's and River's)
  bootstrap  create the local owner account and organization once, writing
             the generated password to $CAIRN_DATA_DIR/dev-credentials
  launch     operator launch control: show, apply, open-gate,
             suspensions, suspend, lift (see cairn-api launch)
`

func main() {
	cmd := "serve"
	args := os.Args[1:]
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cairn-api:", err)
		os.Exit(2)
	}
	logger := cfg.Logger("api")
	slog.SetDefault(logger)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch cmd {
	case "serve":
		err = serve(ctx, cfg, logger)
	case "migrate":
		err = migrate(ctx, cfg, logger)
	case "bootstrap":
		err = bootstrap(ctx, cfg, logger, os.Stdout)
	case "launch":
		err = launchCommand(ctx, cfg, logger, args, os.Stdout)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		logger.Error("cairn-api "+cmd+" failed", "error", err)
		os.Exit(1)
	}
}

// openDatabase connects when DATABASE_URL is set. A database that is
// configured but down at start is kept as a handle (it reconnects on use):
// /health answers, /ready and protected routes answer 503 until it is
// back. A URL that does not parse leaves no database at all.
func openDatabase(ctx context.Context, cfg config.Config, logger *slog.Logger) *sqlx.DB {
	if cfg.DatabaseURL == "" {
		logger.Warn("DATABASE_URL is not set: protected surfaces will answer 503")
		return nil
	}
	conn, err := db.OpenPool(cfg.DatabaseURL.Reveal(), cfg.DBMaxConns)
	if err != nil {
		logger.Error("database URL unusable: protected surfaces will answer 503", "error", err)
		return nil
	}
	if err := db.Ping(ctx, conn); err != nil {
		logger.Warn("database not reachable at start; /ready and protected routes answer 503 until it is", "error", err)
	}
	return conn
}

func serve(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	if !cfg.AuthReady() {
		logger.Warn("AUTH_SECRET is missing or shorter than 32 bytes: authentication will answer 503",
			"fix", "set AUTH_SECRET to at least 32 random bytes (openssl rand -base64 48) on every api and bff", "see", "docs/operating/secrets.md#what-happens-when-a-secret-is-missing")
	}
	if cfg.MasterKeyBytes() == nil {
		logger.Warn("CAIRN_MASTER_KEY is missing or not 32 bytes of base64: state, runs and sensitive values will answer 503",
			"fix", "set CAIRN_MASTER_KEY (openssl rand -base64 32) on every api and worker", "see", "docs/operating/secrets.md#what-happens-when-a-secret-is-missing")
	}
	if cfg.IdempotencyKeyBytes() == nil {
		logger.Warn("IDEMPOTENCY_HMAC_KEY is missing or weak: writing a generic secret will answer 503",
			"fix", "set IDEMPOTENCY_HMAC_KEY (openssl rand -base64 32)", "see", "docs/operating/secrets.md#what-happens-when-a-secret-is-missing")
	}
	conn := openDatabase(ctx, cfg, logger)
	if conn != nil {
		defer conn.Close()
	}
	deps, err := assembly.Assemble(cfg, conn, logger)
	if err != nil {
		return err
	}
	if deps.Identity != nil {
		// Credentials presented again are served from memory until
		// anything they were read from changes (package authcache).
		principals := authcache.New(cfg.DatabaseURL.Reveal(), conn, logger)
		defer principals.Close()
		deps.Identity.CachePrincipals(principals)
		if deps.OAuth != nil {
			deps.OAuth.CachePrincipals(principals)
		}
	}
	if deps.Tracing, err = telemetry.StartTracing(ctx, cfg.OTLPEndpoint, "cairn_api"); err != nil {
		return err
	}
	defer func() {
		// Spans still buffered leave after the last request.
		flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = deps.Tracing.Shutdown(flushCtx)
	}()
	srv, err := server.New(deps)
	if err != nil {
		return err
	}
	telemetry.ServeProfiler(cfg.PprofAddr, logger)
	tuneCollector(cfg)
	errc := make(chan error, 1)
	go func() {
		logger.Info("cairn-api listening", "addr", cfg.APIAddr, "tls", cfg.TLSCert != "", "public_url", cfg.PublicURL)
		if cfg.TLSCert != "" {
			errc <- srv.App.ListenTLS(cfg.APIAddr, cfg.TLSCert, cfg.TLSKey)
		} else {
			errc <- srv.App.Listen(cfg.APIAddr)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("cairn-api shutting down")
	// In-flight requests get a few seconds; connections still open after
	// that are cut, which is a normal end of serving, not a failure.
	if err := srv.App.ShutdownWithTimeout(5 * time.Second); err != nil {
		logger.Warn("connections still open at shutdown were closed", "error", err)
	}
	return nil
}

// requireDatabase opens the database for an operator subcommand, which
// unlike serve cannot do anything useful without one.
func requireDatabase(ctx context.Context, cfg config.Config) (*sqlx.DB, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("DATABASE_URL is required")
	}
	return db.Open(ctx, cfg.DatabaseURL.Reveal(), 4)
}

func migrate(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	conn, err := requireDatabase(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := db.Migrate(ctx, conn.DB, logger); err != nil {
		return err
	}
	latest, err := db.LatestVersion()
	if err != nil {
		return err
	}
	logger.Info("migrations applied", "version", latest)
	return nil
}

// tuneCollector sets the collector cairn-api serves with: the start's
// garbage was collected at Go's default, serving trades a few megabytes of
// heap for fewer collections (config.APIGoGC) under a soft limit that keeps
// a large live heap's garbage bounded (config.APIMemoryLimitMiB). GOGC or
// GOMEMLIMIT set by the operator, which Go has read already, stay in force.
func tuneCollector(cfg config.Config) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(cfg.APIGoGC)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(cfg.APIMemoryLimitMiB << 20)
	}
}
