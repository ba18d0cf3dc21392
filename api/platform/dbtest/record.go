package dbtest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/platform/db"
)

// Statement is one statement a recording pool ran, with its arguments.
type Statement struct {
	Text string
	Args []any
}

// Recorder keeps, while started, every statement a recording pool runs,
// in order: a test reads what a request cost in statements and which.
type Recorder struct {
	mu         sync.Mutex
	on         bool
	statements []Statement
}

// Start forgets what was recorded and records from now on.
func (r *Recorder) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on, r.statements = true, nil
}

// Stop ends recording and returns what was recorded.
func (r *Recorder) Stop() []Statement {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.statements
}

func (r *Recorder) record(query string, args []driver.NamedValue) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.on {
		return
	}
	values := make([]any, len(args))
	for i, a := range args {
		values[i] = a.Value
	}
	r.statements = append(r.statements, Statement{Text: query, Args: values})
}

// RecordingPool is a pool over lib/pq (in binary-parameter mode, as the
// server's) whose connections report every statement to rec before they
// run it.
func RecordingPool(t testing.TB, dsn string, rec *Recorder) *sqlx.DB {
	t.Helper()
	base, err := pq.NewConnector(db.WithBinaryParameters(dsn))
	if err != nil {
		t.Fatal(err)
	}
	conn := sqlx.NewDb(sql.OpenDB(recordingConnector{base: base, rec: rec}), "postgres")
	conn.SetMaxOpenConns(20)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

type recordingConnector struct {
	base driver.Connector
	rec  *Recorder
}

func (c recordingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: conn, rec: c.rec}, nil
}

func (c recordingConnector) Driver() driver.Driver { return c.base.Driver() }

type recordingConn struct {
	driver.Conn
	rec *Recorder
}

func (c *recordingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.rec.record(query, args)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *recordingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.rec.record(query, args)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *recordingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *recordingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *recordingConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }

func (c *recordingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *recordingConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

func (c *recordingConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}
