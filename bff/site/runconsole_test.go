package site

import (
	"strings"
	"testing"
	"time"
)

// TestEveryStageThatRanHasAConsole: plan, policy and apply carry their log
// phase unless skipped, and the approval stage lists its events from the
// review in time order, naming the decider or, failing that, the actor ID,
// and the overridden policy by name.
func TestEveryStageThatRanHasAConsole(t *testing.T) {
	t.Parallel()
	soft := "soft_failed"
	yes := true
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r := runReview{runSummary: runSummary{ID: "run_1", Kind: "plan_and_apply", Status: "rejected", StatusTimestamps: map[string]time.Time{
		"planning": base, "policy_override": base.Add(time.Minute), "awaiting_approval": base.Add(3 * time.Minute)}}}
	r.Plan.Status, r.Apply.Status, r.Policy.Outcome, r.Policy.Status, r.Plan.HasChanges = "finished", "pending", &soft, "overridden", &yes
	r.Policy.Attachments = []policyResult{{ID: "polr_1", PolicySetName: "require-tags", VersionNumber: 2}}
	deadline := base.Add(7 * 24 * time.Hour)
	r.ApprovalDeadline = &deadline
	r.Overrides.Records = []overrideRecord{{PolicyResultID: "polr_1", Justification: "tags land next week", ActorKind: "user", ActorID: "usr_9",
		CreatedAt: base.Add(2 * time.Minute), ExpiresAt: base.Add(time.Hour)}}
	reason := "superseded"
	r.Decision = &struct {
		Action    string    `json:"action"`
		ActorID   string    `json:"actor_id"`
		ActorName *string   `json:"actor_name"`
		DecidedAt time.Time `json:"decided_at"`
		Reason    *string   `json:"reason"`
	}{Action: "rejected", ActorID: "usr_7", DecidedAt: base.Add(4 * time.Minute), Reason: &reason}

	stages := stagesOf(r)
	for _, s := range stages {
		want := map[string]string{"Plan": "plan", "Policy": "policy"}[s.Name]
		if s.Phase != want {
			t.Errorf("%s stage (%s) has console phase %q, want %q", s.Name, s.State, s.Phase, want)
		}
	}
	var lines []string
	for _, e := range r.ApprovalEvents() {
		lines = append(lines, e.At.Format("15:04")+" "+e.Text+"|"+e.Actor+"|"+e.Then+"|"+e.Note)
	}
	want := []string{
		"12:01 Waiting for policy overrides: a soft-mandatory policy failed, and approval needs each failure overridden first.|||",
		"12:02 Soft failure of require-tags v2 overridden|user usr_9|until 2026-11-29 13:00 UTC|tags land next week",
		"12:03 Waiting for approval until 2026-12-06 12:00 UTC; the run expires undecided after that.|||",
		"12:04 Discarded|usr_7||superseded",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("approval events:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	// A run that ended before its policy stage has no policy console.
	r.Status, r.Plan.Status, r.Policy.Outcome, r.Decision = "errored", "errored", nil, nil
	if s := stagesOf(r)[1]; s.State != "skipped" || s.Phase != "" {
		t.Errorf("policy stage of a failed plan: %s with console %q", s.State, s.Phase)
	}
	// Expiry while waiting is the approval's last event.
	r.Status = "expired"
	r.StatusTimestamps["expired"] = deadline
	events := r.ApprovalEvents()
	if last := events[len(events)-1]; !last.At.Equal(deadline) || !strings.Contains(last.Text, "expired") {
		t.Errorf("an expired run's last approval event: %+v", last)
	}
}
