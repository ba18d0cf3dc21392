package run_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/blobtest"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/sweep"
)

// logStores are the blob stores the log tests run against: the directory
// default and a real S3 server (versitygw).
func logStores(t *testing.T) map[string]apitest.Option {
	small := func(s *apitest.Settings) {
		s.Config.LogSegmentBytes = 64 << 10
		s.Config.RunLogMaxBytes = 1 << 20
	}
	srv := blobtest.S3(t)
	_, storeURL := srv.Bucket(t)
	return map[string]apitest.Option{
		"directory": small,
		"s3": func(s *apitest.Settings) {
			small(s)
			s.Config.BlobURL = storeURL
			s.Config.S3AccessKeyID = srv.Creds.AccessKeyID
			s.Config.S3SecretAccessKey = config.Secret(srv.Creds.SecretAccessKey)
		},
	}
}

// writeLog writes n numbered lines to a phase's sink, flushing as the
// runner does, and returns the text stored.
func writeLog(t *testing.T, runs *run.Service, runID, phase string, from, n int) string {
	t.Helper()
	ctx := context.Background()
	sink, err := runs.NewLogSink(ctx, runID, phase, []string{"hunter2-secret"})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := from; i < from+n; i++ {
		line := fmt.Sprintf("%s line %06d: %s\n", phase, i, strings.Repeat("x", i%97))
		if i%1000 == 7 {
			line = fmt.Sprintf("%s line %06d: token hunter2-secret\n", phase, i)
			want.WriteString(fmt.Sprintf("%s line %06d: token (sensitive value)\n", phase, i))
		} else {
			want.WriteString(line)
		}
		if _, err := sink.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			if err := sink.Flush(ctx, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := sink.Flush(ctx, true); err != nil {
		t.Fatal(err)
	}
	return want.String()
}

// TestLongLogsMoveIntoSealedSegments writes plan and apply logs far past
// the segment threshold, on both stores: the table keeps less than a
// threshold per phase, the rest is in sealed segments, and every way of
// reading the log (pages, tail, byte ranges) returns exactly what was
// written, in order, without a gap or a repeat. The orphan sweep keeps
// referenced segments; deleting the workspace removes the rows before the
// objects.
func TestLongLogsMoveIntoSealedSegments(t *testing.T) {
	t.Parallel()
	for name, option := range logStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := apitest.New(t, option)
			h := &harness{t: t, ctx: context.Background(), env: env, runs: env.Server.Services().Runs}
			h.owner = env.WithOrganization("logs")
			wsID := h.workspace("logs")
			r := h.createRun(wsID)

			plan := writeLog(t, h.runs, r.ID, run.PhasePlan, 0, 4000)
			apply := writeLog(t, h.runs, r.ID, run.PhaseApply, 4000, 3000)

			var segments int
			var tableBytes int64
			if err := env.DB.Get(&segments, `SELECT count(*) FROM run_log_segments WHERE run_id = $1`, r.ID); err != nil {
				t.Fatal(err)
			}
			if err := env.DB.Get(&tableBytes, `SELECT coalesce(max(b), 0) FROM (SELECT sum(octet_length(body)) b
				FROM run_log_chunks WHERE run_id = $1 GROUP BY phase) t`, r.ID); err != nil {
				t.Fatal(err)
			}
			if segments < 4 || tableBytes >= 64<<10 {
				t.Fatalf("%d segments, %d bytes left in a phase's rows", segments, tableBytes)
			}

			p := h.ownerPrincipal()
			// Pages of at most 100 chunks, in order, add up to the log.
			var paged strings.Builder
			last := int64(0)
			for {
				chunks, err := h.runs.Logs(h.ctx, p, r.ID, run.LogQuery{After: last, Limit: 37})
				if err != nil {
					t.Fatal(err)
				}
				if len(chunks) == 0 {
					break
				}
				for _, c := range chunks {
					if c.Sequence != last+1 {
						t.Fatalf("chunk %d follows %d", c.Sequence, last)
					}
					last = c.Sequence
					paged.WriteString(c.Body)
				}
			}
			if paged.String() != plan+apply {
				t.Fatalf("paged log differs: %d bytes, want %d", paged.Len(), len(plan)+len(apply))
			}
			// A tail inside the last segment, one across segments and rows,
			// and one longer than the log.
			for _, n := range []int{3, int(last) / 2, 100} {
				tail, err := h.runs.Logs(h.ctx, p, r.ID, run.LogQuery{Tail: n})
				want := min(n, int(last))
				if err != nil || len(tail) != want || tail[want-1].Sequence != last || tail[0].Sequence != last-int64(want)+1 {
					t.Fatalf("tail %d: %d chunks, %v", n, len(tail), err)
				}
				var tailText strings.Builder
				for i, c := range tail {
					if i > 0 && c.Sequence != tail[i-1].Sequence+1 {
						t.Fatalf("tail %d out of order", n)
					}
					tailText.WriteString(c.Body)
				}
				if !strings.HasSuffix(plan+apply, tailText.String()) {
					t.Fatalf("tail %d is not the end of the log", n)
				}
			}

			// Byte ranges of each phase, across segments and rows.
			rng := rand.New(rand.NewPCG(1, 2))
			for phase, text := range map[string]string{run.PhasePlan: plan, run.PhaseApply: apply} {
				n := int64(len(text))
				for _, w := range [][2]int64{{0, -1}, {0, 1}, {n - 10, -1}, {n, n + 5}, {n + 3, -1}, {65530, 65540}} {
					checkRange(t, h, r, phase, text, w[0], w[1])
				}
				for range 20 {
					from := rng.Int64N(n)
					checkRange(t, h, r, phase, text, from, from+rng.Int64N(200_000))
				}
			}

			// The sweep keeps referenced segments, however old.
			blobs := env.Server.Blobs()
			report, err := sweep.NewService(env.DB, blobs, sweep.Options{MinAge: 1}).Sweep(h.ctx)
			if err != nil || report.Deleted != 0 {
				t.Fatalf("sweep deleted referenced objects: %+v %v", report, err)
			}

			// Deleting the workspace removes the rows, then the objects.
			var keys []string
			if err := env.DB.Select(&keys, `SELECT blob_key FROM run_log_segments WHERE run_id = $1`, r.ID); err != nil {
				t.Fatal(err)
			}
			var deleted []string
			err = db.WithTx(h.ctx, env.DB, func(tx *sqlx.Tx) error {
				_, deleted, err = env.Server.Services().Workspaces.DeleteWorkspace(h.ctx, tx, p, wsID)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if !slices.Contains(deleted, k) {
					t.Fatalf("workspace deletion left segment %s out of its objects", k)
				}
			}
			env.Server.Services().State.DeleteObjects(h.ctx, deleted)
			for _, k := range keys {
				if _, err := blobs.Open(h.ctx, k, "any"); err != blob.ErrNotFound {
					t.Fatalf("segment %s still stored: %v", k, err)
				}
			}
		})
	}
}

