package policy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/telemetry"
	"github.com/cairnhq/cairn/api/policy/rego"
)

// Evaluation error codes that arise outside the engine.
const (
	codeBundleUnavailable = rego.CodeBundleUnavailable
	codeBundleMismatch    = rego.CodeBundleMismatch
	codeEvaluatorFailed   = rego.CodeEvaluatorFailed
	// codeCompositionTooLarge: the results' findings together exceed 2 MiB.
	codeCompositionTooLarge = "policy_composition_too_large"
)

// RunFacts is what evaluation needs to know about a run. Only sanitized
// facts reach the policy input; the plan itself is read once, here.
type RunFacts struct {
	OrganizationID string
	ProjectID      string
	RunID          string
	// AttemptID is the plan attempt evaluating; bundle grants are bound
	// to it.
	AttemptID              string
	Kind                   string // manual, tracked or speculative
	CommitSHA              *string
	ConfigurationVersionID string
	// RepositoryID is the code-host repository of tracked and speculative
	// runs; manual runs name their configuration version instead.
	RepositoryID     string
	WorkingDirectory string
	WorkspaceID      string
	WorkspaceName    string
	PlanDigest       []byte
	SnapshotError    *string
}

// CheckID is the deterministic ID of a run's policy check: a run has
// exactly one, so a retried plan attempt can never record a second.
func CheckID(runID string) string { return "pol_" + strings.TrimPrefix(runID, "run_") }

// MaxCompositionBytes bounds the findings of all results of a run
// together (SPEC §8: complete composition 2 MiB).
const MaxCompositionBytes = 2 << 20

// Evaluation is a run's evaluated policy stage, ready to be recorded with
// the plan evidence.
type Evaluation struct {
	Check   Check
	Results []Result
}

// Evaluate builds the run's sanitized policy input from its plan JSON and
// has ev evaluate every snapshotted attachment against it, in order:
// entries are the run's snapshot as the caller read it (SnapshotOf),
// which narrates the same list in the run's policy log. Failures of a
// policy or its input are results with an error code, never Go errors; a
// Go error means the infrastructure failed and the attempt should be
// retried. secrets are the run's sensitive values: if one
// appears in the input, the input is refused (a secret canary) and every
// result is an error. Whatever ev returns, each decision is validated here
// before it counts; without an evaluator every result is an error.
func (s *Service) Evaluate(ctx context.Context, facts RunFacts, entries []SnapshotEntry, planJSON io.Reader, secrets []string,
	ev Evaluator) (Evaluation, error) {
	started := time.Now()
	evaluatedAt := s.stamp()
	check := Check{ID: CheckID(facts.RunID), OrganizationID: facts.OrganizationID, RunID: facts.RunID, AttemptID: &facts.AttemptID,
		Status: CheckCompleted, PlanDigest: facts.PlanDigest, ConfigurationError: facts.SnapshotError, Attachments: len(entries),
		EvaluatedAt: &evaluatedAt}
	var results []Result
	if facts.SnapshotError == nil && len(entries) > 0 {
		var err error
		results, check.InputDigest, err = s.evaluateEntries(ctx, facts, entries, planJSON, secrets, check.ID, ev)
		if err != nil {
			return Evaluation{}, err
		}
	}
	check.Outcome = Compose(results, facts.SnapshotError != nil)
	check.CompositionDigest = compositionDigest(check, results)
	elapsed := time.Since(started)
	check.DurationMS = int(elapsed.Milliseconds())
	telemetry.ObservePolicyEvaluation(elapsed)
	_ = telemetry.Emit(ctx, s.logger, telemetry.Event{Name: "policy_evaluated", Fields: map[string]telemetry.Value{
		"run_id":   telemetry.ID(facts.RunID),
		"outcome":  telemetry.Enum(check.Outcome, OutcomePass, OutcomeAdvisoryFailed, OutcomeSoftFailed, OutcomeHardFailed, OutcomeError),
		"duration": telemetry.Duration(elapsed),
		"policies": telemetry.Count(int64(len(results))),
	}})
	return Evaluation{Check: check, Results: results}, nil
}

