package run_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/run/runtest"
)

// logChunk is one chunk as GET /v1/runs/{id}/logs answers it.
type logChunk struct {
	Sequence int64  `json:"sequence"`
	Phase    string `json:"phase"`
	Body     string `json:"body"`
}

func (h *harness) logs(runID, query string) []logChunk {
	h.t.Helper()
	var chunks []logChunk
	h.owner.Get("/v1/runs/"+runID+"/logs?"+query).MustStatus(h.t, http.StatusOK).Data(h.t, &chunks)
	return chunks
}

func text(chunks []logChunk) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString(c.Body)
	}
	return b.String()
}

// TestPolicyStageWritesItsOwnLog evaluates a soft-failing policy the way
// the runner does, after the attempt stored its plan log: the evaluation
// narrates itself in the run's policy log, after the plan log in sequence,
// naming each attachment in order with its scope and enforcement, its
// result with the finding's title and address (never the finding's
// message, which quotes the plan), and the outcome. The /v1 log route
// filters by phase, with and without tail, and refuses an unknown phase.
// The database accepts policy chunks and segments and refuses any other
// phase. A plan sink still open across the policy log stores a late line
// after it rather than colliding with its sequences.
func TestPolicyStageWritesItsOwnLog(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.softPolicyWorkspace("policy-log")
	r := h.createRun(ws)
	st := h.start(r, run.PhasePlan)

	plan, err := h.runs.NewLogSink(h.ctx, r.ID, run.PhasePlan, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan.Line("Plan: 1 to add, 0 to change, 0 to destroy.")
	if err := plan.Flush(h.ctx, true); err != nil {
		t.Fatal(err)
	}
	planned := runtest.CommitPlan(t, h.env, h.runs, st, planJSON(t), true, nil)
	if _, err := planned.CommitPolicy(h.ctx, planned.Evaluate(t)); err != nil {
		t.Fatal(err)
	}

	all := h.logs(r.ID, "")
	policyChunks := h.logs(r.ID, "phase=policy")
	if len(policyChunks) == 0 {
		t.Fatalf("no policy log; the run's log is:\n%s", text(all))
	}
	for _, c := range policyChunks {
		if c.Phase != run.LogPhasePolicy {
			t.Fatalf("phase=policy answered a %s chunk", c.Phase)
		}
	}
	if all[0].Phase != run.PhasePlan || policyChunks[0].Sequence <= all[0].Sequence {
		t.Fatalf("the policy log does not follow the plan log: %+v", all)
	}
	got := text(policyChunks)
	want := []string{
		"Cairn policy stage of " + r.ID + ", plan attempt 1",
		"Evaluating 1 policy set(s) against the sanitized plan, in this order:\n  1. require-tags v1 (workspace scope, soft_mandatory)",
		"  1. require-tags v1: failed with 1 finding(s)",
		"; soft_mandatory: apply waits for an override",
		"       - Required tags are missing (terraform_data.item[0])",
		"Policy outcome: soft_failed (1 result(s), ",
	}
	last := -1
	for _, w := range want {
		i := strings.Index(got, w)
		if i < 0 || i < last {
			t.Fatalf("policy log lacks %q in order:\n%s", w, got)
		}
		last = i
	}
	if strings.Contains(got, "must set non-empty tag") || strings.Contains(got, "team-a") {
		t.Fatalf("the policy log shows a finding's message or plan values:\n%s", got)
	}
	if strings.Contains(text(h.logs(r.ID, "phase=plan")), "Policy outcome") {
		t.Fatal("phase=plan answered policy lines")
	}
	tail := h.logs(r.ID, "phase=policy&tail=1")
	if len(tail) != 1 || tail[0].Sequence != policyChunks[len(policyChunks)-1].Sequence {
		t.Fatalf("tail=1 of the policy log: %+v, want its last chunk", tail)
	}
	if tail := h.logs(r.ID, "phase=plan&tail=100"); len(tail) != 1 || tail[0].Phase != run.PhasePlan {
		t.Fatalf("tail of the plan log: %+v", tail)
	}
	if resp := h.owner.Get("/v1/runs/" + r.ID + "/logs?phase=policies"); resp.Status/100 != 4 {
		t.Fatalf("an unknown phase: %d %s", resp.Status, resp.Body)
	}

	// The plan sink numbered its next chunk before the policy log took
	// that sequence: its late line goes after the policy log.
	plan.Line("a late plan line")
	if err := plan.Flush(h.ctx, true); err != nil {
		t.Fatalf("a plan line after the policy log: %v", err)
	}
	all = h.logs(r.ID, "")
	if n := all[len(all)-1]; n.Phase != run.PhasePlan || n.Body != "a late plan line\n" || n.Sequence != policyChunks[len(policyChunks)-1].Sequence+1 {
		t.Fatalf("the late plan line: %+v", n)
	}

	// The schema knows exactly the three phases.
	var organizationID string
	if err := h.env.DB.Get(&organizationID, `SELECT organization_id FROM runs WHERE id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}
	tx := h.env.DB.MustBegin()
	defer tx.Rollback()
	for _, phase := range []string{"policy", "audit"} {
		if _, err := tx.Exec(`SAVEPOINT p`); err != nil {
			t.Fatal(err)
		}
		_, chunkErr := tx.Exec(`INSERT INTO run_log_chunks (run_id, sequence, phase, body) VALUES ($1, 1000, $2, 'x')`, r.ID, phase)
		if _, err := tx.Exec(`ROLLBACK TO SAVEPOINT p`); err != nil {
			t.Fatal(err)
		}
		_, segmentErr := tx.Exec(`INSERT INTO run_log_segments (id, organization_id, run_id, phase, first_sequence, last_sequence,
			chunk_count, phase_offset, text_bytes, blob_key, sha256) VALUES ('logseg_x', $1, $2, $3, 1000, 1000, 1, 0, 1, 'k', '\x00')`,
			organizationID, r.ID, phase)
		if _, err := tx.Exec(`ROLLBACK TO SAVEPOINT p`); err != nil {
			t.Fatal(err)
		}
		if phase == "policy" && (chunkErr != nil || segmentErr != nil) {
			t.Fatalf("a policy chunk or segment refused: %v / %v", chunkErr, segmentErr)
		}
		if phase != "policy" && (!checkViolation(chunkErr, "run_log_chunks_phase_check") || !checkViolation(segmentErr, "run_log_segments_phase_check")) {
			t.Fatalf("an %s chunk or segment: %v / %v, want the phase checks", phase, chunkErr, segmentErr)
		}
	}
}

// checkViolation reports whether err is the named check constraint's.
func checkViolation(err error, constraint string) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "23514" && pqErr.Constraint == constraint
}
