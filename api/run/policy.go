package run

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/workspace"
)

// Override bounds (SPEC §8).
const (
	maxJustificationChars = 2000
	maxOverrideLifetime   = 24 * time.Hour
	// CompatibilityOverrideLifetime is the expiry of an override made
	// through the remote-backend API, which carries no expiry of its own.
	CompatibilityOverrideLifetime = 15 * time.Minute
	// CompatibilityJustification is the fixed justification of such an
	// override.
	CompatibilityJustification = "Overridden from the remote-backend API (tofu CLI)."
)

// policyRunKind is the policy input's run kind. Every run so far comes from
// an uploaded configuration, a manual run with no commit, including the
// CLI's speculative `tofu plan`; the input's speculative kind means a
// pull-request plan, which always has a commit, and arrives with code-host
// runs.
const policyRunKind = "manual"

// EvaluatePolicy has ev evaluate the started plan attempt's snapshotted
// policy attachments against its plan JSON. secrets are the run's
// sensitive values, refused if they appear in the policy input. It
// narrates the stage in the run's policy log as it goes; the attempt's
// plan log must be stored first, as the policy log follows it.
func (s *Service) EvaluatePolicy(ctx context.Context, st Started, planDigest []byte, planJSON io.Reader, secrets []string,
	ev policy.Evaluator) (policy.Evaluation, error) {
	r := st.Run
	// Everything the stage reads before it evaluates is read at once: the
	// launch decision, the workspace's name, the policy log's position and
	// the run's snapshot with its sets' names.
	var (
		admission launch.Decision
		plog      *policyLog
		entries   []policy.SnapshotEntry
		names     map[string]policy.VersionName
		snapErr   error
		reads     sync.WaitGroup
	)
	reads.Go(func() {
		admission = s.launch.DecideBy(ctx, nil, launch.Subject{OrganizationID: r.OrganizationID, WorkspaceID: r.WorkspaceID},
			launch.AdmitPolicyEvaluation)
	})
	reads.Go(func() { plog = s.openPolicyLog(ctx, st, secrets) })
	reads.Go(func() {
		if entries, snapErr = policy.SnapshotOf(ctx, s.db, r.ID); snapErr == nil && len(entries) > 0 {
			// Without names the log names the sets by ID.
			names, _ = policy.VersionNames(ctx, s.db, r.OrganizationID, versionIDs(entries))
		}
	})
	w, err := workspace.WorkspaceByID(ctx, s.db, r.OrganizationID, r.WorkspaceID, false)
	reads.Wait()
	if err = cmp.Or(err, snapErr); err != nil {
		return policy.Evaluation{}, err
	}
	snapshotErr := r.PolicySnapshotError
	if !admission.Admitted {
		// The required policy stage cannot run on a release launch control
		// does not allow: the stage's outcome is error, so no apply.
		snapshotErr = &admission.Reason
	}
	facts := policy.RunFacts{
		OrganizationID: r.OrganizationID, ProjectID: r.ProjectID, RunID: r.ID, AttemptID: st.Attempt.ID, Kind: policyRunKind,
		ConfigurationVersionID: r.ConfigurationVersionID, WorkspaceID: r.WorkspaceID, WorkspaceName: w.Name,
		PlanDigest: planDigest, SnapshotError: snapshotErr,
	}
	if src := codeHostSourceOf(r); src != nil {
		// A code-host run is tracked (a push) or speculative (a pull
		// request), with the exact commit it evaluated.
		facts.Kind = "tracked"
		if r.Speculative() {
			facts.Kind = "speculative"
		}
		sha := src.CommitSHA
		facts.CommitSHA, facts.RepositoryID, facts.WorkingDirectory = &sha, strconv.FormatInt(src.RepositoryID, 10), src.WorkingDirectory
	} else if r.Source == SourceVCS {
		// A code-host run whose source cannot be read fails closed.
		reason := "source_provenance_unavailable"
		facts.SnapshotError = &reason
	}
	// The log's opening lines are stored while the evaluation runs:
	// narrating it never delays it.
	plog.names = names
	begun := plog.begin(ctx, st, facts, entries)
	evaluation, err := s.policies.Evaluate(ctx, facts, entries, planJSON, secrets, ev)
	begun()
	plog.end(ctx, evaluation, err)
	return evaluation, err
}