func (s *Service) evaluateEntries(ctx context.Context, facts RunFacts, entries []SnapshotEntry, planJSON io.Reader,
	secrets []string, checkID string, ev Evaluator) ([]Result, []byte, error) {
	results := make([]Result, len(entries))
	for i, e := range entries {
		results[i] = Result{ID: id.New("pol"), CheckID: checkID, RunID: facts.RunID, Sequence: e.Sequence, AttachmentID: e.AttachmentID,
			PolicySetID: e.PolicySetID, PolicyVersionID: e.PolicyVersionID, Scope: e.Scope, EnforcementMode: e.EnforcementMode,
			Findings: json.RawMessage("[]")}
	}
	failAll := func(code string) ([]Result, []byte, error) {
		for i := range results {
			results[i].Status, results[i].ErrorCode = ResultError, &code
			results[i].ResultDigest = resultDigest(facts, entries[i], results[i])
		}
		return results, nil, nil
	}
	// Results bind the manifest's digest; one this binary cannot vouch
	// for fails every result rather than being recorded.
	if _, err := rego.CapabilitiesDigest(); err != nil {
		return failAll(codeEvaluatorFailed)
	}
	doc, err := rego.BuildInput(ctx, planJSON, s.inputMeta(facts))
	if err != nil {
		if rego.CodeOf(err) == "" {
			return nil, nil, err // a failing reader or an ended ctx: no verdict
		}
		return failAll(evalCode(err))
	}
	if err := rego.CheckSecrets(doc, secretBytes(secrets)); err != nil {
		return failAll(evalCode(err))
	}
	if ev == nil {
		s.logger.ErrorContext(ctx, "no policy evaluator configured; every result is an error", "run_id", facts.RunID)
		return failAll(codeEvaluatorFailed)
	}
	sum := sha256.Sum256(doc)
	inputDigest := sum[:]
	requests := make([]EvaluationRequest, len(entries))
	for i, e := range entries {
		requests[i] = EvaluationRequest{OrganizationID: facts.OrganizationID, RunID: facts.RunID, AttemptID: facts.AttemptID,
			Sequence: e.Sequence, PolicyVersionID: e.PolicyVersionID, BundleSHA256: e.BundleSHA256,
			Timeout: s.opts.EvaluationTimeout, Grant: s.bundleGrant(facts.AttemptID, e.Sequence)}
	}
	outcomes := ev.Evaluate(ctx, doc, requests)
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	if len(outcomes) != len(entries) {
		return nil, nil, fmt.Errorf("policy evaluator returned %d outcomes for %d evaluations", len(outcomes), len(entries))
	}
	for _, o := range outcomes {
		// A load canceled by another run sharing the bundle cache is no
		// verdict on this policy: the attempt is retried instead.
		if errors.Is(o.Err, context.Canceled) {
			return nil, nil, o.Err
		}
	}
	for i, e := range entries {
		r := &results[i]
		r.InputDigest = inputDigest
		err := outcomes[i].Err
		var decision rego.Decision
		if err == nil {
			// The evaluator's word is not enough: the decision is checked
			// here, in the worker, before it becomes evidence.
			decision, err = rego.DecisionFromJSON(outcomes[i].Decision)
		}
		r.DurationMS = int(outcomes[i].Duration.Milliseconds())
		switch {
		case err != nil:
			code := evalCode(err)
			r.Status, r.ErrorCode = ResultError, &code
			s.logger.WarnContext(ctx, "policy evaluation failed", "run_id", facts.RunID, "attachment_id", e.AttachmentID, "code", code)
		case len(decision.Findings) > 0:
			r.Status = ResultFailed
			r.Findings, _ = json.Marshal(decision.Findings)
		default:
			r.Status = ResultPassed
		}
		r.ResultDigest = resultDigest(facts, e, *r)
	}
	total := 0
	for _, r := range results {
		total += len(r.Findings)
	}
	if total > MaxCompositionBytes {
		// Too much to keep as evidence: every result with findings fails
		// closed rather than being cut.
		code := codeCompositionTooLarge
		for i, e := range entries {
			if results[i].Status == ResultFailed {
				results[i].Status, results[i].ErrorCode, results[i].Findings = ResultError, &code, json.RawMessage("[]")
				results[i].ResultDigest = resultDigest(facts, e, results[i])
			}
		}
	}
	return results, inputDigest, nil
}

