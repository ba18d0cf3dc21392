// Command cairn-mcp serves the agent tool endpoint: the Model Context
// Protocol at {mcp_url}/mcp for agents holding an OAuth access token from
// the API's authorization server, with its protected resource metadata
// and /health. It holds no database or secret of its own: tokens are
// checked against the API's published keys, and every tool call is made
// to /v1 with the caller's own token.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cairnhq/cairn/api/mcp"
	"github.com/cairnhq/cairn/api/platform/config"
)

func main() {
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cairn-mcp:", err)
		os.Exit(2)
	}
	logger := cfg.Logger("mcp")
	slog.SetDefault(logger)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, logger); err != nil {
		logger.Error("cairn-mcp failed", "error", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	endpoint := mcp.New(mcp.Options{APIURL: cfg.PublicURL, Issuer: cfg.Issuer(), MCPURL: cfg.MCPURL, Logger: logger})
	srv := &http.Server{
		Addr:              cfg.MCPAddr,
		Handler:           endpoint.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    32 << 10,
	}
	errc := make(chan error, 1)
	go func() {
		logger.Info("cairn-mcp listening", "addr", cfg.MCPAddr, "tls", cfg.TLSCert != "", "resource", endpoint.Resource())
		if cfg.TLSCert != "" {
			errc <- srv.ListenAndServeTLS(cfg.TLSCert, cfg.TLSKey)
		} else {
			errc <- srv.ListenAndServe()
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("cairn-mcp shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("connections still open at shutdown were closed", "error", err)
	}
	return nil
}