func versionIDs(entries []policy.SnapshotEntry) []string {
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.PolicyVersionID)
	}
	return ids
}

// PolicyBundleGrant resolves a presented bundle grant: its signature and
// deadline hold, its attempt is still running a plan, and its sequence is
// in that run's snapshot. Every refusal is the same fault.ErrNotFound, so
// a caller cannot tell an expired grant from a tampered one or a finished
// attempt.
func (s *Service) PolicyBundleGrant(ctx context.Context, g policy.BundleGrant) (Run, policy.SnapshotEntry, error) {
	seq, ok := s.policies.CheckBundleGrant(g, s.now())
	if !ok {
		return Run{}, policy.SnapshotEntry{}, fault.ErrNotFound
	}
	a, err := attemptByID(ctx, s.db, g.AttemptID, false)
	if errors.Is(err, fault.ErrNotFound) || (err == nil && (a.Status != AttemptRunning || a.Phase != PhasePlan)) {
		return Run{}, policy.SnapshotEntry{}, fault.ErrNotFound
	}
	if err != nil {
		return Run{}, policy.SnapshotEntry{}, err
	}
	r, err := runByID(ctx, s.db, a.OrganizationID, a.RunID, false)
	if err != nil {
		return Run{}, policy.SnapshotEntry{}, err
	}
	e, err := policy.SnapshotEntryOf(ctx, s.db, r.ID, seq)
	if err != nil {
		return Run{}, policy.SnapshotEntry{}, err
	}
	return r, e, nil
}

// OpenPolicyBundle streams the bundle a resolved grant names, with its
// size; the read fails at its end unless the bytes hash to the snapshot.
func (s *Service) OpenPolicyBundle(ctx context.Context, r Run, e policy.SnapshotEntry) (io.ReadCloser, int64, error) {
	return s.policies.OpenSnapshotBundle(ctx, r.OrganizationID, e)
}

// OverrideInput is a request to waive one soft-failed result.
type OverrideInput struct {
	PolicyResultDigest string
	Justification      string
	ExpiresAt          time.Time
	RequestID          string
}

// OverridePolicy records an immutable override of one current soft failure
// of the run, bound to its plan, policy version and result digest. When
// every current soft failure has a valid override, the gate opens and a
// run waiting for overrides moves to approval.
func (s *Service) OverridePolicy(ctx context.Context, tx *sqlx.Tx, p access.Principal, runID string, in OverrideInput) (policy.Override, Run, error) {
	r, err := visibleRun(ctx, tx, p, runID, access.PermRunRead, true)
	if err != nil {
		return policy.Override{}, Run{}, err
	}
	if err := requireIn(p, r, access.PermPolicyOverrideSoft); err != nil {
		return policy.Override{}, Run{}, err
	}
	now := s.stamp()
	justification := strings.TrimSpace(in.Justification)
	switch {
	case len(in.PolicyResultDigest) != 64 || strings.ToLower(in.PolicyResultDigest) != in.PolicyResultDigest:
		return policy.Override{}, Run{}, fmt.Errorf("%w: policy_result_digest must be 64 lowercase hex characters", ErrInvalid)
	case justification == "" || len([]rune(justification)) > maxJustificationChars:
		return policy.Override{}, Run{}, fmt.Errorf("%w: justification must be 1–2,000 characters after trimming", ErrInvalid)
	case !in.ExpiresAt.After(now) || in.ExpiresAt.After(now.Add(maxOverrideLifetime)):
		return policy.Override{}, Run{}, fmt.Errorf("%w: expires_at must be in the future and at most 24 hours ahead", ErrInvalid)
	}
	resultDigest, err := hex.DecodeString(in.PolicyResultDigest)
	if err != nil {
		return policy.Override{}, Run{}, fmt.Errorf("%w: policy_result_digest is not hex", ErrInvalid)
	}
	if !r.Overridable(now) {
		return policy.Override{}, Run{}, ErrActionNotAllowed
	}
	_, results, err := policy.CheckOfRun(ctx, tx, r.ID)
	if err != nil {
		return policy.Override{}, Run{}, err
	}
	var target *policy.Result
	for i := range results {
		if results[i].Overridable() && bytes.Equal(results[i].ResultDigest, resultDigest) {
			target = &results[i]
		}
	}
	if target == nil {
		return policy.Override{}, Run{}, policy.ErrOverrideStale
	}
	o := newOverride(r, *target, p, justification, in.ExpiresAt.UTC().Truncate(time.Microsecond), in.RequestID, now)
	if err := policy.InsertOverride(ctx, tx, o); err != nil {
		return policy.Override{}, Run{}, err
	}
	if r, err = s.reopenGate(ctx, tx, r, results, now); err != nil {
		return policy.Override{}, Run{}, err
	}
	return o, r, audit.Record(ctx, tx, p, "run.policy_overridden", "run", r.ID, map[string]any{
		"override_id": o.ID, "policy_result_id": target.ID, "policy_version_id": target.PolicyVersionID,
		"policy_result_digest": in.PolicyResultDigest, "expires_at": o.ExpiresAt, "gate_open": r.GateOpen(now),
	})
}

