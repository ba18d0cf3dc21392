package run

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/policy"
)

func TestAfterPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind       Kind
		changes    bool
		allowEmpty bool
		outcome    string
		want       Status
		wantReason string
	}{
		{KindPlanAndApply, true, false, PolicyPass, StatusAwaitingApproval, ""},
		{KindPlanAndApply, false, false, PolicyPass, StatusPlannedAndFinished, "no_changes"},
		{KindPlanOnly, true, false, PolicyPass, StatusPlannedAndFinished, ""},
		{KindSpeculative, true, false, PolicyPass, StatusPlannedAndFinished, ""},
		{KindPlanAndApply, true, false, PolicyAdvisoryFailed, StatusAwaitingApproval, ""},
		{KindPlanAndApply, true, false, PolicySoftFailed, StatusPolicyOverride, ""},
		{KindPlanAndApply, false, false, PolicySoftFailed, StatusPolicySoftFailed, "policy_soft_failed"},
		{KindPlanOnly, true, false, PolicySoftFailed, StatusPolicySoftFailed, "policy_soft_failed"},
		{KindPlanAndApply, true, false, PolicyHardFailed, StatusErrored, "policy_hard_failed"},
		{KindPlanAndApply, true, false, PolicyError, StatusErrored, "policy_error"},
		{KindSpeculative, false, false, PolicyError, StatusErrored, "policy_error"},
		// allow-empty-apply: an empty plan still goes on to approval (and
		// to overrides when soft failed), as one with changes does.
		{KindPlanAndApply, false, true, PolicyPass, StatusAwaitingApproval, ""},
		{KindPlanAndApply, false, true, PolicyAdvisoryFailed, StatusAwaitingApproval, ""},
		{KindPlanAndApply, false, true, PolicySoftFailed, StatusPolicyOverride, ""},
		{KindPlanAndApply, true, true, PolicyPass, StatusAwaitingApproval, ""},
		// It never opens a gate that blocks, nor makes a plan-only run apply.
		{KindPlanAndApply, false, true, PolicyHardFailed, StatusErrored, "policy_hard_failed"},
		{KindPlanAndApply, false, true, PolicyError, StatusErrored, "policy_error"},
		{KindPlanOnly, false, true, PolicyPass, StatusPlannedAndFinished, ""},
		{KindSpeculative, false, true, PolicySoftFailed, StatusPolicySoftFailed, "policy_soft_failed"},
	} {
		got, reason := AfterPolicy(PlanResult{Kind: tc.kind, HasChanges: tc.changes, AllowEmptyApply: tc.allowEmpty, Outcome: tc.outcome})
		if got != tc.want || reason != tc.wantReason {
			t.Errorf("AfterPolicy(%s, changes %v, allow empty %v, %s) = %s %q, want %s %q", tc.kind, tc.changes, tc.allowEmpty,
				tc.outcome, got, reason, tc.want, tc.wantReason)
		}
	}
}

func TestBindingMatchesOnlyTheExactReview(t *testing.T) {
	t.Parallel()
	prev := "sv_one"
	r := Run{PlanDigest: Digest([]byte("plan")), PolicyResultDigest: Digest([]byte("policy")),
		DependencyLockDigest: Digest(nil), PredecessorStateVersionID: &prev}
	exact := BindingOf(r)
	if !exact.Matches(r) {
		t.Fatal("the run's own binding does not match")
	}
	other := "sv_two"
	for name, mutate := range map[string]func(b *Binding){
		"plan":        func(b *Binding) { b.PlanDigest = HexDigest(Digest([]byte("other"))) },
		"policy":      func(b *Binding) { b.PolicyResultDigest = HexDigest(Digest([]byte("other"))) },
		"lock":        func(b *Binding) { b.DependencyLockDigest = HexDigest(Digest([]byte("lock"))) },
		"predecessor": func(b *Binding) { b.PredecessorStateVersionID = &other },
		"no state":    func(b *Binding) { b.PredecessorStateVersionID = nil },
	} {
		b := BindingOf(r)
		mutate(&b)
		if b.Matches(r) {
			t.Errorf("a binding with another %s matches", name)
		}
	}
	if (Binding{}).Matches(Run{}) {
		t.Error("an unplanned run matches an empty binding")
	}
}

