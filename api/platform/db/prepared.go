package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// maxCachedStatements bounds the prepared statements kept per connection.
// Cairn issues a few dozen distinct statements; the bound only guards
// against a caller that builds unbounded query texts.
const maxCachedStatements = 256

// NewPool returns a connection pool whose connections prepare every
// parameterized statement once and reuse it. PostgreSQL then plans each
// statement once per connection instead of on every execution: planning,
// not execution, dominated the cost of Cairn's short queries. Nothing is
// sent until the first use. A string that does not parse is ErrInvalidURL,
// never the parser's error, which would quote the password.
func NewPool(dsn string) (*sqlx.DB, error) {
	base, err := pq.NewConnector(withParameter(WithBinaryParameters(dsn), "connect_timeout", connectTimeoutSeconds))
	if err != nil {
		return nil, ErrInvalidURL
	}
	return sqlx.NewDb(sql.OpenDB(preparingConnector{base: base}), "postgres"), nil
}

type preparingConnector struct {
	base driver.Connector
}

func (c preparingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &preparingConn{Conn: conn, stmts: map[string]driver.Stmt{}}, nil
}

func (c preparingConnector) Driver() driver.Driver { return c.base.Driver() }

// preparingConn is one lib/pq connection with its statement cache.
// database/sql never uses a driver connection from two goroutines at once,
// so the map needs no lock.
type preparingConn struct {
	driver.Conn
	stmts map[string]driver.Stmt
	// inTx is set while a transaction is open on the connection: its
	// statements are counted as writes when it commits (CommittedWrites).
	inTx bool
}

// stale reports whether PostgreSQL refused a cached statement because the
// schema under it changed (or it vanished); the statement is prepared again.
func stale(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && (pqErr.Code == "0A000" || pqErr.Code == "26000")
}

func (c *preparingConn) prepared(ctx context.Context, query string) (driver.Stmt, error) {
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	if len(c.stmts) >= maxCachedStatements {
		c.dropAll()
	}
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.stmts[query] = st
	return st, nil
}

func (c *preparingConn) forget(query string) {
	if st, ok := c.stmts[query]; ok {
		_ = st.Close()
		delete(c.stmts, query)
	}
}

func (c *preparingConn) dropAll() {
	for q, st := range c.stmts {
		_ = st.Close()
		delete(c.stmts, q)
	}
}

// QueryContext runs parameterized queries through the cache; statements
// without arguments use the simple protocol as before.
func (c *preparingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.query(ctx, query, args)
	if !c.inTx && !readsOnly(query) {
		if err != nil {
			committedWrites.Add(1)
			return rows, err
		}
		return writingRows{rows}, nil
	}
	return rows, err
}

func (c *preparingConn) query(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) == 0 {
		return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	}
	for attempt := 0; ; attempt++ {
		st, err := c.prepared(ctx, query)
		if err != nil {
			return nil, err
		}
		rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, args)
		if err != nil && attempt == 0 && stale(err) {
			c.forget(query)
			continue
		}
		return rows, err
	}
}

// ExecContext is QueryContext for statements without results.
func (c *preparingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.exec(ctx, query, args)
	if !c.inTx {
		committedWrites.Add(1)
	}
	return res, err
}

func (c *preparingConn) exec(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if len(args) == 0 {
		return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	}
	for attempt := 0; ; attempt++ {
		st, err := c.prepared(ctx, query)
		if err != nil {
			return nil, err
		}
		res, err := st.(driver.StmtExecContext).ExecContext(ctx, args)
		if err != nil && attempt == 0 && stale(err) {
			c.forget(query)
			continue
		}
		return res, err
	}
}

// The remaining methods pass straight through to lib/pq (a transaction
// only marked), so database/sql sees the same capabilities it would
// without the cache.

func (c *preparingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *preparingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.inTx = true
	return &watchedTx{Tx: tx, conn: c, readOnly: opts.ReadOnly}, nil
}

func (c *preparingConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }

func (c *preparingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *preparingConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

func (c *preparingConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (c *preparingConn) Close() error {
	c.dropAll()
	return c.Conn.Close()
}
