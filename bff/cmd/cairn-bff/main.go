// Command cairn-bff serves Cairn's dashboard: server-rendered HTML pages,
// the same-origin control-plane proxy to the API and the live run channel.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/clientaddr"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/bff/proxy"
	"github.com/cairnhq/cairn/bff/session"
	"github.com/cairnhq/cairn/bff/site"
)

func main() {
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cairn-bff:", err)
		os.Exit(2)
	}
	logger := cfg.Logger("bff")
	if err := run(cfg); err != nil {
		logger.Error("cairn-bff failed", "error", err)
		os.Exit(1)
	}
}

func run(cfg config.Config) error {
	logger := cfg.Logger("bff")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	apiURL, err := url.Parse(strings.TrimRight(cfg.PublicURL, "/"))
	if err != nil {
		return fmt.Errorf("CAIRN_PUBLIC_URL: %w", err)
	}
	dashboard, err := url.Parse(cfg.DashboardURL)
	if err != nil {
		return fmt.Errorf("CAIRN_DASHBOARD_URL: %w", err)
	}
	transport, err := apiTransport()
	if err != nil {
		return err
	}
	apiClient := &http.Client{
		Timeout:   30 * time.Second,
		Transport: transport,
		// The dashboard never follows an API redirect on a user's behalf.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	// Sessions live in PostgreSQL; without a database every page but
	// /health answers 503. A database that is down at start is kept as a
	// handle that reconnects on use, like the API's, so the dashboard
	// serves again as soon as it is back; a URL that does not parse stops
	// the dashboard.
	var conn *sqlx.DB
	if cfg.DatabaseURL != "" {
		if conn, err = db.OpenPool(cfg.DatabaseURL.Reveal(), 5); err != nil {
			return err
		}
		defer conn.Close()
		if err := db.Ping(ctx, conn); err != nil {
			logger.Warn("database not reachable at start; pages answer 503 until it is", "error", err)
		}
		go sweepSessions(ctx, conn, logger)
	} else {
		logger.Warn("DATABASE_URL is not set: dashboard sessions cannot be stored, so every page answers 503")
	}
	if !cfg.AuthReady() {
		logger.Warn("AUTH_SECRET is missing or shorter than 32 bytes: dashboard sessions cannot be stored, so nobody can sign in",
			"fix", "set the same AUTH_SECRET as cairn-api's (at least 32 bytes)", "see", "docs/operating/secrets.md#what-happens-when-a-secret-is-missing")
	}
	sessions := session.New(conn, cfg, dashboard.Scheme == "https", logger)
	origin := dashboard.Scheme + "://" + dashboard.Host
	controlPlane, err := proxy.New(apiURL, transport, sessions, origin, logger)
	if err != nil {
		return err
	}
	s, err := site.New(site.Options{APIURL: apiURL, APIClient: apiClient, Origin: origin, Sessions: sessions,
		Proxy: controlPlane, Logger: logger, TrustedProxies: cfg.TrustedProxyPrefixes(), VouchKey: clientaddr.VouchKey(cfg),
		CodeHostWebURL: site.CodeHostWebURL(cfg.GitHubAPIURL)})
	if err != nil {
		return err
	}
	srv := &http.Server{
		Addr:              cfg.BFFAddr,
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
	}
	errc := make(chan error, 1)
	go func() {
		logger.Info("cairn-bff listening", "addr", cfg.BFFAddr, "dashboard_url", cfg.DashboardURL)
		errc <- srv.ListenAndServe()
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

// apiTransport reaches the API. Go's system roots on Linux honour
// SSL_CERT_FILE, which is how a locally generated CA (make run) is trusted.
func apiTransport() (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t, nil
}

func sweepSessions(ctx context.Context, conn *sqlx.DB, logger *slog.Logger) {
	ticker := time.NewTicker(10 * time.Minute)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if _, err := session.Sweep(ctx, conn); err != nil {
				logger.Warn("sweeping dashboard sessions", "error", err)
			}
		}
	}
}