func checkRange(t *testing.T, h *harness, r run.Run, phase, text string, from, to int64) {
	t.Helper()
	rng, err := h.runs.OpenPhaseLog(h.ctx, r, phase, from, to)
	if err != nil {
		t.Fatal(err)
	}
	defer rng.Close()
	got, err := io.ReadAll(rng)
	if err != nil {
		t.Fatalf("reading %s [%d, %d): %v", phase, from, to, err)
	}
	n := int64(len(text))
	lo, hi := min(from, n), n
	if to >= 0 {
		hi = min(to, n)
	}
	hi = max(hi, lo)
	if rng.Total != n || rng.Size != int64(len(got)) || string(got) != text[lo:hi] {
		t.Fatalf("%s [%d, %d): %d bytes (size %d, total %d), want %d of %d", phase, from, to, len(got), rng.Size, rng.Total, hi-lo, n)
	}
}

// TestRunLogCapMarksTheCut writes more than the run's log cap across two
// phases: the second phase's output stops at the cap with a line saying
// so, the run shows log_truncated, and the runner's own lines still land.
func TestRunLogCapMarksTheCut(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, func(s *apitest.Settings) { s.Config.RunLogMaxBytes = 1 << 20 })
	h := &harness{t: t, ctx: context.Background(), env: env, runs: env.Server.Services().Runs}
	h.owner = env.WithOrganization("cap")
	r := h.createRun(h.workspace("cap"))

	var view struct {
		LogTruncated bool `json:"log_truncated"`
	}
	writeLog(t, h.runs, r.ID, run.PhasePlan, 0, 6000)
	h.owner.Get("/v1/runs/"+r.ID).MustStatus(t, http.StatusOK).Data(t, &view)
	if view.LogTruncated {
		t.Fatal("a log under the cap is marked truncated")
	}
	sink, err := h.runs.NewLogSink(h.ctx, r.ID, run.PhaseApply, nil)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("z", 199) + "\n")
	for range 10_000 {
		_, _ = sink.Write(line)
	}
	sink.Line("Apply finished.")
	if err := sink.Flush(h.ctx, true); err != nil {
		t.Fatal(err)
	}
	var total int64
	var body string
	if err := env.DB.Get(&total, `SELECT sum(octet_length(body)) FROM run_log_chunks WHERE run_id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}
	if total > 1<<20+4096 {
		t.Fatalf("the run keeps %d bytes of log, over its 1 MiB cap", total)
	}
	if err := env.DB.Get(&body, `SELECT string_agg(body, '' ORDER BY sequence) FROM run_log_chunks WHERE run_id = $1 AND phase = 'apply'`, r.ID); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "(Cairn: this run's log passed 1 MiB; the rest of this output is not kept.)") ||
		!strings.HasSuffix(body, "Apply finished.\n") {
		t.Fatalf("the apply log ends %q", body[max(0, len(body)-200):])
	}
	h.owner.Get("/v1/runs/"+r.ID).MustStatus(t, http.StatusOK).Data(t, &view)
	if !view.LogTruncated {
		t.Fatal("the run does not show log_truncated")
	}
}
