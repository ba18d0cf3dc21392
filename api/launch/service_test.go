package launch_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/dbtest"
)

func TestDecideFailsClosedOnMissingAndMalformedControl(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	svc := launch.NewService(conn, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	subject := launch.Subject{OrganizationID: "org_aaaaaaaaaaaaaaaaaaaaaaaaaa"}
	if d := svc.Decide(ctx, nil, subject); d.Admitted || d.Reason != "control_missing" {
		t.Fatalf("no control: %+v", d)
	}
	// A malformed document that got into the table admits nothing.
	if _, err := conn.Exec(`INSERT INTO launch_control_versions (version, document, actor, request_id, reason, idempotency_key)
		VALUES (1, '{"public_gate": true}', 'test', 'req', 'broken', 'k1')`); err != nil {
		t.Fatal(err)
	}
	if d := svc.Decide(ctx, nil, subject); d.Admitted {
		t.Fatalf("malformed control admitted: %+v", d)
	}
	// An operator repairs it by naming the broken version.
	open := launch.Default()
	open.PublicGate = true
	change := launch.Change{Actor: "ops", RequestID: "req_x", IdempotencyKey: "fix-1", ExpectedVersion: 1, Reason: "repair", Document: open}
	c, replayed, err := svc.Apply(ctx, change)
	if err != nil || replayed || c.Version != 2 {
		t.Fatalf("repair = %+v %v %v", c, replayed, err)
	}
	if d := svc.Decide(ctx, nil, subject); !d.Admitted {
		t.Fatalf("open gate refused: %+v", d)
	}
	if _, replayed, err := svc.Apply(ctx, change); err != nil || !replayed {
		t.Fatalf("replay = %v %v", replayed, err)
	}
	closed := launch.Default()
	if _, _, err := svc.Apply(ctx, launch.Change{Actor: "ops", RequestID: "r", IdempotencyKey: "fix-1", ExpectedVersion: 1, Reason: "x", Document: closed}); !errors.Is(err, launch.ErrKeyReused) {
		t.Fatalf("key reuse = %v", err)
	}
	if _, _, err := svc.Apply(ctx, launch.Change{Actor: "ops", RequestID: "r", IdempotencyKey: "stale", ExpectedVersion: 1, Reason: "x", Document: closed}); !errors.Is(err, launch.ErrVersionConflict) {
		t.Fatalf("stale expected version = %v", err)
	}
	var before, after string
	if err := conn.QueryRow(`SELECT before_document::text, document::text FROM launch_control_versions WHERE version = 2`).Scan(&before, &after); err != nil {
		t.Fatal(err)
	}
	if before != `{"public_gate": true}` || after == before {
		t.Fatalf("evidence before=%s after=%s", before, after)
	}
	if _, err := conn.Exec(`UPDATE launch_control_versions SET reason = 'rewritten' WHERE version = 1`); err == nil {
		t.Fatal("a control version was edited in place")
	}
}
