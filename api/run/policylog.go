package run

import (
	"context"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/rego"
)

const (
	// maxLoggedFindings bounds the findings one result lists in the policy
	// log; the policy result keeps them all.
	maxLoggedFindings = 20
	// maxLoggedTitle bounds one finding title in the log, in characters.
	maxLoggedTitle = 200
)

// policyLog narrates a run's policy stage in its policy log: which
// attachments are evaluated, in order, then each result with its
// enforcement and the outcome. It shows only what the review shows of a
// result (set name and version, scope, enforcement mode, status, error
// code, finding titles and resource addresses) and never the policy input
// or a finding's message or details, so the plan's values reach it only as
// far as a policy's own finding titles name them. The run's secrets are
// masked like in any log. The check is the evidence and the log only its
// narration: a line that cannot be stored never fails the evaluation.
type policyLog struct {
	s     *Service
	sink  *LogSink
	names map[string]policy.VersionName
}

// openPolicyLog opens the run's policy log after its newest chunk. A run
// writes its plan log first, so the policy log follows it in sequence.
func (s *Service) openPolicyLog(ctx context.Context, st Started, secrets []string) *policyLog {
	sink, err := s.NewLogSink(ctx, st.Run.ID, LogPhasePolicy, secrets)
	if err != nil {
		s.logger.WarnContext(ctx, "policy log not opened; the evaluation goes on without it", "run_id", st.Run.ID, "error", err)
		return &policyLog{s: s}
	}
	return &policyLog{s: s, sink: sink}
}

func (l *policyLog) line(format string, args ...any) {
	if l.sink != nil {
		l.sink.Line(format, args...)
	}
}

// flush stores the lines written so far: the live channel shows them
// while the evaluation still runs.
func (l *policyLog) flush(ctx context.Context, final bool) {
	if l.sink == nil {
		return
	}
	// The narration of an evaluation a canceled run stopped is still
	// stored, as a phase's last lines are.
	if err := l.sink.Flush(context.WithoutCancel(ctx), final); err != nil {
		l.s.logger.WarnContext(ctx, "policy log lines not stored", "run_id", l.sink.runID, "error", err)
	}
}

// begin writes what is about to be evaluated: the run's snapshotted
// attachments (entries) in evaluation order, or why nothing is. When an
// evaluation follows, the lines are stored while it runs, so the live
// channel shows them; the returned function waits for that. Otherwise
// they are stored with the outcome, right after.
func (l *policyLog) begin(ctx context.Context, st Started, facts policy.RunFacts, entries []policy.SnapshotEntry) (stored func()) {
	l.line("Cairn policy stage of %s, plan attempt %d (engine OPA %s)", st.Run.ID, st.Attempt.Number, rego.EngineVersion)
	switch {
	case facts.SnapshotError != nil:
		l.line("The attachment list cannot be evaluated (%s); apply is blocked.", *facts.SnapshotError)
	case len(entries) == 0:
		l.line("No policy set was attached to this workspace when the run was created.")
	default:
		l.line("Evaluating %d policy set(s) against the sanitized plan, in this order:", len(entries))
		for i, e := range entries {
			l.line("  %d. %s (%s scope, %s)", i+1, l.name(e.PolicyVersionID, e.PolicySetID), e.Scope, e.EnforcementMode)
		}
	}
	if facts.SnapshotError != nil || len(entries) == 0 {
		return func() {}
	}
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		l.flush(ctx, false)
	}()
	return func() { <-flushed }
}

// end writes each result and the outcome, or that the evaluation did not
// complete.
func (l *policyLog) end(ctx context.Context, ev policy.Evaluation, err error) {
	if err != nil {
		// The error itself may name infrastructure; the worker's log has it.
		l.line("The policy evaluation did not complete; no result was recorded.")
		l.flush(ctx, true)
		return
	}
	if len(ev.Results) > 0 {
		l.line("")
	}
	for i, r := range ev.Results {
		head := l.name(r.PolicyVersionID, r.PolicySetID)
		switch r.Status {
		case policy.ResultPassed:
			l.line("  %d. %s: passed (%d ms)", i+1, head, r.DurationMS)
		case policy.ResultFailed:
			findings := policy.PublicFindings(r.Findings)
			l.line("  %d. %s: failed with %d finding(s) (%d ms); %s", i+1, head, len(findings), r.DurationMS, failureEffect(r.EnforcementMode))
			for j, f := range findings {
				if j == maxLoggedFindings {
					l.line("       … and %d more; the policy result lists them all.", len(findings)-j)
					break
				}
				if f.ResourceAddress != "" {
					l.line("       - %s (%s)", oneLogLine(f.Title), oneLogLine(f.ResourceAddress))
				} else {
					l.line("       - %s", oneLogLine(f.Title))
				}
			}
		default:
			code := rego.CodeEvaluatorFailed
			if r.ErrorCode != nil {
				code = *r.ErrorCode
			}
			l.line("  %d. %s: error %s (%d ms); apply is blocked", i+1, head, code, r.DurationMS)
		}
	}
	l.line("")
	l.line("Policy outcome: %s (%d result(s), %d ms). %s", ev.Check.Outcome, len(ev.Results), ev.Check.DurationMS, outcomeEffect(ev.Check.Outcome))
	l.flush(ctx, true)
}

// name is a version's display name, set and number, or the set's ID when
// it could not be read.
func (l *policyLog) name(versionID, setID string) string {
	if n, ok := l.names[versionID]; ok {
		return oneLogLine(n.SetName) + " v" + strconv.Itoa(n.Number)
	}
	return setID
}

func failureEffect(mode string) string {
	switch mode {
	case policy.ModeHardMandatory:
		return "hard_mandatory: apply is blocked"
	case policy.ModeSoftMandatory:
		return "soft_mandatory: apply waits for an override"
	}
	return "advisory: reported only"
}

func outcomeEffect(outcome string) string {
	switch outcome {
	case policy.OutcomePass:
		return "Every policy passed."
	case policy.OutcomeAdvisoryFailed:
		return "Advisory failures do not block apply."
	case policy.OutcomeSoftFailed:
		return "Apply waits until each soft failure is overridden by a holder of policy:override_soft."
	case policy.OutcomeHardFailed:
		return "A hard-mandatory failure blocks apply."
	}
	return "Apply is blocked."
}

// oneLogLine keeps a policy-written text on one bounded line.
func oneLogLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > maxLoggedTitle {
		s = string([]rune(s)[:maxLoggedTitle]) + "…"
	}
	return s
}
