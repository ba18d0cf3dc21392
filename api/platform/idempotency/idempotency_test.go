package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/idempotency"
	"github.com/cairnhq/cairn/api/platform/seal"
)

func TestValidateKey(t *testing.T) {
	t.Parallel()
	if idempotency.ValidateKey("") != idempotency.ErrKeyMissing {
		t.Fatal("empty key")
	}
	for _, bad := range []string{" lead", "tab\t", "del\x7f", string(make([]byte, 256))} {
		if idempotency.ValidateKey(bad) != idempotency.ErrKeyInvalid {
			t.Errorf("%q accepted", bad)
		}
	}
}

func newLedger(t *testing.T) *idempotency.Ledger {
	t.Helper()
	sealer, err := seal.NewSealer(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return idempotency.NewLedger([]byte("0123456789abcdef0123456789abcdef"), sealer)
}

func setup(t *testing.T) (*sqlx.DB, *idempotency.Ledger) {
	t.Helper()
	conn := dbtest.New(t)
	if _, err := conn.Exec(`INSERT INTO organizations (id, name, slug) VALUES ('org_x', 'X', 'x')`); err != nil {
		t.Fatal(err)
	}
	return conn, newLedger(t)
}

// reserveAndRecord is one keyed mutation answering body.
func reserveAndRecord(ctx context.Context, conn *sqlx.DB, ledger *idempotency.Ledger, r idempotency.Request, body string) (*idempotency.Response, error) {
	var stored *idempotency.Response
	err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
		s, err := ledger.Reserve(ctx, tx, r)
		if err != nil || s != nil {
			stored = s
			return err
		}
		return ledger.Record(ctx, tx, r, idempotency.Response{Status: 201, Body: []byte(body)})
	})
	return stored, err
}

