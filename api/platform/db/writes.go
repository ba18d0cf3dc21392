package db

import (
	"database/sql/driver"
	"strings"
	"sync/atomic"
)

// committedWrites counts the statements and transactions that may have
// written something and have ended, in this process, through any pool
// NewPool made.
var committedWrites atomic.Uint64

// CommittedWrites is the number of writes this process has finished
// through its pools: it changes after every transaction that was not read
// only ends, every statement outside a transaction that may write returns,
// and before either is reported to its caller. Something kept in memory
// from a read can tell that this process changed the database since: a
// request then sees every write a request before it made.
func CommittedWrites() uint64 { return committedWrites.Load() }

// readsOnly reports whether a statement outside a transaction only reads:
// a single SELECT. Anything else (a CTE, which may hold a data-modifying
// statement, an INSERT ... RETURNING) counts as a write when it ends.
func readsOnly(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n(")
	return len(q) >= 6 && strings.EqualFold(q[:6], "select")
}

// watchedTx is a driver transaction that counts its commit as a write
// unless it was begun read only.
type watchedTx struct {
	driver.Tx
	conn     *preparingConn
	readOnly bool
}

func (t *watchedTx) Commit() error {
	err := t.Tx.Commit()
	t.conn.inTx = false
	if !t.readOnly {
		// Counted even when the commit failed: whether it reached the
		// server is not known.
		committedWrites.Add(1)
	}
	return err
}

func (t *watchedTx) Rollback() error {
	t.conn.inTx = false
	return t.Tx.Rollback()
}

// writingRows counts a write when the rows of a statement that may write
// are closed: it has ended by then.
type writingRows struct{ driver.Rows }

func (r writingRows) Close() error {
	err := r.Rows.Close()
	committedWrites.Add(1)
	return err
}
