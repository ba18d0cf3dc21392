package site

import (
	"strings"
	"testing"
)

// TestEndedForOnlyTerminalRuns: the reason panel belongs to runs that
// ended; a run in recovery carries its apply's reason (worker_lost) but
// has not ended, and an applied run has nothing to explain.
func TestEndedForOnlyTerminalRuns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status, reason string
		want           bool
	}{
		{"recovery_required", "worker_lost", false},
		{"recovery_required", "apply_canceled", false},
		{"applying", "worker_lost", false},
		{"errored", "plan_failed", true},
		{"expired", "approval_deadline_passed", true},
		{"plan_credentials_required", "credential_version_disabled", true},
		{"applied", "", false},
		{"errored", "", false},
	} {
		var r runReview
		r.Status = c.status
		if c.reason != "" {
			r.TerminalReason = &c.reason
		}
		if got := endedFor(r); got != c.want {
			t.Errorf("endedFor(%s, %q) = %v, want %v", c.status, c.reason, got, c.want)
		}
	}
}

// TestFailedReadsRenderUnavailable: a read that failed says so where its
// content would be (outputs, the final log tail, downloads, invitations,
// source inventories) rather than rendering as if there were nothing.
func TestFailedReadsRenderUnavailable(t *testing.T) {
	t.Parallel()
	reason := "apply_failed"
	var review runReview
	review.ID, review.Status, review.Kind, review.TerminalReason = "run_1", "errored", "plan_and_apply", &reason
	run := renderPage(t, "run.html", runPage{Run: review, Stages: stagesOf(review), Reason: "The apply failed without changing state.",
		FailedPhase: "apply", FinalLogUnavailable: true, State: &stateVersion{ID: "sv_1", Serial: 2}, OutputsUnavailable: true,
		Downloads: &downloads{Unavailable: true}, Author: "Ada"})
	for _, want := range []string{`id="final-log-unavailable"`, "apply log are unavailable", `id="outputs-unavailable"`,
		`id="downloads-unavailable"`, `id="run-author"`, ">Ada<"} {
		if !strings.Contains(run, want) {
			t.Errorf("run page lacks %s", want)
		}
	}
	welcome := renderPage(t, "welcome.html", welcomePage{Step: "organization", InvitationsUnavailable: true})
	if !strings.Contains(welcome, `id="invitations-unavailable"`) {
		t.Error("welcome page hides that its invitations failed to load")
	}

	// An inventory that failed keeps an admin's form disabled and names
	// itself; a current credential version no longer selectable stays
	// shown by its exact ID.
	source := renderPage(t, "source.html", sourcePage{CanSave: true, CanInstall: true, Unavailable: []string{"credential profiles"}})
	if !strings.Contains(source, `id="source-fields" disabled`) || !strings.Contains(source, "Unavailable: credential profiles") {
		t.Error("a failed inventory leaves the source form enabled or unexplained")
	}
	loaded := renderPage(t, "source.html", sourcePage{CanSave: true, Loaded: true, SourceLoaded: true, Unselectable: "cpv_gone123"})
	if strings.Contains(loaded, `id="source-fields" disabled`) {
		t.Error("an admin's loaded source form is disabled")
	}
	if !strings.Contains(loaded, `<option value="cpv_gone123" selected>cpv_gone123 (no longer selectable)</option>`) ||
		!strings.Contains(loaded, "<code>cpv_gone123</code>") {
		t.Error("the unselectable current credential version is not shown by its ID")
	}
}
