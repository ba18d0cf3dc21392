package session

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/jmoiron/sqlx"
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
}

// New returns a session manager whose cookie is Secure when the dashboard
// is served over HTTPS (the __Host- prefix then pins it to this origin).
func New(conn *sqlx.DB, secure bool) *Manager {
	m := scs.New()
	m.Store = &pgStore{db: conn}
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
	return &Manager{m}
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
			http.Error(w, "session unavailable", http.StatusServiceUnavailable)
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

// pgStore is scs's Store on the dashboard_sessions table.
type pgStore struct{ db *sqlx.DB }

func (s *pgStore) Find(token string) ([]byte, bool, error) {
	if s.db == nil {
		return nil, false, errors.New("dashboard sessions need DATABASE_URL")
	}
	var data []byte
	err := s.db.QueryRow(`SELECT data FROM dashboard_sessions WHERE token = $1 AND expiry > now()`, token).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading dashboard session: %w", err)
	}
	return data, true, nil
}

func (s *pgStore) Commit(token string, data []byte, expiry time.Time) error {
	if s.db == nil {
		return errors.New("dashboard sessions need DATABASE_URL")
	}
	_, err := s.db.Exec(`INSERT INTO dashboard_sessions (token, data, expiry) VALUES ($1, $2, $3)
		ON CONFLICT (token) DO UPDATE SET data = EXCLUDED.data, expiry = EXCLUDED.expiry`, token, data, expiry)
	if err != nil {
		return fmt.Errorf("writing dashboard session: %w", err)
	}
	return nil
}

func (s *pgStore) Delete(token string) error {
	if s.db == nil {
		return nil
	}
	_, err := s.db.Exec(`DELETE FROM dashboard_sessions WHERE token = $1`, token)
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