func (s *Service) inputMeta(facts RunFacts) rego.InputMeta {
	repositoryID := facts.ConfigurationVersionID
	if facts.RepositoryID != "" {
		repositoryID = facts.RepositoryID
	}
	return rego.InputMeta{
		RunID: facts.RunID, Kind: facts.Kind, CommitSHA: facts.CommitSHA, RepositoryID: repositoryID,
		WorkingDirectory: facts.WorkingDirectory, WorkspaceID: facts.WorkspaceID,
		WorkspaceMetadata: map[string]any{"name": facts.WorkspaceName, "project_id": facts.ProjectID, "organization_id": facts.OrganizationID},
	}
}

// EvaluationRequest is one attachment's evaluation of a run's input.
type EvaluationRequest struct {
	OrganizationID  string
	RunID           string
	AttemptID       string
	Sequence        int
	PolicyVersionID string
	// BundleSHA256 is the snapshotted bundle digest; the bundle read must
	// hash to it.
	BundleSHA256 []byte
	// Timeout bounds the evaluation.
	Timeout time.Duration
	// Grant signs this evaluation's bundle grant, valid until deadline,
	// and returns its path and query relative to the API's origin.
	Grant func(deadline time.Time) string
}

// Outcome is one attachment's evaluation.
type Outcome struct {
	// Decision is the decision document (JSON) the evaluator produced; it
	// counts only once Evaluate has validated it.
	Decision []byte
	// Err is a verdict (an error with a safe code, see rego.CodeOf) or,
	// when the context ended, the context's error.
	Err      error
	Duration time.Duration
}

// Evaluator runs a run's evaluations against its sanitized input document
// and returns their outcomes in the requests' order.
type Evaluator interface {
	Evaluate(ctx context.Context, input []byte, requests []EvaluationRequest) []Outcome
}

// openBundle returns the sealed bundle of a snapshotted version and its
// size, checking while it streams that its digest is the one the run
// captured.
func (s *Service) openBundle(ctx context.Context, organizationID string, e SnapshotEntry) (io.ReadCloser, int64, error) {
	blobs, err := s.storage()
	if err != nil {
		return nil, 0, &rego.EvalError{Code: codeBundleUnavailable, Detail: err.Error()}
	}
	a, err := artifactOf(ctx, s.db, organizationID, e.PolicyVersionID, ArtifactBundle)
	if err != nil {
		return nil, 0, &rego.EvalError{Code: codeBundleUnavailable, Detail: err.Error()}
	}
	if !bytes.Equal(a.SHA256, e.BundleSHA256) {
		return nil, 0, &rego.EvalError{Code: codeBundleMismatch, Detail: "committed bundle digest differs from the snapshot"}
	}
	rc, err := blobs.Open(ctx, a.BlobKey, builtArtifactIdentity(organizationID, e.PolicyVersionID, ArtifactBundle))
	if err != nil {
		return nil, 0, &rego.EvalError{Code: codeBundleUnavailable, Detail: err.Error()}
	}
	return newVerifyingReader(rc, e.BundleSHA256), a.SizeBytes, nil
}

// verifyingReader fails the read at EOF when the plaintext's digest is not
// the expected one, so a bundle is never compiled from unexpected bytes.
// It holds back each read's bytes until it knows whether more follow, and
// the last read's until the digest is checked: a reader that stops at the
// error has not received the whole of a wrong bundle, so a streamed
// response is cut short rather than completed.
type verifyingReader struct {
	rc   io.ReadCloser
	br   *bufio.Reader
	hash hash.Hash
	want []byte
}

