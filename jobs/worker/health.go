package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/cairnhq/cairn/api/platform/buildinfo"
	"github.com/cairnhq/cairn/api/platform/failure"
	"github.com/cairnhq/cairn/jobs/sandbox"
)

// Health is what cairn-worker's /health answers.
type Health struct {
	// Status is "ok" when the worker can run phases, "unavailable" when it
	// refuses them (its sandboxes cannot be isolated).
	Status  string         `json:"status"`
	Process string         `json:"process"`
	Version string         `json:"version"`
	Sandbox sandbox.Status `json:"sandbox"`
}

// HealthHandler answers GET /health with the sandbox driver's status: 200
// when phases can run, 503 with the reason when they cannot. It needs no
// database, so it answers while PostgreSQL is away.
func HealthHandler(driver sandbox.Driver, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		h := Health{Status: "ok", Process: "worker", Version: buildinfo.Version, Sandbox: driver.Status()}
		code := http.StatusOK
		if !h.Sandbox.Ready {
			h.Status, code = "unavailable", http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(h)
	})
	return mux
}

// ServeHealth listens on addr now, so a taken port fails the start, and
// serves h until ctx ends.
func ServeHealth(ctx context.Context, addr string, h http.Handler, logger *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: failure.Recover(logger, h), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("worker health endpoint stopped", "error", err)
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	logger.Info("worker health endpoint listening", "addr", ln.Addr().String())
	return nil
}

// ReportIsolation says at start what sandboxes get on this host, loudly
// when the worker will refuse phases or runs them unisolated.
func ReportIsolation(logger *slog.Logger, st sandbox.Status) {
	p := st.Profile
	switch {
	case !st.Ready:
		logger.Error("sandbox isolation unavailable: every phase this worker picks ends sandbox_isolation_unavailable",
			"reason", st.Reason, "detail", st.Detail,
			"fix", "install bubblewrap and util-linux (make deps), or set CAIRN_SANDBOX_BWRAP to bwrap's path",
			"see", "docs/operating/sandboxes.md#when-isolation-is-unavailable")
	case p.Isolation == sandbox.IsolationNone:
		logger.Warn("sandboxes run WITHOUT namespaces (CAIRN_SANDBOX_ISOLATION=none): user code can read this worker's environment and files")
	default:
		logger.Info("sandbox isolation", "namespaces", p.Namespaces, "user", p.User,
			"memory_limit", p.Memory.Limit, "memory_mechanism", p.Memory.Mechanism,
			"process_limit", p.Processes.Limit, "process_mechanism", p.Processes.Mechanism, "cgroup", st.Cgroup)
	}
}

// SweepSandboxes removes what dead workers left under the sandbox root
// now, before it returns, and then every interval until ctx ends.
func SweepSandboxes(ctx context.Context, driver *sandbox.Local, interval time.Duration, logger *slog.Logger) {
	sweep := func() {
		res, err := driver.Sweep(ctx)
		if err != nil {
			logger.Warn("sandbox sweep incomplete", "error", err)
		}
		if res != (sandbox.SweepResult{}) {
			logger.Info("removed sandboxes of dead workers", "directories", res.Directories, "processes", res.Processes, "cgroups", res.Cgroups)
		}
	}
	sweep()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sweep()
			}
		}
	}()
}
