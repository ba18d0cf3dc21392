package db

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/lib/pq"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/cairnhq/cairn/migrations"
)

func newProvider(conn *sql.DB, logger *slog.Logger) (*goose.Provider, error) {
	// A session lock makes concurrent `migrate` runs (several replicas
	// starting at once) take turns instead of racing.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 600))
	if err != nil {
		return nil, fmt.Errorf("creating migration lock: %w", err)
	}
	opts := []goose.ProviderOption{
		goose.WithGoMigrations(migrations.Go()...),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	}
	if logger != nil {
		opts = append(opts, goose.WithSlog(logger))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, conn, migrations.SQL, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading migrations: %w", err)
	}
	return p, nil
}

// Migrate applies every pending migration, River's included.
func Migrate(ctx context.Context, conn *sql.DB, logger *slog.Logger) error {
	p, err := newProvider(conn, logger)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("applying migrations: %w", err)
	}
	return nil
}

// LatestVersion is the highest migration version this build knows, read from
// the embedded file names without touching a database.
func LatestVersion() (int64, error) {
	var latest int64
	for _, m := range migrations.Go() {
		latest = max(latest, m.Version)
	}
	entries, err := migrations.SQL.ReadDir(".")
	if err != nil {
		return 0, fmt.Errorf("listing migrations: %w", err)
	}
	for _, e := range entries {
		digits, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("migration %q has no numeric version", e.Name())
		}
		latest = max(latest, v)
	}
	return latest, nil
}

// coreTables are the tables a serving API cannot work without; readiness
// checks them by name so a half-restored database is not reported ready.
var coreTables = []string{"goose_db_version", "river_job", "idempotency_records", "audit_events", "users", "organizations", "memberships", "sessions"}

// SchemaStatus says whether the database schema matches this build.
type SchemaStatus struct {
	Current int64
	Latest  int64
	Missing []string
}

// Ready reports whether migrations are applied up to this build's latest
// version and every core table exists.
func (s SchemaStatus) Ready() bool { return s.Current >= s.Latest && len(s.Missing) == 0 }

// CheckSchema reads the applied migration version and checks that the core
// tables exist. It never creates anything, so it is safe against an empty or
// foreign database.
func CheckSchema(ctx context.Context, conn *sql.DB, latest int64) (SchemaStatus, error) {
	status := SchemaStatus{Latest: latest}
	rows, err := conn.QueryContext(ctx, `SELECT name FROM unnest($1::text[]) AS t(name) WHERE to_regclass(name) IS NULL`, pq.Array(coreTables))
	if err != nil {
		return status, fmt.Errorf("checking core tables: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return status, fmt.Errorf("checking core tables: %w", err)
		}
		status.Missing = append(status.Missing, name)
	}
	if err := rows.Err(); err != nil {
		return status, fmt.Errorf("checking core tables: %w", err)
	}
	if slices.Contains(status.Missing, "goose_db_version") {
		return status, nil
	}
	// goose records each applied version as a row; the newest row per version
	// says whether it is currently applied.
	err = conn.QueryRowContext(ctx, `
		SELECT COALESCE(MAX(version_id), 0) FROM (
			SELECT DISTINCT ON (version_id) version_id, is_applied
			FROM goose_db_version ORDER BY version_id, id DESC
		) latest WHERE is_applied`).Scan(&status.Current)
	if err != nil {
		return status, fmt.Errorf("reading schema version: %w", err)
	}
	return status, nil
}
