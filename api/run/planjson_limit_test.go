package run_test

import (
	"errors"
	"io"
	"testing"

	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/run"
)

// zeros reads n zero bytes without holding them.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), z.n)]
	clear(p)
	z.n -= int64(len(p))
	return len(p), nil
}

// TestPlanJSONOverItsLimitIsRefusedWhenStored: a plan's JSON export is
// bounded at 100 MB (SPEC §8) by its kind, whatever limit the caller
// passes: one byte more is refused with blob.ErrTooLarge and leaves no
// object behind, and exactly 100 MB is stored.
func TestPlanJSONOverItsLimitIsRefusedWhenStored(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.createRun(h.workspace("planjson"))
	st := h.start(r, run.PhasePlan)
	const generous = 1 << 40
	for _, kind := range []string{run.ArtifactPlanJSON, run.ArtifactPlanJSONRedacted} {
		_, err := h.runs.StoreArtifact(h.ctx, st, kind, &zeros{run.MaxPlanJSONBytes + 1}, generous)
		if !errors.Is(err, blob.ErrTooLarge) {
			t.Fatalf("%s of %d bytes: %v, want %v", kind, run.MaxPlanJSONBytes+1, err, blob.ErrTooLarge)
		}
		rc, err := h.env.Server.Blobs().Open(h.ctx, blobkey.RunArtifact(r.OrganizationID, r.ID, kind), "")
		if err == nil {
			rc.Close()
		}
		if !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("a refused %s left an object: %v", kind, err)
		}
	}
	a, err := h.runs.StoreArtifact(h.ctx, st, run.ArtifactPlanJSON, &zeros{run.MaxPlanJSONBytes}, generous)
	if err != nil || a.SizeBytes != run.MaxPlanJSONBytes {
		t.Fatalf("plan JSON of exactly %d bytes: %+v, %v", run.MaxPlanJSONBytes, a, err)
	}
}
