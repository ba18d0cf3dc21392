package telemetry

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
)

// ServeProfiler serves Go's profiler on addr (config.PprofAddr, which must
// be loopback: a profile holds process memory) in the background, on a
// listener of its own, never the public one; an empty addr serves nothing.
func ServeProfiler(addr string, logger *slog.Logger) {
	if addr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { logger.Warn("profiler stopped", "addr", addr, "error", http.ListenAndServe(addr, mux)) }()
}
