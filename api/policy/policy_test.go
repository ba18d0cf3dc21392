package policy

import (
	"testing"
	"time"
)

func TestComposeTakesTheStrongestOutcome(t *testing.T) {
	t.Parallel()
	res := func(status, mode string) Result { return Result{Status: status, EnforcementMode: mode} }
	for _, tc := range []struct {
		name    string
		results []Result
		config  bool
		want    string
	}{
		{"nothing attached", nil, false, OutcomePass},
		{"all pass", []Result{res(ResultPassed, ModeHardMandatory), res(ResultPassed, ModeSoftMandatory)}, false, OutcomePass},
		{"advisory findings continue", []Result{res(ResultFailed, ModeAdvisory)}, false, OutcomeAdvisoryFailed},
		{"soft beats advisory", []Result{res(ResultFailed, ModeAdvisory), res(ResultFailed, ModeSoftMandatory)}, false, OutcomeSoftFailed},
		{"hard beats soft", []Result{res(ResultFailed, ModeSoftMandatory), res(ResultFailed, ModeHardMandatory)}, false, OutcomeHardFailed},
		{"an advisory error still blocks", []Result{res(ResultError, ModeAdvisory), res(ResultFailed, ModeHardMandatory)}, false, OutcomeError},
		{"a configuration error blocks", nil, true, OutcomeError},
	} {
		if got := Compose(tc.results, tc.config); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestGateUntilNeedsAValidOverrideForEverySoftFailure(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	plan := []byte("plan")
	a := Result{ID: "a", Status: ResultFailed, EnforcementMode: ModeSoftMandatory, PolicyVersionID: "v1", ResultDigest: []byte("da")}
	b := Result{ID: "b", Status: ResultFailed, EnforcementMode: ModeSoftMandatory, PolicyVersionID: "v2", ResultDigest: []byte("db")}
	advisory := Result{ID: "c", Status: ResultFailed, EnforcementMode: ModeAdvisory, ResultDigest: []byte("dc")}
	over := func(r Result, expires time.Duration) Override {
		return Override{PolicyResultID: r.ID, PolicyResultDigest: r.ResultDigest, PolicyVersionID: r.PolicyVersionID,
			PlanDigest: plan, ExpiresAt: now.Add(expires)}
	}
	stale := over(a, time.Hour)
	stale.PolicyResultDigest = []byte("older")
	otherPlan := over(b, time.Hour)
	otherPlan.PlanDigest = []byte("other plan")
	for _, tc := range []struct {
		name      string
		overrides []Override
		want      *time.Duration
	}{
		{"none", nil, nil},
		{"one of two", []Override{over(a, time.Hour)}, nil},
		{"both: the first expiry closes it", []Override{over(a, time.Hour), over(b, 10*time.Minute)}, ptr(10 * time.Minute)},
		{"the longest override per result counts", []Override{over(a, time.Minute), over(a, 2*time.Hour), over(b, time.Hour)}, ptr(time.Hour)},
		{"expired", []Override{over(a, -time.Second), over(b, time.Hour)}, nil},
		{"digest no longer matches", []Override{stale, over(b, time.Hour)}, nil},
		{"bound to another plan", []Override{over(a, time.Hour), otherPlan}, nil},
	} {
		got := GateUntil([]Result{a, b, advisory}, tc.overrides, plan, now)
		switch {
		case tc.want == nil && got != nil:
			t.Errorf("%s: gate open until %s, want closed", tc.name, got)
		case tc.want != nil && (got == nil || !got.Equal(now.Add(*tc.want))):
			t.Errorf("%s: gate until %v, want %s", tc.name, got, now.Add(*tc.want))
		}
	}
}

func TestBackoffDoublesFromFiveSecondsToFiveMinutes(t *testing.T) {
	t.Parallel()
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		if got := Backoff(i + 1); got != w {
			t.Errorf("Backoff(%d) = %s, want %s", i+1, got, w)
		}
	}
}

func ptr(d time.Duration) *time.Duration { return &d }