func TestExpiredKeyIsFreeAgainAndReplayNeedsSameInput(t *testing.T) {
	t.Parallel()
	conn, ledger := setup(t)
	ctx := context.Background()
	req := idempotency.Request{OrganizationID: "org_x", PrincipalID: "usr_x", Key: "k", Method: "POST", Route: "/v1/x", Path: "/v1/x", Body: []byte(`{"a":1}`)}
	if s, err := reserveAndRecord(ctx, conn, ledger, req, `{"id":"x"}`); err != nil || s != nil {
		t.Fatalf("first = %v %v", s, err)
	}
	if s, err := reserveAndRecord(ctx, conn, ledger, req, `{"id":"y"}`); err != nil || s == nil || s.Status != 201 || string(s.Body) != `{"id":"x"}` {
		t.Fatalf("replay = %+v %v", s, err)
	}
	other := req
	other.Body = []byte(`{"a":2}`)
	if _, err := reserveAndRecord(ctx, conn, ledger, other, `{}`); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("other input = %v", err)
	}
	if _, err := conn.Exec(`UPDATE idempotency_records SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if s, err := reserveAndRecord(ctx, conn, ledger, other, `{"id":"z"}`); err != nil || s != nil {
		t.Fatalf("after expiry the key should be free: %v %v", s, err)
	}
	// The expired record was replaced by the new answer.
	if s, err := reserveAndRecord(ctx, conn, ledger, other, `{}`); err != nil || s == nil || string(s.Body) != `{"id":"z"}` {
		t.Fatalf("replay after reuse = %+v %v", s, err)
	}
}

// TestFingerprintCoversTheResolvedPathAndQuery: the same key, route
// template and body on another resource or with another query is other
// input.
func TestFingerprintCoversTheResolvedPathAndQuery(t *testing.T) {
	t.Parallel()
	conn, ledger := setup(t)
	ctx := context.Background()
	req := idempotency.Request{OrganizationID: "org_x", PrincipalID: "usr_x", Key: "k", Method: "DELETE",
		Route: "/v1/workspace-variables/{id}", Path: "/v1/workspace-variables/var_a", Body: []byte(`{}`)}
	if _, err := reserveAndRecord(ctx, conn, ledger, req, `{"id":"var_a"}`); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*idempotency.Request){
		"another resource": func(r *idempotency.Request) { r.Path = "/v1/workspace-variables/var_b" },
		"a query":          func(r *idempotency.Request) { r.Query = "force=true" },
		"another method":   func(r *idempotency.Request) { r.Method = "PUT" },
	} {
		other := req
		change(&other)
		if _, err := reserveAndRecord(ctx, conn, ledger, other, `{}`); !errors.Is(err, idempotency.ErrKeyReused) {
			t.Errorf("%s: %v, want ErrKeyReused", name, err)
		}
	}
}

// TestStoredAnswersAreSealedToTheirRecord: an answer carrying a secret is
// not in the table in clear, and a sealed answer moved onto another
// record of the same principal does not open.
func TestStoredAnswersAreSealedToTheirRecord(t *testing.T) {
	t.Parallel()
	conn, ledger := setup(t)
	ctx := context.Background()
	const token = "sst_plaintextthatmustnotbestored"
	a := idempotency.Request{OrganizationID: "org_x", PrincipalID: "usr_x", Key: "a", Method: "POST", Route: "/v1/t", Path: "/v1/t", Body: []byte(`{}`)}
	b := a
	b.Key = "b"
	for _, r := range []idempotency.Request{a, b} {
		if _, err := reserveAndRecord(ctx, conn, ledger, r, `{"token":"`+token+`"}`); err != nil {
			t.Fatal(err)
		}
	}
	var inClear int
	if err := conn.Get(&inClear, `SELECT count(*) FROM idempotency_records WHERE position($1::bytea IN response_sealed) > 0`, []byte(token)); err != nil || inClear != 0 {
		t.Fatalf("%d records hold the token in clear (%v)", inClear, err)
	}
	if s, err := reserveAndRecord(ctx, conn, ledger, a, `{}`); err != nil || !bytes.Contains(s.Body, []byte(token)) {
		t.Fatalf("replay = %+v %v", s, err)
	}
	if _, err := conn.Exec(`UPDATE idempotency_records SET response_sealed = (SELECT response_sealed FROM idempotency_records WHERE idempotency_key = 'b')
		WHERE idempotency_key = 'a'`); err != nil {
		t.Fatal(err)
	}
	if s, err := reserveAndRecord(ctx, conn, ledger, a, `{}`); err == nil {
		t.Fatalf("an answer sealed to another record opened: %+v", s)
	}
	unkeyed := idempotency.NewLedger([]byte("0123456789abcdef0123456789abcdef"), nil)
	if _, err := reserveAndRecord(ctx, conn, unkeyed, b, `{}`); !errors.Is(err, seal.ErrNoKey) {
		t.Fatalf("a ledger without a sealing key = %v, want ErrNoKey", err)
	}
}

// TestHoldSpansTransactions: while a hold is open the key is in progress;
// the answer recorded in another transaction is what a later retry gets.
func TestHoldSpansTransactions(t *testing.T) {
	t.Parallel()
	conn, ledger := setup(t)
	ctx := context.Background()
	req := idempotency.Request{OrganizationID: "org_x", PrincipalID: "usr_x", Key: "held", Method: "POST", Route: "/v1/r", Path: "/v1/r", Body: []byte(`{}`)}
	// An expired record of the key must not block the new answer.
	if _, err := reserveAndRecord(ctx, conn, ledger, req, `{"old":true}`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(`UPDATE idempotency_records SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	hold, err := ledger.Hold(ctx, conn, req)
	if err != nil || hold.Stored != nil {
		t.Fatalf("hold = %+v %v", hold, err)
	}
	if _, err := reserveAndRecord(ctx, conn, ledger, req, `{}`); !errors.Is(err, idempotency.ErrInProgress) {
		t.Fatalf("while held = %v, want ErrInProgress", err)
	}
	if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
		return ledger.Record(ctx, tx, req, idempotency.Response{Status: 200, Body: []byte(`{"new":true}`)})
	}); err != nil {
		t.Fatalf("recording beside the hold: %v", err)
	}
	hold.Release()
	again, err := ledger.Hold(ctx, conn, req)
	if err != nil || again.Stored == nil || string(again.Stored.Body) != `{"new":true}` {
		t.Fatalf("retry after the held mutation = %+v %v", again, err)
	}
	again.Release()
}
