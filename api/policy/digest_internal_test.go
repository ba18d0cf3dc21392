package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"testing"

	"github.com/cairnhq/cairn/api/policy/rego"
)

func sum(s string) []byte {
	b := sha256.Sum256([]byte(s))
	return b[:]
}

// TestResultDigestBindsTheEvaluation (SPEC §4 "Every evaluation binds"):
// a result's digest changes with each thing its evaluation ran with: the
// plan, the input, the snapshotted attachment, set, version and bundle,
// the engine, the capabilities manifest and its digest, the entrypoint,
// and what came out. The evaluator's binding is this build's engine,
// manifest and entrypoint.
func TestResultDigestBindsTheEvaluation(t *testing.T) {
	t.Parallel()
	engine := currentEngine()
	capabilities, err := rego.CapabilitiesDigest()
	if err != nil {
		t.Fatal(err)
	}
	if engine.EngineVersion != rego.EngineVersion || engine.CapabilitiesID != rego.CapabilitiesID ||
		engine.CapabilitiesSHA256 != capabilities || engine.Entrypoint != rego.Entrypoint || capabilities == "" {
		t.Fatalf("the evaluator's binding is %+v", engine)
	}
	facts := RunFacts{RunID: "run_1", PlanDigest: sum("plan")}
	entry := SnapshotEntry{AttachmentID: "pol_att", PolicySetID: "pol_set", PolicyVersionID: "pol_ver", Scope: ScopeWorkspace,
		EnforcementMode: ModeSoftMandatory, BundleSHA256: sum("bundle")}
	result := Result{Status: ResultFailed, InputDigest: sum("input"), Findings: json.RawMessage(`[{"id":"f"}]`)}
	base := boundResultDigest(engine, facts, entry, result)
	if !bytes.Equal(base, resultDigest(facts, entry, result)) {
		t.Fatal("resultDigest does not use the evaluator's binding")
	}
	if !bytes.Equal(base, boundResultDigest(engine, facts, entry, result)) {
		t.Fatal("the result digest is not deterministic")
	}
	code := "policy_timeout"
	for name, change := range map[string]func(*engineBinding, *RunFacts, *SnapshotEntry, *Result){
		"plan":       func(_ *engineBinding, f *RunFacts, _ *SnapshotEntry, _ *Result) { f.PlanDigest = sum("other plan") },
		"run":        func(_ *engineBinding, f *RunFacts, _ *SnapshotEntry, _ *Result) { f.RunID = "run_2" },
		"input":      func(_ *engineBinding, _ *RunFacts, _ *SnapshotEntry, r *Result) { r.InputDigest = sum("other input") },
		"bundle":     func(_ *engineBinding, _ *RunFacts, e *SnapshotEntry, _ *Result) { e.BundleSHA256 = sum("other bundle") },
		"attachment": func(_ *engineBinding, _ *RunFacts, e *SnapshotEntry, _ *Result) { e.AttachmentID = "pol_att2" },
		"set":        func(_ *engineBinding, _ *RunFacts, e *SnapshotEntry, _ *Result) { e.PolicySetID = "pol_set2" },
		"version":    func(_ *engineBinding, _ *RunFacts, e *SnapshotEntry, _ *Result) { e.PolicyVersionID = "pol_ver2" },
		"scope":      func(_ *engineBinding, _ *RunFacts, e *SnapshotEntry, _ *Result) { e.Scope = ScopeProject },
		"enforcement mode": func(_ *engineBinding, _ *RunFacts, e *SnapshotEntry, _ *Result) {
			e.EnforcementMode = ModeHardMandatory
		},
		"engine version": func(b *engineBinding, _ *RunFacts, _ *SnapshotEntry, _ *Result) { b.EngineVersion = "1.0.0" },
		"capabilities": func(b *engineBinding, _ *RunFacts, _ *SnapshotEntry, _ *Result) {
			b.CapabilitiesID = "other-capabilities"
		},
		"capabilities digest": func(b *engineBinding, _ *RunFacts, _ *SnapshotEntry, _ *Result) { b.CapabilitiesSHA256 = "00" },
		"entrypoint":          func(b *engineBinding, _ *RunFacts, _ *SnapshotEntry, _ *Result) { b.Entrypoint = "data.other.decision" },
		"status":              func(_ *engineBinding, _ *RunFacts, _ *SnapshotEntry, r *Result) { r.Status = ResultPassed },
		"error code":          func(_ *engineBinding, _ *RunFacts, _ *SnapshotEntry, r *Result) { r.ErrorCode = &code },
		"findings": func(_ *engineBinding, _ *RunFacts, _ *SnapshotEntry, r *Result) {
			r.Findings = json.RawMessage(`[{"id":"g"}]`)
		},
	} {
		b, f, e, r := engine, facts, entry, result
		change(&b, &f, &e, &r)
		if bytes.Equal(boundResultDigest(b, f, e, r), base) {
			t.Errorf("changing the %s leaves the result digest as it was", name)
		}
	}
}

// TestCompositionDigestBindsOrderedPairsAndOutcome (SPEC §2 Result): the
// composition digest is over the ordered attachment/result digest pairs
// and the overall outcome, so it changes when the pairs change order,
// when one result digest or attachment changes, and when the outcome
// does; the same composition always gives the same digest.
func TestCompositionDigestBindsOrderedPairsAndOutcome(t *testing.T) {
	t.Parallel()
	check := Check{RunID: "run_1", PlanDigest: sum("plan"), InputDigest: sum("input"), Outcome: OutcomeSoftFailed}
	results := []Result{
		{AttachmentID: "pol_a", ResultDigest: sum("result a")},
		{AttachmentID: "pol_b", ResultDigest: sum("result b")},
	}
	base := compositionDigest(check, results)
	if !bytes.Equal(base, compositionDigest(check, []Result{results[0], results[1]})) {
		t.Fatal("the composition digest is not deterministic")
	}
	changed := map[string][]byte{
		"order":         compositionDigest(check, []Result{results[1], results[0]}),
		"result digest": compositionDigest(check, []Result{results[0], {AttachmentID: "pol_b", ResultDigest: sum("result b2")}}),
		"attachment":    compositionDigest(check, []Result{results[0], {AttachmentID: "pol_c", ResultDigest: sum("result b")}}),
		"a result less": compositionDigest(check, results[:1]),
	}
	for _, outcome := range []string{OutcomePass, OutcomeAdvisoryFailed, OutcomeHardFailed, OutcomeError} {
		c := check
		c.Outcome = outcome
		changed["outcome "+outcome] = compositionDigest(c, results)
	}
	other := check
	other.PlanDigest = sum("other plan")
	changed["plan"] = compositionDigest(other, results)
	other = check
	other.InputDigest = sum("other input")
	changed["input"] = compositionDigest(other, results)
	for name, d := range changed {
		if bytes.Equal(d, base) {
			t.Errorf("changing the %s leaves the composition digest as it was", name)
		}
	}
}
