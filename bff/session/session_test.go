package session

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/dbtest"
)

func TestStoreKeepsNeitherTokenNorDataInClear(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	cfg := config.Config{AuthSecret: "session-test-secret-0123456789abcdef0123456789"}
	s := newStore(conn, cfg)
	const cookieToken, otherToken = "dashboard-cookie-token-aaaaaaaaaaaaaaaa", "dashboard-cookie-token-bbbbbbbbbbbbbbbb"
	data := []byte("api_token=upstream-session-token-in-the-data")
	expiry := time.Now().Add(time.Hour)
	if err := s.Commit(cookieToken, data, expiry); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(otherToken, []byte("other session"), expiry); err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		TokenHash []byte `db:"token_hash"`
		Data      []byte `db:"data"`
	}
	if err := conn.Select(&rows, `SELECT token_hash, data FROM dashboard_sessions`); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		for _, secret := range []string{cookieToken, otherToken, "upstream-session-token"} {
			if bytes.Contains(r.TokenHash, []byte(secret)) || bytes.Contains(r.Data, []byte(secret)) {
				t.Fatalf("%q stored in clear", secret)
			}
		}
	}
	got, found, err := s.Find(cookieToken)
	if err != nil || !found || !bytes.Equal(got, data) {
		t.Fatalf("find = %q %v %v", got, found, err)
	}
	if _, found, err := s.Find("an-unknown-token"); found || err != nil {
		t.Fatalf("unknown token found=%v err=%v", found, err)
	}

	// Data moved onto another session's row does not open there.
	if _, err := conn.Exec(`UPDATE dashboard_sessions SET data = (SELECT data FROM dashboard_sessions WHERE token_hash = $1)
		WHERE token_hash = $2`, s.tokenHash(cookieToken), s.tokenHash(otherToken)); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.Find(otherToken); found || err != nil {
		t.Fatalf("moved session data opened: found=%v err=%v", found, err)
	}
	// Another AUTH_SECRET opens nothing.
	rotated := newStore(conn, config.Config{AuthSecret: "another-secret-0123456789abcdef0123456789abcd"})
	if _, found, _ := rotated.Find(cookieToken); found {
		t.Fatal("a session opened under another AUTH_SECRET")
	}

	if err := s.Delete(cookieToken); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := s.Find(cookieToken); found {
		t.Fatal("deleted session still found")
	}
}

func TestStoreFailsClosedWithoutAuthSecret(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	s := newStore(conn, config.Config{AuthSecret: "short"})
	if err := s.Commit("token", []byte("data"), time.Now().Add(time.Hour)); !errors.Is(err, errNoSecret) {
		t.Fatalf("commit without AUTH_SECRET = %v", err)
	}
	if _, _, err := s.Find("token"); !errors.Is(err, errNoSecret) {
		t.Fatalf("find without AUTH_SECRET = %v", err)
	}
	var n int
	if err := conn.Get(&n, `SELECT count(*) FROM dashboard_sessions`); err != nil || n != 0 {
		t.Fatalf("%d sessions stored without a key (%v)", n, err)
	}
}