// OverrideAllSoftFailures is the remote-backend override: it derives every
// current soft failure that lacks a valid override and waives each with
// the fixed justification and a 15-minute expiry.
func (s *Service) OverrideAllSoftFailures(ctx context.Context, tx *sqlx.Tx, p access.Principal, runID, requestID string) (Run, error) {
	r, err := visibleRun(ctx, tx, p, runID, access.PermRunRead, true)
	if err != nil {
		return Run{}, err
	}
	if err := requireIn(p, r, access.PermPolicyOverrideSoft); err != nil {
		return Run{}, err
	}
	now := s.stamp()
	if !r.Overridable(now) {
		return Run{}, ErrActionNotAllowed
	}
	_, results, err := policy.CheckOfRun(ctx, tx, r.ID)
	if err != nil {
		return Run{}, err
	}
	valid, err := policy.UnexpiredOverrides(ctx, tx, r.ID, now)
	if err != nil {
		return Run{}, err
	}
	expires := now.Add(CompatibilityOverrideLifetime)
	for _, res := range results {
		if !res.Overridable() || policy.GateUntil([]policy.Result{res}, valid, r.PlanDigest, now) != nil {
			continue
		}
		o := newOverride(r, res, p, CompatibilityJustification, expires, requestID, now)
		if err := policy.InsertOverride(ctx, tx, o); err != nil {
			return Run{}, err
		}
	}
	if r, err = s.reopenGate(ctx, tx, r, results, now); err != nil {
		return Run{}, err
	}
	return r, audit.Record(ctx, tx, p, "run.policy_overridden", "run", r.ID, map[string]any{
		"source": "remote_backend", "expires_at": expires, "gate_open": r.GateOpen(now),
	})
}

// newOverride binds an override to the run's plan and the result's policy
// version and digest.
func newOverride(r Run, res policy.Result, p access.Principal, justification string, expires time.Time, requestID string, now time.Time) policy.Override {
	return policy.Override{ID: id.New("pol"), OrganizationID: r.OrganizationID, RunID: r.ID, PolicyResultID: res.ID,
		PlanDigest: r.PlanDigest, PolicyVersionID: res.PolicyVersionID, PolicyResultDigest: res.ResultDigest,
		Justification: justification, ExpiresAt: expires, ActorKind: p.Kind, ActorID: p.ID, RequestID: requestID, CreatedAt: now}
}

// reopenGate recomputes the gate from the run's unexpired overrides and
// moves a run that waited for overrides on to approval once it is open.
func (s *Service) reopenGate(ctx context.Context, tx *sqlx.Tx, r Run, results []policy.Result, now time.Time) (Run, error) {
	valid, err := policy.UnexpiredOverrides(ctx, tx, r.ID, now)
	if err != nil {
		return Run{}, err
	}
	r.PolicyGateUntil = policy.GateUntil(results, valid, r.PlanDigest, now)
	if r.GateOpen(now) && r.Status == StatusPolicyOverride {
		r = s.transition(r, StatusAwaitingApproval)
	}
	r.UpdatedAt = now
	return r, s.save(ctx, tx, r)
}

// PolicyReview is a run's persisted, sanitized policy evidence.
type PolicyReview struct {
	Run   Run
	Check *policy.Check
	// Snapshot is the attachments the run snapshotted, read while its
	// check is running: what its results will follow, one for one.
	Snapshot  []policy.SnapshotEntry
	Results   []policy.Result
	Names     map[string]policy.VersionName
	Overrides []policy.Override
	// OverridesTruncated is set when more than 256 overrides exist.
	OverridesTruncated bool
	// Overridden reports whether unexpired overrides open the gate now.
	Overridden bool
}

