// Command cairn-bff serves Cairn's dashboard: server-rendered HTML pages,
// the same-origin control-plane proxy to the API and the live run channel.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cairnhq/cairn/api/platform/config"
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
	apiClient := &http.Client{
		Timeout: 30 * time.Second,
		// The dashboard never follows an API redirect on a user's behalf.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	s, err := site.New(cfg.PublicURL, apiClient, logger)
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
