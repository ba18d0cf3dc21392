package db_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/dbtest"
)

// TestCommittedWritesCountEveryWriteOnceItEnded: a principal kept in
// memory is served only while CommittedWrites stands still, so every way
// a pool writes must move it, and only once the write has ended (a count
// taken before a commit would let a read of the old row be kept after
// it). Plain reads must not move it, or nothing would ever be served. Not
// parallel: the count is the whole process's.
func TestCommittedWritesCountEveryWriteOnceItEnded(t *testing.T) {
	conn := dbtest.New(t)
	ctx := context.Background()
	if _, err := conn.Exec(`CREATE TABLE scratch (n int)`); err != nil {
		t.Fatal(err)
	}
	moved := func(t *testing.T, what string, want bool, fn func()) {
		t.Helper()
		before := db.CommittedWrites()
		fn()
		if got := db.CommittedWrites() != before; got != want {
			t.Errorf("%s: the count moved %v, want %v", what, got, want)
		}
	}
	var n int
	moved(t, "a SELECT with arguments", false, func() { _ = conn.Get(&n, `SELECT $1::int`, 1) })
	moved(t, "a SELECT without arguments", false, func() { _ = conn.Get(&n, ` SELECT count(*) FROM scratch`) })
	moved(t, "an Exec", true, func() { _, _ = conn.Exec(`INSERT INTO scratch VALUES ($1)`, 1) })
	moved(t, "a failed Exec", true, func() { _, _ = conn.Exec(`INSERT INTO scratch VALUES ($1)`, "not a number") })
	moved(t, "an INSERT ... RETURNING read as rows", true, func() { _ = conn.Get(&n, `INSERT INTO scratch VALUES (2) RETURNING n`) })
	moved(t, "a CTE", true, func() { _ = conn.Get(&n, `WITH w AS (INSERT INTO scratch VALUES (3) RETURNING n) SELECT n FROM w`) })

	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	moved(t, "a write inside a transaction, before its commit", false, func() { _, _ = tx.Exec(`INSERT INTO scratch VALUES (4)`) })
	moved(t, "the commit", true, func() {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	})
	tx, err = conn.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = tx.Exec(`INSERT INTO scratch VALUES (5)`)
	moved(t, "a rollback", false, func() { _ = tx.Rollback() })
	moved(t, "a read-only transaction", false, func() {
		ro, err := conn.BeginTxx(ctx, &sqlReadOnly)
		if err != nil {
			t.Fatal(err)
		}
		_ = ro.Get(&n, `SELECT count(*) FROM scratch`)
		if err := ro.Commit(); err != nil {
			t.Fatal(err)
		}
	})
	// The connection is back outside a transaction: its statements count
	// again.
	moved(t, "an Exec after the transactions", true, func() { _, _ = conn.Exec(`DELETE FROM scratch`) })
}

var sqlReadOnly = sql.TxOptions{ReadOnly: true}
