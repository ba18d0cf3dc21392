package worker

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/cairnhq/cairn/jobs/sandbox"
	"github.com/cairnhq/cairn/jobs/sandbox/sandboxtest"
)

func TestHealthSaysWhetherPhasesCanRun(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "bwrap")
	for name, tc := range map[string]struct {
		opts       sandbox.LocalOptions
		code       int
		status     string
		isolation  string
		wantReason string
	}{
		"no bwrap, default settings": {sandbox.LocalOptions{Base: sandboxtest.Base(), BwrapPath: missing}, http.StatusServiceUnavailable, "unavailable", sandbox.IsolationUnavailable, "bwrap_not_found"},
		"explicit opt-out":           {sandbox.LocalOptions{Base: sandboxtest.Base(), Isolation: sandbox.NoIsolation, BwrapPath: missing}, http.StatusOK, "ok", sandbox.IsolationNone, ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d, err := sandbox.NewLocal(t.TempDir(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			HealthHandler(d, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health", nil))
			var h Health
			if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tc.code || h.Status != tc.status || h.Sandbox.Profile.Isolation != tc.isolation || h.Sandbox.Reason != tc.wantReason {
				t.Errorf("health %d %+v", rec.Code, h)
			}
			if tc.wantReason != "" && h.Sandbox.Detail == "" {
				t.Error("an unavailable sandbox's health does not say why")
			}
			if rec.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q", rec.Header().Get("Cache-Control"))
			}
		})
	}
}
