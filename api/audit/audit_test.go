package audit_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/reqid"
)

func entry(evidence map[string]any) audit.Entry {
	return audit.Entry{OrganizationID: "org_x", Action: "workspace.created", Actor: audit.Actor{Type: audit.ActorUser, ID: "usr_x"}, Evidence: evidence}
}

func TestSanitizeRejectsSecretsAndBoundsEverything(t *testing.T) {
	t.Parallel()
	for name, ev := range map[string]map[string]any{
		"password key":      {"password": "hunter2"},
		"nested token key":  {"outer": map[string]any{"api_token": "x"}},
		"secret suffix":     {"client_secret": "x"},
		"bad key":           {"Has-Caps": 1},
		"long string":       {"name": strings.Repeat("x", 513)},
		"too deep":          {"a": map[string]any{"b": map[string]any{"c": map[string]any{"d": map[string]any{"e": 1}}}}},
		"unsupported value": {"raw": []byte("bytes")},
	} {
		if _, err := audit.Sanitize(entry(ev)); !errors.Is(err, audit.ErrEvidenceRejected) {
			t.Errorf("%s: %v, want rejection", name, err)
		}
	}
	bad := entry(nil)
	bad.Action = "Created"
	if _, err := audit.Sanitize(bad); err == nil {
		t.Error("malformed action accepted")
	}
	bad = entry(nil)
	bad.Actor.Type = "anonymous"
	if _, err := audit.Sanitize(bad); err == nil {
		t.Error("unknown actor type accepted")
	}
	out, err := audit.Sanitize(entry(map[string]any{"workspace_id": "ws_1", "count": 3, "sensitive": true, "tags": []string{"a"}}))
	if err != nil || string(out) != `{"count":3,"sensitive":true,"tags":["a"],"workspace_id":"ws_1"}` {
		t.Fatalf("sanitized %s, %v", out, err)
	}
}

func TestAppendLivesAndDiesWithTheTransaction(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	ctx := reqid.With(context.Background(), "req_abcdefghijklmnopqrstuvwxyz")
	if _, err := conn.Exec(`INSERT INTO organizations (id, name, slug) VALUES ('org_x', 'X', 'x')`); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("mutation failed")
	err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
		if _, err := audit.Append(ctx, tx, entry(map[string]any{"n": 1})); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	var n int
	_ = conn.Get(&n, `SELECT count(*) FROM audit_events`)
	if n != 0 {
		t.Fatal("evidence of a rolled-back mutation survived")
	}
	if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
		_, err := audit.Append(ctx, tx, entry(map[string]any{"n": 2}))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var requestID string
	if err := conn.Get(&requestID, `SELECT request_id FROM audit_events`); err != nil || requestID != "req_abcdefghijklmnopqrstuvwxyz" {
		t.Fatalf("request ID %q (%v)", requestID, err)
	}
	if _, err := conn.Exec(`DELETE FROM audit_events`); err == nil {
		t.Fatal("audit events can be deleted")
	}
}