func TestAvailableActions(t *testing.T) {
	t.Parallel()
	pass, failed, soft := PolicyPass, PolicyError, PolicySoftFailed
	now := time.Now()
	open, expired := policy.GateAlwaysOpen, now.Add(-time.Second)
	writer := access.Principal{Permissions: access.PermissionsOf(access.RoleWriter)}
	admin := access.Principal{Permissions: access.PermissionsOf(access.RoleAdmin)}
	reader := access.Principal{Permissions: access.PermissionsOf(access.RoleReader)}
	for _, tc := range []struct {
		name string
		run  Run
		p    access.Principal
		want []string
	}{
		{"awaiting, policy passed", Run{Status: StatusAwaitingApproval, PolicyOutcome: &pass, PolicyGateUntil: &open}, writer, []string{ActionApprove, ActionReject, ActionCancel}},
		{"closed gate offers rejection only", Run{Status: StatusAwaitingApproval, PolicyOutcome: &failed}, writer, []string{ActionReject, ActionCancel}},
		{"reader", Run{Status: StatusAwaitingApproval, PolicyOutcome: &pass, PolicyGateUntil: &open}, reader, []string{}},
		{"soft failure waits for an override", Run{Status: StatusPolicyOverride, PolicyOutcome: &soft}, admin, []string{ActionReject, ActionOverridePolicy, ActionCancel}},
		{"writers cannot override", Run{Status: StatusPolicyOverride, PolicyOutcome: &soft}, writer, []string{ActionReject, ActionCancel}},
		{"an expired override closes the gate again", Run{Status: StatusAwaitingApproval, PolicyOutcome: &soft, PolicyGateUntil: &expired}, admin, []string{ActionReject, ActionOverridePolicy, ActionCancel}},
		{"planning", Run{Status: StatusPlanning}, writer, []string{ActionCancel}},
		{"applied", Run{Status: StatusApplied}, admin, []string{}},
		{"recovery needs both permissions", Run{Status: StatusRecoveryRequired}, writer, []string{}},
		{"recovery", Run{Status: StatusRecoveryRequired}, admin, []string{ActionRecover}},
	} {
		if got := AvailableActions(tc.run, tc.p, now); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMaskerHidesEverySpellingOfASecret(t *testing.T) {
	t.Parallel()
	// A short secret is masked too, and so are the base64 and URL-encoded
	// spellings of each.
	m := masker(maskedForms([]string{"s3cr3t\"quote", "ab", "s3cr3t", "a/b+c"}))
	out := m.Replace(`a s3cr3t"quote b "s3cr3t\"quote" c s3cr3t ab czNjcjN0 a%2Fb%2Bc a%2Fb+c YS9iK2M YS9iK2M x`)
	if want := `a (sensitive value) b "(sensitive value)" c (sensitive value) (sensitive value) (sensitive value) ` +
		`(sensitive value) (sensitive value) (sensitive value) (sensitive value) x`; out != want {
		t.Fatalf("masked %q, want %q", out, want)
	}
}

func TestLogQueryBounds(t *testing.T) {
	t.Parallel()
	for _, q := range []LogQuery{{Tail: 5, After: 1}, {Tail: 5, Limit: 2}, {Tail: 101}, {Limit: 101}, {After: -1}} {
		if q.Validate() == nil {
			t.Errorf("%+v accepted", q)
		}
	}
	for _, q := range []LogQuery{{}, {Tail: 100}, {After: 10, Limit: 100}} {
		if err := q.Validate(); err != nil {
			t.Errorf("%+v refused: %v", q, err)
		}
	}
}

// TestLogSinkKeepsABoundedPhaseLog writes more output than a phase may
// keep, as a command printing without end would: what waits to be stored
// stays within MaxPhaseLogBytes, ends on a complete line and a notice, and
// the runner's own lines still get through.
func TestLogSinkKeepsABoundedPhaseLog(t *testing.T) {
	t.Parallel()
	l := &LogSink{buf: newLogBuffer([]string{"hunter2-secret"}), budget: MaxPhaseLogBytes}
	line := []byte(strings.Repeat("y", 99) + "\n")
	chunk := bytes.Repeat(line, 10_000)
	for range (MaxPhaseLogBytes + 8<<20) / len(chunk) {
		if n, err := l.Write(chunk); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	_, _ = l.Write([]byte("a secret cut in two: hunter2-sec"))
	l.Line("The apply was interrupted (%s).", "canceled")
	got := l.buf.pending.String() + l.buf.partial.String()
	if len(got) > MaxPhaseLogBytes+1024 {
		t.Fatalf("the sink holds %d bytes, over %d", len(got), MaxPhaseLogBytes)
	}
	if !strings.Contains(got, "the rest of it is not kept") || !strings.HasSuffix(got, "The apply was interrupted (canceled).\n") {
		t.Fatalf("the log ends %q", got[max(0, len(got)-300):])
	}
	if strings.Contains(got, "hunter2") {
		t.Fatal("a cut secret reached the log")
	}
}

func TestLogBufferMasksASecretSpanningLinesWrittenLineByLine(t *testing.T) {
	t.Parallel()
	key := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
	b := newLogBuffer([]string{key})
	var stored strings.Builder
	for _, line := range strings.SplitAfter("key = "+key+"\ndone\n", "\n") {
		b.write([]byte(line))
		stored.WriteString(b.take(false))
	}
	stored.WriteString(b.take(true))
	if got := stored.String(); strings.Contains(got, "MIIEvQ") || got != "key = "+redacted+"\ndone\n" {
		t.Fatalf("stored %q", got)
	}
}

func TestForceCancelNeedsACancelAndItsCoolOff(t *testing.T) {
	t.Parallel()
	canceled, approved := DecisionCanceled, DecisionApproved
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	before, after := at.Add(ForceCancelCoolOff-time.Second), at.Add(ForceCancelCoolOff)
	forced := after
	for _, tc := range []struct {
		name string
		run  Run
		now  time.Time
		want bool
	}{
		{"no cancel", Run{Status: StatusApplying}, after, false},
		{"another decision", Run{Status: StatusApplying, DecisionAction: &approved, DecidedAt: &at}, after, false},
		{"within the cool-off", Run{Status: StatusApplying, DecisionAction: &canceled, DecidedAt: &at}, before, false},
		{"after the cool-off", Run{Status: StatusApplying, DecisionAction: &canceled, DecidedAt: &at}, after, true},
		{"already ended", Run{Status: StatusCanceled, DecisionAction: &canceled, DecidedAt: &at}, after, false},
		{"already forced", Run{Status: StatusApplying, DecisionAction: &canceled, DecidedAt: &at, ForceCanceledAt: &forced}, after, false},
	} {
		if got := tc.run.ForceCancelable(tc.now); got != tc.want {
			t.Errorf("%s: ForceCancelable = %v, want %v", tc.name, got, tc.want)
		}
	}
	r := Run{DecisionAction: &canceled, DecidedAt: &at}
	if got := r.ForceCancelAvailableAt(); got == nil || !got.Equal(after) {
		t.Fatalf("ForceCancelAvailableAt = %v, want %v", got, after)
	}
}
