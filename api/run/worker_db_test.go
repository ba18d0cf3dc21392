package run_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/run"
)

// evidenceReview is the part of a review that names who ran the run.
type evidenceReview struct {
	Evidence struct {
		WorkflowID    *string `json:"workflow_id"`
		DefinitionSHA *string `json:"definition_sha"`
		BuildSHA      *string `json:"build_sha"`
		WorkflowBuild *string `json:"workflow_build"`
		Protocol      *string `json:"protocol"`
		PolicyEngine  *string `json:"policy_engine"`
		Attempts      []struct {
			Phase  string              `json:"phase"`
			Worker *run.WorkerIdentity `json:"worker"`
		} `json:"attempts"`
	} `json:"evidence"`
	NotRecorded []string `json:"not_recorded"`
}

var identityFields = []string{"evidence.workflow_id", "evidence.definition_sha", "evidence.build_sha", "evidence.workflow_build",
	"evidence.protocol", "evidence.policy_engine"}

// TestEvidenceIdentitiesComeFromTheWorkersRecords: a run whose attempts
// recorded no worker (a queued run, or one started before workers recorded
// themselves) reports its workflow, definition, build, protocol and policy
// engine as not recorded, never as a constant. Once the worker of the
// running attempt records itself, the review names exactly that; a second
// record, another worker's or one for an attempt not running is refused,
// and a malformed field is kept out of the review.
func TestEvidenceIdentitiesComeFromTheWorkersRecords(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.createRun(h.workspace("evidence"))
	read := func() evidenceReview {
		t.Helper()
		var v evidenceReview
		h.owner.Get("/v1/runs/"+r.ID).MustStatus(t, http.StatusOK).Data(t, &v)
		return v
	}
	unrecorded := func(v evidenceReview) {
		t.Helper()
		e := v.Evidence
		for _, p := range []*string{e.WorkflowID, e.DefinitionSHA, e.BuildSHA, e.WorkflowBuild, e.Protocol, e.PolicyEngine} {
			if p != nil {
				t.Fatalf("an identity with no record reads %q", *p)
			}
		}
		for _, name := range identityFields {
			if !slices.Contains(v.NotRecorded, name) {
				t.Fatalf("not_recorded %v lacks %s", v.NotRecorded, name)
			}
		}
	}
	unrecorded(read())

	st := h.start(r, run.PhasePlan)
	unrecorded(read()) // started, but its worker recorded nothing yet
	identity := run.WorkerIdentity{WorkflowID: "run_phase-42", DefinitionSHA: strings.Repeat("ab", 20), BuildSHA: strings.Repeat("0f", 32),
		Version: "v1.2.3-4-gabcdef0", Protocol: "tfe-remote-backend", PolicyEngine: "opa/1.18.2"}
	if err := h.runs.RecordWorker(h.ctx, st.Attempt.ID, "another-worker", identity); !errors.Is(err, run.ErrAttemptNotCurrent) {
		t.Fatalf("another worker's record: %v", err)
	}
	malformed := identity
	malformed.Version = "v1 <script>"
	if err := h.runs.RecordWorker(h.ctx, st.Attempt.ID, "test-worker", malformed); err != nil {
		t.Fatal(err)
	}
	if err := h.runs.RecordWorker(h.ctx, st.Attempt.ID, "test-worker", identity); !errors.Is(err, run.ErrAttemptNotCurrent) {
		t.Fatalf("a second record: %v", err)
	}
	v := read()
	e := v.Evidence
	for name, got := range map[string][2]*string{
		"workflow_id": {e.WorkflowID, &identity.WorkflowID}, "definition_sha": {e.DefinitionSHA, &identity.DefinitionSHA},
		"build_sha": {e.BuildSHA, &identity.BuildSHA}, "protocol": {e.Protocol, &identity.Protocol},
		"policy_engine": {e.PolicyEngine, &identity.PolicyEngine},
	} {
		if got[0] == nil || *got[0] != *got[1] {
			t.Errorf("evidence %s = %v, want %s", name, got[0], *got[1])
		}
	}
	if e.WorkflowBuild != nil || !slices.Contains(v.NotRecorded, "evidence.workflow_build") {
		t.Errorf("a malformed version reads %v (not_recorded %v)", e.WorkflowBuild, v.NotRecorded)
	}
	for _, name := range identityFields {
		if name != "evidence.workflow_build" && slices.Contains(v.NotRecorded, name) {
			t.Errorf("not_recorded %v names the recorded %s", v.NotRecorded, name)
		}
	}
	if len(e.Attempts) != 1 || e.Attempts[0].Worker == nil || e.Attempts[0].Worker.BuildSHA != identity.BuildSHA || e.Attempts[0].Worker.Version != "" {
		t.Fatalf("the attempt's worker: %+v", e.Attempts)
	}

	// An attempt that is not running takes no record.
	queued := h.queued(h.createRun(h.workspace("evidence-queued")), run.PhasePlan)
	if err := h.runs.RecordWorker(h.ctx, queued.ID, "test-worker", identity); !errors.Is(err, run.ErrAttemptNotCurrent) {
		t.Fatalf("a record for a queued attempt: %v", err)
	}
}

// TestRecordedWorkersPicksTheNewestRecords: the run's identities are those
// of the newest attempt with a record, its policy engine that of the
// newest plan attempt with one; without records, none.
func TestRecordedWorkersPicksTheNewestRecords(t *testing.T) {
	t.Parallel()
	first, retried, apply := &run.WorkerIdentity{Version: "a"}, &run.WorkerIdentity{Version: "b"}, &run.WorkerIdentity{Version: "c"}
	for name, tc := range map[string]struct {
		attempts     []run.Attempt
		latest, plan *run.WorkerIdentity
	}{
		"none":                 {nil, nil, nil},
		"unrecorded":           {[]run.Attempt{{Phase: run.PhasePlan}}, nil, nil},
		"retried plan":         {[]run.Attempt{{Phase: run.PhasePlan, Worker: first}, {Phase: run.PhasePlan, Worker: retried}}, retried, retried},
		"apply after plan":     {[]run.Attempt{{Phase: run.PhasePlan, Worker: first}, {Phase: run.PhaseApply, Worker: apply}}, apply, first},
		"unrecorded apply":     {[]run.Attempt{{Phase: run.PhasePlan, Worker: first}, {Phase: run.PhaseApply}}, first, first},
		"apply only recorded":  {[]run.Attempt{{Phase: run.PhasePlan}, {Phase: run.PhaseApply, Worker: apply}}, apply, nil},
		"old plan, new unread": {[]run.Attempt{{Phase: run.PhasePlan, Worker: first}, {Phase: run.PhasePlan}}, first, first},
	} {
		latest, plan := run.RecordedWorkers(tc.attempts)
		if latest != tc.latest || plan != tc.plan {
			t.Errorf("%s: latest %v plan %v, want %v %v", name, latest, plan, tc.latest, tc.plan)
		}
	}
}
