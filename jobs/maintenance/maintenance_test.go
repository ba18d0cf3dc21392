package maintenance_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/riverqueue/river"

	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/jobs/maintenance"
)

func TestIdempotencySweepDeletesOnlyExpiredRecords(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	if _, err := conn.Exec(`INSERT INTO organizations (id, name, slug) VALUES ('org_x', 'X', 'x')`); err != nil {
		t.Fatal(err)
	}
	// 2,500 expired records (more than one sweep batch) and one live one.
	if _, err := conn.Exec(`
		INSERT INTO idempotency_records (organization_id, principal_id, idempotency_key, fingerprint, method, route,
			response_status, response_sealed, created_at, expires_at)
		SELECT 'org_x', 'usr_x', 'k' || g, '\x00'::bytea, 'POST', '/v1/projects', 201, '{}'::bytea, now() - interval '25 hours', now() - interval '1 hour'
		FROM generate_series(1, 2500) g
		UNION ALL
		SELECT 'org_x', 'usr_x', 'live', '\x00'::bytea, 'POST', '/v1/projects', 201, '{}'::bytea, now(), now() + interval '23 hours'`); err != nil {
		t.Fatal(err)
	}
	w := &maintenance.IdempotencySweepWorker{DB: conn, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := w.Work(context.Background(), &river.Job[maintenance.IdempotencySweepArgs]{}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := conn.Select(&keys, `SELECT idempotency_key FROM idempotency_records`); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "live" {
		t.Fatalf("after sweep: %d records (%v...)", len(keys), keys[:min(3, len(keys))])
	}
}
