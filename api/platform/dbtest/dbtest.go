package dbtest

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // PostgreSQL driver

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/id"
)

// AdminURL is the throwaway cluster's maintenance database URL, set by
// `make test`. A test that needs PostgreSQL fails without it rather than
// quietly skipping: a skipped integration test proves nothing.
func AdminURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("CAIRN_TEST_DATABASE_URL")
	if u == "" {
		t.Fatal("CAIRN_TEST_DATABASE_URL is not set: run the tests with `make test`, which starts a throwaway PostgreSQL cluster")
	}
	return u
}

func templateName() string {
	if name := os.Getenv("CAIRN_TEST_TEMPLATE_DB"); name != "" {
		return name
	}
	return "cairn_template"
}

// New returns a connection to a fresh database cloned from the migrated
// template; it is dropped when the test ends.
func New(t testing.TB) *sqlx.DB {
	t.Helper()
	conn, _ := create(t, templateName())
	return conn
}

// NewURL is New that also returns the database's URL, for tests that start
// a real process against it.
func NewURL(t testing.TB) (*sqlx.DB, string) {
	t.Helper()
	return create(t, templateName())
}

// Empty returns a connection to a fresh database with no schema at all.
func Empty(t testing.TB) (*sqlx.DB, string) {
	t.Helper()
	return create(t, "template0")
}

func create(t testing.TB, template string) (*sqlx.DB, string) {
	t.Helper()
	admin := AdminURL(t)
	name := "t_" + strings.TrimPrefix(id.New("x"), "x_")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adminConn, err := sql.Open("postgres", admin)
	if err != nil {
		t.Fatalf("opening admin connection: %v", err)
	}
	defer adminConn.Close()
	// Cloning from a template fails while another session copies the same
	// template; a short retry covers that race between parallel packages.
	for attempt := 0; ; attempt++ {
		_, err = adminConn.ExecContext(ctx, `CREATE DATABASE "`+name+`" TEMPLATE "`+template+`"`)
		if err == nil || attempt == 50 || !strings.Contains(err.Error(), "is being accessed by other users") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parsing admin URL: %v", err)
	}
	u.Path = "/" + name
	conn, err := db.NewPool(u.String())
	if err != nil {
		t.Fatalf("opening test database: %v", err)
	}
	conn.SetMaxOpenConns(40)
	t.Cleanup(func() {
		conn.Close()
		drop, err := sql.Open("postgres", admin)
		if err != nil {
			return
		}
		defer drop.Close()
		_, _ = drop.Exec(`DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`)
	})
	return conn, u.String()
}
