package run

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/platform/id"
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
		untrusted  bool
	}{
		{KindPlanAndApply, true, false, PolicyPass, StatusAwaitingApproval, "", false},
		{KindPlanAndApply, false, false, PolicyPass, StatusPlannedAndFinished, "no_changes", false},
		{KindPlanOnly, true, false, PolicyPass, StatusPlannedAndFinished, "", false},
		{KindSpeculative, true, false, PolicyPass, StatusPlannedAndFinished, "", false},
		{KindPlanAndApply, true, false, PolicyAdvisoryFailed, StatusAwaitingApproval, "", false},
		{KindPlanAndApply, true, false, PolicySoftFailed, StatusPolicyOverride, "", false},
		{KindPlanAndApply, false, false, PolicySoftFailed, StatusPolicySoftFailed, "policy_soft_failed", false},
		{KindPlanOnly, true, false, PolicySoftFailed, StatusPolicySoftFailed, "policy_soft_failed", false},
		{KindPlanAndApply, true, false, PolicyHardFailed, StatusErrored, "policy_hard_failed", false},
		{KindPlanAndApply, true, false, PolicyError, StatusErrored, "policy_error", false},
		{KindSpeculative, false, false, PolicyError, StatusErrored, "policy_error", false},
		// allow-empty-apply: an empty plan still goes on to approval (and
		// to overrides when soft failed), as one with changes does.
		{KindPlanAndApply, false, true, PolicyPass, StatusAwaitingApproval, "", false},
		{KindPlanAndApply, false, true, PolicyAdvisoryFailed, StatusAwaitingApproval, "", false},
		{KindPlanAndApply, false, true, PolicySoftFailed, StatusPolicyOverride, "", false},
		{KindPlanAndApply, true, true, PolicyPass, StatusAwaitingApproval, "", false},
		// It never opens a gate that blocks, nor makes a plan-only run apply.
		{KindPlanAndApply, false, true, PolicyHardFailed, StatusErrored, "policy_hard_failed", false},
		{KindPlanAndApply, false, true, PolicyError, StatusErrored, "policy_error", false},
		{KindPlanOnly, false, true, PolicyPass, StatusPlannedAndFinished, "", false},
		{KindSpeculative, false, true, PolicySoftFailed, StatusPolicySoftFailed, "policy_soft_failed", false},
		// An untrusted plan (made without the workspace's state and
		// secrets) never waits for an approval or an override, whatever it
		// planned: it ends.
		{KindPlanAndApply, true, false, PolicyPass, StatusPlannedAndFinished, TerminalCredentialsWithheld, true},
		{KindPlanAndApply, false, true, PolicyPass, StatusPlannedAndFinished, TerminalCredentialsWithheld, true},
		{KindPlanAndApply, false, false, PolicyPass, StatusPlannedAndFinished, TerminalCredentialsWithheld, true},
		{KindPlanAndApply, true, false, PolicyAdvisoryFailed, StatusPlannedAndFinished, TerminalCredentialsWithheld, true},
		{KindPlanAndApply, true, false, PolicySoftFailed, StatusPolicySoftFailed, "policy_soft_failed", true},
		{KindPlanAndApply, true, false, PolicyHardFailed, StatusErrored, "policy_hard_failed", true},
		{KindPlanOnly, true, false, PolicyPass, StatusPlannedAndFinished, "", true},
		{KindSpeculative, true, false, PolicyPass, StatusPlannedAndFinished, "", true},
	} {
		got, reason := AfterPolicy(PlanResult{Kind: tc.kind, HasChanges: tc.changes, AllowEmptyApply: tc.allowEmpty,
			Untrusted: tc.untrusted, Outcome: tc.outcome})
		if got != tc.want || reason != tc.wantReason {
			t.Errorf("AfterPolicy(%s, changes %v, allow empty %v, untrusted %v, %s) = %s %q, want %s %q", tc.kind, tc.changes,
				tc.allowEmpty, tc.untrusted, tc.outcome, got, reason, tc.want, tc.wantReason)
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
	// A member reaches workspaces through its teams: write on ws_write,
	// plan on ws_plan.
	teamMember := access.Principal{Permissions: access.PermissionsOf(access.RoleMember)}
	for id, level := range map[string]string{"ws_write": access.LevelWrite, "ws_plan": access.LevelPlan} {
		grant, _ := access.WorkspaceLevel(level)
		teamMember.Grants.AddWorkspace(id, grant)
	}
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
		{"a team's write grant approves there", Run{WorkspaceID: "ws_write", Status: StatusAwaitingApproval, PolicyOutcome: &pass, PolicyGateUntil: &open},
			teamMember, []string{ActionApprove, ActionReject, ActionCancel}},
		{"a team's plan grant does not approve", Run{WorkspaceID: "ws_plan", Status: StatusAwaitingApproval, PolicyOutcome: &pass, PolicyGateUntil: &open},
			teamMember, []string{}},
	} {
		if got := AvailableActions(tc.run, nil, tc.p, now); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestForceExecutable: a pending run may start at once only while another
// run holds the queue and every run ahead can be discarded; what stands
// ahead is the earlier unfinished runs and a holder created later.
func TestForceExecutable(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(id string, minute int, st Status) Run {
		return Run{ID: id, Kind: KindPlanAndApply, Status: st, CreatedAt: t0.Add(time.Duration(minute) * time.Minute)}
	}
	speculative := func(r Run) Run { r.Kind = KindSpeculative; return r }
	saved := func(r Run) Run { r.SavePlan = true; return r }
	target := at("run_t", 10, StatusPending)
	for _, tc := range []struct {
		name      string
		target    Run
		queue     []Run
		wantAhead []string
		want      error
	}{
		{"held by a plan awaiting approval", target, []Run{at("run_a", 1, StatusAwaitingApproval), target}, []string{"run_a"}, nil},
		{"held by a soft failure waiting for an override", target, []Run{at("run_a", 1, StatusPolicyOverride), target}, []string{"run_a"}, nil},
		{"earlier pending runs go too", target,
			[]Run{at("run_a", 1, StatusAwaitingApproval), at("run_b", 2, StatusPending), target, at("run_c", 11, StatusPending)},
			[]string{"run_a", "run_b"}, nil},
		{"same instant: the smaller ID is ahead", target,
			[]Run{at("run_a", 1, StatusAwaitingApproval), at("run_s", 10, StatusPending), target, at("run_u", 10, StatusPending)},
			[]string{"run_a", "run_s"}, nil},
		{"a holder created later is ahead too", target, []Run{target, at("run_l", 12, StatusAwaitingApproval)}, []string{"run_l"}, nil},
		{"planning cannot be skipped", target, []Run{at("run_a", 1, StatusPlanning), target}, []string{"run_a"}, ErrQueueNotDiscardable},
		{"a queued plan cannot be skipped", target, []Run{at("run_a", 1, StatusPlanQueued), target}, []string{"run_a"}, ErrQueueNotDiscardable},
		{"applying cannot be skipped", target, []Run{at("run_a", 1, StatusApplying), target}, []string{"run_a"}, ErrQueueNotDiscardable},
		{"an approved apply cannot be skipped", target, []Run{at("run_a", 1, StatusApplyQueued), target}, []string{"run_a"}, ErrQueueNotDiscardable},
		{"recovery cannot be skipped", target, []Run{at("run_a", 1, StatusRecoveryRequired), target}, []string{"run_a"}, ErrQueueNotDiscardable},
		{"a blocked holder behind discardable runs", target,
			[]Run{at("run_a", 1, StatusApplying), at("run_b", 2, StatusPending), target}, []string{"run_a", "run_b"}, ErrQueueNotDiscardable},
		{"nothing holds the queue", target, []Run{at("run_b", 2, StatusPending), target}, []string{"run_b"}, ErrActionNotAllowed},
		{"alone", target, []Run{target}, nil, ErrActionNotAllowed},
		{"speculative runs never hold the queue", target,
			[]Run{speculative(at("run_p", 1, StatusPlanning)), target}, nil, ErrActionNotAllowed},
		{"a saved plan waiting for its apply holds nothing", target,
			[]Run{saved(at("run_p", 1, StatusPlanning)), at("run_a", 2, StatusAwaitingApproval), target}, []string{"run_a"}, nil},
		{"an approved saved plan holds the queue", target,
			[]Run{saved(at("run_p", 1, StatusApplyQueued)), target}, []string{"run_p"}, ErrQueueNotDiscardable},
		{"finished runs are not ahead", target, []Run{at("run_a", 1, StatusApplied), target}, nil, ErrActionNotAllowed},
		{"a target that is not pending", at("run_t", 10, StatusPlanQueued),
			[]Run{at("run_a", 1, StatusAwaitingApproval), at("run_t", 10, StatusPlanQueued)}, []string{"run_a"}, ErrActionNotAllowed},
		{"a speculative target", speculative(target), []Run{at("run_a", 1, StatusAwaitingApproval)}, []string{"run_a"}, ErrActionNotAllowed},
	} {
		ahead := Ahead(tc.target, tc.queue)
		var ids []string
		for _, r := range ahead {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, tc.wantAhead) {
			t.Errorf("%s: ahead %v, want %v", tc.name, ids, tc.wantAhead)
		}
		if got := ForceExecutable(tc.target, ahead); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestForceExecuteAction: force_execute is offered for a force-executable
// run to a principal who may both discard and create runs.
func TestForceExecuteAction(t *testing.T) {
	t.Parallel()
	now := time.Now()
	pending := Run{ID: "run_t", WorkspaceID: "ws_t", ProjectID: "prj_t", Kind: KindPlanAndApply, Status: StatusPending, CreatedAt: now}
	ahead := []Run{{ID: "run_a", Kind: KindPlanAndApply, Status: StatusAwaitingApproval, CreatedAt: now.Add(-time.Minute)}}
	writer := access.Principal{Permissions: access.PermissionsOf(access.RoleWriter)}
	// A member whose team writes the run's workspace may do what a
	// writer may there; one whose team plans there, or writes another
	// workspace, may not.
	teamMember := func(workspaceID, level string) access.Principal {
		p := access.Principal{Permissions: access.PermissionsOf(access.RoleMember)}
		grant, err := access.WorkspaceLevel(level)
		if err != nil {
			t.Fatal(err)
		}
		p.Grants.AddWorkspace(workspaceID, grant)
		return p
	}
	discardOnly := access.Principal{Permissions: access.NewPermissionSet(access.PermRunApprove, access.PermRunCancel)}
	createOnly := access.Principal{Permissions: access.NewPermissionSet(access.PermRunCreate, access.PermRunCancel)}
	for _, tc := range []struct {
		name  string
		p     access.Principal
		ahead []Run
		want  []string
	}{
		{"writer behind a waiting plan", writer, ahead, []string{ActionCancel, ActionForceExecute}},
		{"writer with nothing ahead", writer, nil, []string{ActionCancel}},
		{"without run:create", discardOnly, ahead, []string{ActionCancel}},
		{"without run:approve", createOnly, ahead, []string{ActionCancel}},
		{"member whose team writes the workspace", teamMember("ws_t", access.LevelWrite), ahead, []string{ActionCancel, ActionForceExecute}},
		{"member whose team plans in the workspace", teamMember("ws_t", access.LevelPlan), ahead, []string{}},
		{"member whose team writes another workspace", teamMember("ws_other", access.LevelWrite), ahead, []string{}},
	} {
		if got := AvailableActions(pending, tc.ahead, tc.p, now); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if !ForceExecutePermitted(writer, pending) || ForceExecutePermitted(discardOnly, pending) || ForceExecutePermitted(createOnly, pending) {
		t.Error("ForceExecutePermitted does not need exactly run:approve and run:create")
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

// TestArtifactKindsAreInTheKeyGrammar: an artifact kind the blob key
// grammar does not know would leave its orphaned objects to no sweep.
func TestArtifactKindsAreInTheKeyGrammar(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{ArtifactPlanFile, ArtifactPlanJSON, ArtifactPlanDiff, ArtifactEmergencyState} {
		if key := blobkey.RunArtifact(id.New("org"), id.New("run"), kind); !blobkey.Recognised(key) {
			t.Errorf("artifact kind %s: key %q is not recognised", kind, key)
		}
	}
}

// TestCancelable (SPEC §3 Run, "non-terminal run → cancel → canceled"):
// every waiting or working status takes a cancel; a run in recovery does
// not, because only a recover with both recovery permissions and a fresh
// step-up may end it (SPEC §3 recovery row, §5 rule 6), and an ended run
// does not. A cancel of a running apply is taken too, and ends in
// recovery (TestCanceledApplyKeepsItsEvidence): tofu was interrupted
// mid-change, the outcome the spec's apply rows never let Cairn guess.
func TestCancelable(t *testing.T) {
	t.Parallel()
	for s, want := range map[Status]bool{
		StatusPending: true, StatusPlanQueued: true, StatusPlanning: true, StatusAwaitingApproval: true,
		StatusPolicyOverride: true, StatusApplyQueued: true, StatusApplying: true,
		StatusRecoveryRequired: false,
		StatusApplied:          false, StatusPlannedAndFinished: false, StatusErrored: false, StatusRejected: false,
		StatusCanceled: false, StatusExpired: false, StatusRecovered: false, StatusCredentialsRequired: false,
		StatusPolicySoftFailed: false,
	} {
		if got := Cancelable(s); got != want {
			t.Errorf("Cancelable(%s) = %v, want %v", s, got, want)
		}
	}
}
