package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	if strings.Contains(dsn, "binary_parameters") {
		return dsn
	}
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("binary_parameters", "yes")
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " binary_parameters=yes"
}

// Open connects to PostgreSQL and checks the connection once, so a wrong URL
// fails at start rather than on the first request.
func Open(ctx context.Context, dsn string, maxConns int) (*sqlx.DB, error) {
	conn, err := NewPool(dsn)
	if err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	conn.SetMaxOpenConns(maxConns)
	conn.SetMaxIdleConns(maxConns)
	conn.SetConnMaxIdleTime(5 * time.Minute)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := conn.PingContext(pingCtx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("connecting to database: %w", err)
	}
	return conn, nil
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