func newVerifyingReader(rc io.ReadCloser, want []byte) *verifyingReader {
	return &verifyingReader{rc: rc, br: bufio.NewReaderSize(rc, 64<<10), hash: sha256.New(), want: want}
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.br.Read(p)
	v.hash.Write(p[:n])
	if err == nil {
		if _, err = v.br.Peek(1); err == nil {
			return n, nil
		}
	}
	if errors.Is(err, io.EOF) {
		if !bytes.Equal(v.hash.Sum(nil), v.want) {
			return 0, &rego.EvalError{Code: codeBundleMismatch, Detail: "bundle bytes do not match the snapshot digest"}
		}
		return n, io.EOF
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.rc.Close() }

func evalCode(err error) string {
	var evalErr *rego.EvalError
	if errors.As(err, &evalErr) && evalErr.Code != "" {
		return evalErr.Code
	}
	return codeEvaluatorFailed
}

func secretBytes(secrets []string) [][]byte {
	out := make([][]byte, 0, len(secrets))
	for _, s := range secrets {
		out = append(out, []byte(s))
	}
	return out
}

// engineBinding is what evaluated a result besides its policy: the engine,
// the capabilities manifest with its committed digest, and the entrypoint
// (SPEC §4: every evaluation binds them).
type engineBinding struct {
	EngineVersion      string
	CapabilitiesID     string
	CapabilitiesSHA256 string
	Entrypoint         string
}

// currentEngine is the binding of this build's evaluator.
func currentEngine() engineBinding {
	capabilities, _ := rego.CapabilitiesDigest()
	return engineBinding{EngineVersion: rego.EngineVersion, CapabilitiesID: rego.CapabilitiesID, CapabilitiesSHA256: capabilities,
		Entrypoint: rego.Entrypoint}
}

// resultDigest binds one result to everything it was evaluated with: plan,
// input, attachment, set, version, bundle, engine, capabilities manifest
// and entrypoint, and what came out.
func resultDigest(facts RunFacts, e SnapshotEntry, r Result) []byte {
	return boundResultDigest(currentEngine(), facts, e, r)
}

func boundResultDigest(engine engineBinding, facts RunFacts, e SnapshotEntry, r Result) []byte {
	return digest(map[string]any{
		"schema": "cairn.policy.result/v1", "run_id": facts.RunID, "plan_digest": hex.EncodeToString(facts.PlanDigest),
		"input_digest": hex.EncodeToString(r.InputDigest), "attachment_id": e.AttachmentID, "policy_set_id": e.PolicySetID,
		"policy_version_id": e.PolicyVersionID, "scope": e.Scope, "enforcement_mode": e.EnforcementMode,
		"bundle_sha256": hex.EncodeToString(e.BundleSHA256), "engine_version": engine.EngineVersion,
		"capabilities": engine.CapabilitiesID, "capabilities_sha256": engine.CapabilitiesSHA256, "entrypoint": engine.Entrypoint,
		"status": r.Status, "error_code": r.ErrorCode, "findings": r.Findings,
	})
}

// compositionDigest binds the outcome to the ordered attachment and result
// digest pairs; an approval names it.
func compositionDigest(c Check, results []Result) []byte {
	pairs := make([]map[string]string, 0, len(results))
	for _, r := range results {
		pairs = append(pairs, map[string]string{"attachment_id": r.AttachmentID, "result_digest": hex.EncodeToString(r.ResultDigest)})
	}
	return digest(map[string]any{
		"schema": "cairn.policy.composition/v1", "run_id": c.RunID, "plan_digest": hex.EncodeToString(c.PlanDigest),
		"input_digest": hex.EncodeToString(c.InputDigest), "configuration_error": c.ConfigurationError,
		"outcome": c.Outcome, "results": pairs,
	})
}

// ReserveCheck reserves a run's check at its plan commit, in the caller's
// transaction: running, bound to the plan digest and the plan attempt,
// with no input digest (SPEC §3). A check an earlier attempt reserved
// and never completed (its worker was lost) is bound to this attempt's
// plan instead; a completed check is ErrCheckCompleted.
func ReserveCheck(ctx context.Context, tx *sqlx.Tx, organizationID, runID, attemptID string, planDigest []byte, at time.Time) (Check, error) {
	c := Check{ID: CheckID(runID), OrganizationID: organizationID, RunID: runID, AttemptID: &attemptID, Status: CheckRunning,
		PlanDigest: planDigest, ReservedAt: at}
	if err := reserveCheck(ctx, tx, c); err != nil {
		return Check{}, err
	}
	return c, nil
}

// RecordEvaluation completes a run's reserved check with ev in the
// caller's transaction (the policy commit's), binding its input digest
// once. It reports whether it recorded anything: an evaluation of a check
// that attempt already completed with the same plan and input digest is
// a replay, which changes nothing and returns false. Another evaluation of
// the attempt's check (another input digest or plan) is
// ErrEvaluationConflict and changes nothing either; so is any evaluation
// once a later attempt reserved the check, with an error of its own.
func RecordEvaluation(ctx context.Context, tx *sqlx.Tx, attemptID string, ev Evaluation) (bool, error) {
	c, err := checkOfRun(ctx, tx, ev.Check.RunID, true)
	if errors.Is(err, fault.ErrNotFound) {
		return false, fmt.Errorf("policy check of run %s was never reserved", ev.Check.RunID)
	}
	if err != nil {
		return false, err
	}
	switch {
	case c.AttemptID == nil || *c.AttemptID != attemptID:
		// A later attempt's plan commit took the check over.
		return false, fmt.Errorf("policy check %s is not reserved for attempt %s", c.ID, attemptID)
	case c.ID != ev.Check.ID || !bytes.Equal(c.PlanDigest, ev.Check.PlanDigest):
		return false, ErrEvaluationConflict
	case c.Completed() && bytes.Equal(c.InputDigest, ev.Check.InputDigest):
		return false, nil
	case c.Completed():
		return false, ErrEvaluationConflict
	}
	complete := ev.Check
	complete.AttemptID = &attemptID
	if err := completeCheck(ctx, tx, complete, ev.Results); err != nil {
		return false, err
	}
	return true, nil
}

// CheckStatus is the remote-backend status of a check (SPEC §3): pending
// while its evaluation runs, errored once its run ended without one (the
// evaluation did not complete, and nothing can apply), else its outcome's
// status.
func CheckStatus(c Check, runEnded, overridden bool) string {
	switch {
	case c.Completed():
		return CompatibilityStatus(c.Outcome, overridden)
	case runEnded:
		return "errored"
	}
	return "pending"
}

// CheckOfRun reads a run's check and results.
func CheckOfRun(ctx context.Context, q sqlx.QueryerContext, runID string) (Check, []Result, error) {
	c, err := checkOfRun(ctx, q, runID, false)
	if err != nil {
		return Check{}, nil, err
	}
	results, err := resultsOf(ctx, q, c.ID)
	return c, results, err
}

// SnapshotOf lists the attachments a run snapshotted at its creation, in
// evaluation order: what its check's results follow, one for one.
func SnapshotOf(ctx context.Context, q sqlx.QueryerContext, runID string) ([]SnapshotEntry, error) {
	return snapshotOf(ctx, q, runID)
}

// CheckByID reads a check of an organization with its results.
func CheckByID(ctx context.Context, q sqlx.QueryerContext, organizationID, checkID string) (Check, []Result, error) {
	c, err := checkByID(ctx, q, organizationID, checkID)
	if err != nil {
		return Check{}, nil, err
	}
	results, err := resultsOf(ctx, q, c.ID)
	return c, results, err
}

// MaxOverridesShown bounds the overrides a review lists (SPEC §8).
const MaxOverridesShown = 256

// OverridesOf lists a run's overrides, newest first, at most 256, and
// whether more exist.
func OverridesOf(ctx context.Context, q sqlx.QueryerContext, runID string) ([]Override, bool, error) {
	overrides, err := overridesOf(ctx, q, runID, MaxOverridesShown+1)
	if err != nil {
		return nil, false, err
	}
	if len(overrides) > MaxOverridesShown {
		return overrides[:MaxOverridesShown], true, nil
	}
	return overrides, false, nil
}

// UnexpiredOverrides lists the overrides that may still open the gate.
func UnexpiredOverrides(ctx context.Context, q sqlx.QueryerContext, runID string, now time.Time) ([]Override, error) {
	return unexpiredOverrides(ctx, q, runID, now)
}

// InsertOverride records an override in the caller's transaction.
func InsertOverride(ctx context.Context, tx *sqlx.Tx, o Override) error {
	return insertOverride(ctx, tx, o)
}

// VersionNames maps version IDs to their set name and number, for reviews.
func VersionNames(ctx context.Context, q sqlx.QueryerContext, organizationID string, versionIDs []string) (map[string]VersionName, error) {
	rows := []VersionName{}
	err := sqlx.SelectContext(ctx, q, &rows, `SELECT v.id, v.number, s.name FROM policy_versions v
		JOIN policy_sets s ON s.id = v.policy_set_id WHERE v.organization_id = $1 AND v.id = ANY($2)`,
		organizationID, pq.Array(versionIDs))
	if err != nil {
		return nil, fmt.Errorf("reading policy version names: %w", err)
	}
	out := make(map[string]VersionName, len(rows))
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, nil
}

// VersionName is a version's display identity.
type VersionName struct {
	ID      string `db:"id"`
	Number  int    `db:"number"`
	SetName string `db:"name"`
}
