package session

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/platform/secret"
)

// Session keys.
const (
	keyAPIToken = "api_token"
	keyCSRF     = "csrf"
	keyUserName = "user_name"
)

// Manager wraps scs with the dashboard's session contents.
type Manager struct {
	*scs.SessionManager
	logger *slog.Logger
}

// New returns a session manager whose cookie is Secure when the dashboard
// is served over HTTPS (the __Host- prefix then pins it to this origin).
// Sessions are stored under keys derived from AUTH_SECRET; without it (or
// without a database) no session can be stored or read, so every signed-in
// page fails closed.
func New(conn *sqlx.DB, cfg config.Config, secure bool, logger *slog.Logger) *Manager {
	m := scs.New()
	m.Store = newStore(conn, cfg)
	m.Lifetime = 12 * time.Hour
	m.IdleTimeout = 2 * time.Hour
	m.Cookie.Name = "cairn_dashboard"
	if secure {
		m.Cookie.Name = "__Host-cairn_dashboard"
	}
	m.Cookie.HttpOnly = true
	m.Cookie.Secure = secure
	m.Cookie.SameSite = http.SameSiteLaxMode
	m.Cookie.Path = "/"
	manager := &Manager{SessionManager: m, logger: logger}
	// scs answers a store failure with a bare 500; a session store that
	// cannot be reached (or used without AUTH_SECRET) is a dependency that
	// is down, so every page answers 503 and the client may retry.
	m.ErrorFunc = manager.unavailable
	return manager
}

// unavailable answers a request whose session cannot be loaded or saved.
// The cause is logged, never shown.
func (m *Manager) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	m.logger.WarnContext(r.Context(), "dashboard session store unavailable", "error", err)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Retry-After", "5")
	http.Error(w, "The dashboard is unavailable right now. Try again in a few seconds.", http.StatusServiceUnavailable)
}

// ReadOnly loads the session for h without writing it back: for streamed
// responses and upgraded connections, which scs's buffering middleware
// cannot serve.
func (m *Manager) ReadOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := ""
		if c, err := r.Cookie(m.Cookie.Name); err == nil {
			token = c.Value
		}
		ctx, err := m.Load(r.Context(), token)
		if err != nil {
			m.unavailable(w, r, err)
			return
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// SignIn starts a fresh session (a new token, against fixation) holding
// the API session token.
func (m *Manager) SignIn(ctx context.Context, apiToken, userName string) error {
	if err := m.RenewToken(ctx); err != nil {
		return err
	}
	m.Put(ctx, keyAPIToken, apiToken)
	m.Put(ctx, keyUserName, userName)
	m.Put(ctx, keyCSRF, randomToken())
	return nil
}

// SignOut ends the session.
func (m *Manager) SignOut(ctx context.Context) error { return m.Destroy(ctx) }

// APIToken is the API session token of a signed-in session.
func (m *Manager) APIToken(ctx context.Context) (string, bool) {
	t := m.GetString(ctx, keyAPIToken)
	return t, t != ""
}

// UserName is the signed-in user's display name.
func (m *Manager) UserName(ctx context.Context) string { return m.GetString(ctx, keyUserName) }

// CSRF returns the session's CSRF token, creating one for anonymous
// sessions (the sign-in form needs one too).
func (m *Manager) CSRF(ctx context.Context) string {
	t := m.GetString(ctx, keyCSRF)
	if t == "" {
		t = randomToken()
		m.Put(ctx, keyCSRF, t)
	}
	return t
}

// ValidCSRF compares a submitted token with the session's in constant time.
func (m *Manager) ValidCSRF(ctx context.Context, submitted string) bool {
	want := m.GetString(ctx, keyCSRF)
	return want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(submitted)) == 1
}

// Credentials is what the control-plane proxy presents upstream.
func (m *Manager) Credentials(r *http.Request) (string, string, bool) {
	token, ok := m.APIToken(r.Context())
	return token, m.GetString(r.Context(), keyCSRF), ok
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// pgStore is scs's Store on the dashboard_sessions table. Neither the
// cookie's token nor the session data is kept in clear: rows are keyed by
// an HMAC of the token, and the data (which holds the API session token)
// is sealed to that row, so a copy of the table signs nobody in.
type pgStore struct {
	db       *sqlx.DB
	tokenKey []byte
	sealer   *seal.Sealer
}

var (
	errNoDatabase = errors.New("dashboard sessions need DATABASE_URL")
	errNoSecret   = errors.New("dashboard sessions need AUTH_SECRET")
)

func newStore(conn *sqlx.DB, cfg config.Config) *pgStore {
	s := &pgStore{db: conn}
	if cfg.AuthReady() {
		s.tokenKey = secret.Derive(cfg.AuthSecret, "dashboard-session-token")
		// A derived key always has the sealer's length.
		s.sealer, _ = seal.NewSealer(secret.Derive(cfg.AuthSecret, "dashboard-session-data"))
	}
	return s
}

// ready reports why the store cannot be used, if it cannot.
func (s *pgStore) ready() error {
	switch {
	case s.db == nil:
		return errNoDatabase
	case s.sealer == nil:
		return errNoSecret
	}
	return nil
}

func (s *pgStore) tokenHash(token string) []byte {
	m := hmac.New(sha256.New, s.tokenKey)
	m.Write([]byte(token))
	return m.Sum(nil)
}

// sealingContext binds sealed data to its row.
func sealingContext(hash []byte) []byte {
	return append([]byte("cairn/dashboard-session\x00"), hash...)
}

func (s *pgStore) Find(token string) ([]byte, bool, error) {
	if err := s.ready(); err != nil {
		return nil, false, err
	}
	hash := s.tokenHash(token)
	var sealed []byte
	err := s.db.QueryRow(`SELECT data FROM dashboard_sessions WHERE token_hash = $1 AND expiry > now()`, hash).Scan(&sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading dashboard session: %w", err)
	}
	data, err := s.sealer.Open(sealed, sealingContext(hash))
	if err != nil {
		// Tampered, or sealed under a rotated AUTH_SECRET: no session.
		return nil, false, nil
	}
	return data, true, nil
}

func (s *pgStore) Commit(token string, data []byte, expiry time.Time) error {
	if err := s.ready(); err != nil {
		return err
	}
	hash := s.tokenHash(token)
	sealed, err := s.sealer.Seal(data, sealingContext(hash))
	if err != nil {
		return fmt.Errorf("sealing dashboard session: %w", err)
	}
	_, err = s.db.Exec(`INSERT INTO dashboard_sessions (token_hash, data, expiry) VALUES ($1, $2, $3)
		ON CONFLICT (token_hash) DO UPDATE SET data = EXCLUDED.data, expiry = EXCLUDED.expiry`, hash, sealed, expiry)
	if err != nil {
		return fmt.Errorf("writing dashboard session: %w", err)
	}
	return nil
}

func (s *pgStore) Delete(token string) error {
	if s.ready() != nil {
		return nil
	}
	_, err := s.db.Exec(`DELETE FROM dashboard_sessions WHERE token_hash = $1`, s.tokenHash(token))
	return err
}

// Sweep deletes expired sessions; the dashboard runs it periodically.
func Sweep(ctx context.Context, conn *sqlx.DB) (int64, error) {
	res, err := conn.ExecContext(ctx, `DELETE FROM dashboard_sessions WHERE expiry <= now()`)
	if err != nil {
		return 0, fmt.Errorf("sweeping dashboard sessions: %w", err)
	}
	return res.RowsAffected()
}
