package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/dbtest"
)

// TestOpenGateRetryReplays: `launch open-gate -key K` retried after it
// succeeded (its answer lost) returns the version it wrote, as the usage
// promises for -key, instead of a conflict; the key of another change is
// still refused.
func TestOpenGateRetryReplays(t *testing.T) {
	t.Parallel()
	svc := launch.NewService(dbtest.New(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	first, replayed, err := openPublicGate(ctx, svc, "launch day", "open-1", "cli:ops")
	if err != nil || replayed || first.Version != 1 || !first.PublicGate {
		t.Fatalf("open-gate = %+v %v %v", first, replayed, err)
	}
	again, replayed, err := openPublicGate(ctx, svc, "launch day", "open-1", "cli:ops")
	if err != nil || !replayed || again.Version != 1 {
		t.Fatalf("open-gate retried = %+v %v %v", again, replayed, err)
	}
	// Another reason under the key is another request.
	if _, _, err := openPublicGate(ctx, svc, "another reason", "open-1", "cli:ops"); !errors.Is(err, launch.ErrKeyReused) {
		t.Fatalf("open-gate with another reason under the key = %v", err)
	}
	// A key that wrote a closed gate does not replay as an opened one.
	closed := launch.Default()
	if _, _, err := svc.Apply(ctx, launch.Change{Actor: "cli:ops", RequestID: "r", IdempotencyKey: "close-1", ExpectedVersion: 1,
		Reason: "pause", Document: closed}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openPublicGate(ctx, svc, "pause", "close-1", "cli:ops"); !errors.Is(err, launch.ErrKeyReused) {
		t.Fatalf("open-gate under a closing change's key = %v", err)
	}
	reopened, replayed, err := openPublicGate(ctx, svc, "reopen", "open-2", "cli:ops")
	if err != nil || replayed || reopened.Version != 3 || !reopened.PublicGate {
		t.Fatalf("reopen = %+v %v %v", reopened, replayed, err)
	}
}