// PolicyIncomplete explains a check whose run ended before its evaluation
// was recorded (SPEC §3).
const PolicyIncomplete = "The policy evaluation did not complete: the run ended before its result was recorded, so nothing was evaluated and apply is not permitted."

// Status is the review's policy-check status (SPEC §3): pending until the
// evaluation is recorded, errored if the run ended first, else what the
// outcome and its overrides say.
func (v PolicyReview) Status() string {
	if v.Check == nil {
		// The run ended before its plan committed: apply was never
		// possible, and the check reports that as errored.
		if v.Run.Status.Terminal() {
			return "errored"
		}
		return "pending"
	}
	return policy.CheckStatus(*v.Check, v.Run.Status.Terminal(), v.Overridden)
}

// Incomplete reports a reserved check whose run ended before its
// evaluation was recorded.
func (v PolicyReview) Incomplete() bool {
	return v.Check != nil && !v.Check.Completed() && v.Run.Status.Terminal()
}

// Policy returns the run's policy evidence. Before the plan commits there
// is no check yet; from then until the policy commit it is running.
func (s *Service) Policy(ctx context.Context, p access.Principal, runID string) (PolicyReview, error) {
	r, err := s.GetRun(ctx, p, runID)
	if err != nil {
		return PolicyReview{}, err
	}
	return s.policyReview(ctx, s.db, r)
}

// PolicyOf is the policy evidence of a run the caller already read, read
// through q (a transaction sees its own writes).
func (s *Service) PolicyOf(ctx context.Context, q sqlx.QueryerContext, r Run) (PolicyReview, error) {
	return s.policyReview(ctx, q, r)
}

// PolicyInTx is Policy read inside the caller's transaction, so it sees
// the transaction's own writes.
func (s *Service) PolicyInTx(ctx context.Context, tx *sqlx.Tx, p access.Principal, runID string) (PolicyReview, error) {
	r, err := visibleRun(ctx, tx, p, runID, access.PermRunRead, false)
	if err != nil {
		return PolicyReview{}, err
	}
	return s.policyReview(ctx, tx, r)
}

// PolicyByCheck returns the evidence of a check by its ID, for the
// remote-backend policy-check resource.
func (s *Service) PolicyByCheck(ctx context.Context, p access.Principal, checkID string) (PolicyReview, error) {
	c, _, err := policy.CheckByID(ctx, s.db, p.OrganizationID, checkID)
	if err != nil {
		return PolicyReview{}, err
	}
	r, err := s.GetRun(ctx, p, c.RunID)
	if err != nil {
		return PolicyReview{}, fault.ErrNotFound
	}
	return s.policyReview(ctx, s.db, r)
}

func (s *Service) policyReview(ctx context.Context, q sqlx.QueryerContext, r Run) (PolicyReview, error) {
	review := PolicyReview{Run: r}
	c, results, err := policy.CheckOfRun(ctx, q, r.ID)
	if errors.Is(err, fault.ErrNotFound) {
		return review, nil
	}
	if err != nil {
		return PolicyReview{}, err
	}
	review.Check, review.Results = &c, results
	if !c.Completed() {
		if review.Snapshot, err = policy.SnapshotOf(ctx, q, r.ID); err != nil {
			return PolicyReview{}, err
		}
	}
	ids := make([]string, 0, len(results))
	for _, res := range results {
		ids = append(ids, res.PolicyVersionID)
	}
	if review.Names, err = policy.VersionNames(ctx, q, r.OrganizationID, ids); err != nil {
		return PolicyReview{}, err
	}
	if review.Overrides, review.OverridesTruncated, err = policy.OverridesOf(ctx, q, r.ID); err != nil {
		return PolicyReview{}, err
	}
	// A soft failure is overridden while its overrides open the gate, and
	// stays so once the run was approved on their strength.
	approved := r.DecisionAction != nil && *r.DecisionAction == DecisionApproved
	review.Overridden = c.Outcome == policy.OutcomeSoftFailed && (r.GateOpen(s.stamp()) || approved)
	return review, nil
}
