package db

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// WithBinaryParameters turns on lib/pq's binary_parameters mode in a
// connection string. In that mode a parameterized statement is parsed,
// bound and executed in one round trip instead of two, which halves the
// latency of every query. []byte parameters are then sent as binary, so
// they may only be bound to bytea columns (JSON goes as a string).
func WithBinaryParameters(dsn string) string {
	return withParameter(dsn, "binary_parameters", "yes")
}

// connectTimeoutSeconds bounds how long one connection attempt waits, so
// a database that does not answer (a dropped route, not a refused port)
// turns into a prompt 503 instead of requests that hang.
const connectTimeoutSeconds = "5"

// withParameter sets a connection parameter unless the string already
// names it.
func withParameter(dsn, name, value string) string {
	if strings.Contains(dsn, name) {
		return dsn
	}
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set(name, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + name + "=" + value
}

// ErrInvalidURL means DATABASE_URL could not be parsed. It stands in for
// the parser's own error, which quotes the connection string, password
// included, and so must never reach a log.
var ErrInvalidURL = errors.New("DATABASE_URL is not a valid PostgreSQL connection string " +
	"(check its scheme, host, port and percent-escapes; the value is not logged)")

// Unreachable reports whether err means the database could not be
// reached or went away: a network failure, a connection the driver gave
// up, or PostgreSQL refusing connections (class 08, shutdown, too many
// connections). Such a request fails closed with 503, not 500.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, driver.ErrBadConn) {
		return true
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		code := string(pqErr.Code)
		return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03" || code == "53300"
	}
	return false
}

// Open connects to PostgreSQL and checks the connection once, so a wrong URL
// fails at start rather than on the first request.
func Open(ctx context.Context, dsn string, maxConns int) (*sqlx.DB, error) {
	conn, err := OpenPool(dsn, maxConns)
	if err != nil {
		return nil, err
	}
	if err := Ping(ctx, conn); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// OpenPool returns a pool of at most maxConns connections without
// connecting: a process that must serve while the database is down (its
// health endpoint, and 503s) keeps it, and it reconnects on use.
func OpenPool(dsn string, maxConns int) (*sqlx.DB, error) {
	conn, err := NewPool(dsn)
	if err != nil {
		return nil, err
	}
	conn.SetMaxOpenConns(maxConns)
	conn.SetMaxIdleConns(maxConns)
	conn.SetConnMaxIdleTime(5 * time.Minute)
	return conn, nil
}

// Ping checks the connection within 10 seconds.
func Ping(ctx context.Context, conn *sqlx.DB) error {
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := conn.PingContext(pingCtx); err != nil {
		return fmt.Errorf("connecting to database: %w", err)
	}
	return nil
}

// slowTxStart is how long acquiring a connection for a transaction may take
// before we log it: a pool that is too small shows up here first.
const slowTxStart = 100 * time.Millisecond

// WithTx runs fn inside one transaction, committing when fn returns nil and
// rolling back otherwise (including on panic).
func WithTx(ctx context.Context, conn *sqlx.DB, fn func(tx *sqlx.Tx) error) (err error) {
	started := time.Now()
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	if waited := time.Since(started); waited > slowTxStart {
		slog.WarnContext(ctx, "slow transaction start", "waited_ms", waited.Milliseconds())
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("committing transaction: %w", err)
	}
	return nil
}

// IsUniqueViolation reports whether err is PostgreSQL's unique violation on
// the named constraint (or on any constraint when name is empty).
func IsUniqueViolation(err error, constraint string) bool {
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) || pqErr.Code != "23505" {
		return false
	}
	return constraint == "" || pqErr.Constraint == constraint
}
