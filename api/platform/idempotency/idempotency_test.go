package idempotency_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/idempotency"
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

func TestExpiredKeyIsFreeAgainAndReplayNeedsSameInput(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	ctx := context.Background()
	if _, err := conn.Exec(`INSERT INTO organizations (id, name, slug) VALUES ('org_x', 'X', 'x')`); err != nil {
		t.Fatal(err)
	}
	ledger := idempotency.NewLedger([]byte("0123456789abcdef0123456789abcdef"))
	req := idempotency.Request{OrganizationID: "org_x", PrincipalID: "usr_x", Key: "k", Method: "POST", Route: "/v1/x", Body: []byte(`{"a":1}`)}
	reserveAndRecord := func(r idempotency.Request) (*idempotency.Response, error) {
		var stored *idempotency.Response
		err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
			s, err := ledger.Reserve(ctx, tx, r)
			if err != nil || s != nil {
				stored = s
				return err
			}
			return ledger.Record(ctx, tx, r, idempotency.Response{Status: 201, Body: []byte(`{"id":"x"}`)})
		})
		return stored, err
	}
	if s, err := reserveAndRecord(req); err != nil || s != nil {
		t.Fatalf("first = %v %v", s, err)
	}
	if s, err := reserveAndRecord(req); err != nil || s == nil || s.Status != 201 || string(s.Body) != `{"id":"x"}` {
		t.Fatalf("replay = %+v %v", s, err)
	}
	other := req
	other.Body = []byte(`{"a":2}`)
	if _, err := reserveAndRecord(other); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("other input = %v", err)
	}
	if _, err := conn.Exec(`UPDATE idempotency_records SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if s, err := reserveAndRecord(other); err != nil || s != nil {
		t.Fatalf("after expiry the key should be free: %v %v", s, err)
	}
}
