package site

import (
	"context"
	"encoding/json"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/cairnhq/cairn/web"
)

// Site is the dashboard's HTTP handler.
type Site struct {
	apiURL    string
	apiClient *http.Client
	pages     *template.Template
	logger    *slog.Logger
}

// New parses the embedded templates and returns the dashboard handler.
func New(apiURL string, apiClient *http.Client, logger *slog.Logger) (*Site, error) {
	pages, err := template.ParseFS(web.Templates, "templates/*.html")
	if err != nil {
		return nil, err
	}
	return &Site{apiURL: apiURL, apiClient: apiClient, pages: pages, logger: logger}, nil
}

// Handler routes the dashboard.
func (s *Site) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(web.Static, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", immutable(http.FileServerFS(static))))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	mux.HandleFunc("GET /{$}", s.home)
	return securityHeaders(mux)
}

func immutable(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		h.ServeHTTP(w, r)
	})
}

func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

type homePage struct {
	Title        string
	APIURL       string
	APIReachable bool
	APIVersion   string
}

func (s *Site) home(w http.ResponseWriter, r *http.Request) {
	page := homePage{Title: "Home", APIURL: s.apiURL}
	page.APIVersion, page.APIReachable = s.apiHealth(r.Context())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.render(w, "home.html", page); err != nil {
		s.logger.ErrorContext(r.Context(), "rendering page", "error", err)
	}
}

func (s *Site) render(w http.ResponseWriter, name string, data any) error {
	t, err := s.pages.Clone()
	if err != nil {
		return err
	}
	if _, err := t.ParseFS(web.Templates, "templates/"+name); err != nil {
		return err
	}
	return t.ExecuteTemplate(w, "layout", data)
}

func (s *Site) apiHealth(ctx context.Context) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.apiURL+"/health", nil)
	if err != nil {
		return "", false
	}
	resp, err := s.apiClient.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var body struct {
		Version string `json:"version"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return "", false
	}
	return body.Version, true
}
