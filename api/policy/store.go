package policy

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
)

func insertSet(ctx context.Context, q sqlx.ExtContext, s Set) error {
	_, err := sqlx.NamedExecContext(ctx, q, `INSERT INTO policy_sets (id, organization_id, name, description, latest_version,
		created_by_kind, created_by_id, created_at) VALUES (:id, :organization_id, :name, :description, :latest_version,
		:created_by_kind, :created_by_id, :created_at)`, s)
	if db.IsUniqueViolation(err, "policy_sets_organization_name_key") {
		return ErrSetNameTaken
	}
	if err != nil {
		return fmt.Errorf("inserting policy set: %w", err)
	}
	return nil
}

const setColumns = `id, organization_id, name, description, latest_version, created_by_kind, created_by_id, created_at`

func setByID(ctx context.Context, q sqlx.QueryerContext, organizationID, setID string, forUpdate bool) (Set, error) {
	query := `SELECT ` + setColumns + ` FROM policy_sets WHERE id = $1 AND organization_id = $2`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var s Set
	err := sqlx.GetContext(ctx, q, &s, query, setID, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return Set{}, fault.ErrNotFound
	}
	if err != nil {
		return Set{}, fmt.Errorf("reading policy set: %w", err)
	}
	return s, nil
}

func listSets(ctx context.Context, q sqlx.QueryerContext, organizationID string) ([]Set, error) {
	sets := []Set{}
	err := sqlx.SelectContext(ctx, q, &sets, `SELECT `+setColumns+` FROM policy_sets WHERE organization_id = $1
		ORDER BY lower(name), id LIMIT 1000`, organizationID)
	if err != nil {
		return nil, fmt.Errorf("listing policy sets: %w", err)
	}
	return sets, nil
}

const versionColumns = `id, organization_id, policy_set_id, number, workspace_id, settings_version, tool_version, region,
	status, failure_code, source_identity, source_sha256, source_size, bundle_sha256, test_results_sha256, tests_passed,
	engine_version, capabilities_id, capabilities_sha256, entrypoint, created_by_kind, created_by_id, created_at, finished_at`

func insertVersion(ctx context.Context, q sqlx.ExtContext, v Version) error {
	_, err := sqlx.NamedExecContext(ctx, q, `INSERT INTO policy_versions (`+versionColumns+`) VALUES (
		:id, :organization_id, :policy_set_id, :number, :workspace_id, :settings_version, :tool_version, :region,
		:status, :failure_code, :source_identity, :source_sha256, :source_size, :bundle_sha256, :test_results_sha256, :tests_passed,
		:engine_version, :capabilities_id, :capabilities_sha256, :entrypoint, :created_by_kind, :created_by_id, :created_at, :finished_at)`, v)
	if err != nil {
		return fmt.Errorf("inserting policy version: %w", err)
	}
	return nil
}

// versionReadColumns adds the source artifact's ID, which trusted clients
// name to rebuild a version.
const versionReadColumns = versionColumns + `, COALESCE((SELECT a.id FROM policy_artifacts a
	WHERE a.policy_version_id = policy_versions.id AND a.kind = 'source'), '') AS source_artifact_id`

// versionByID reads a version; an empty organization reads by ID alone
// (the builder, which holds no principal).
func versionByID(ctx context.Context, q sqlx.QueryerContext, organizationID, versionID string, forUpdate bool) (Version, error) {
	query := `SELECT ` + versionReadColumns + ` FROM policy_versions WHERE id = $1 AND ($2 = '' OR organization_id = $2)`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var v Version
	err := sqlx.GetContext(ctx, q, &v, query, versionID, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return Version{}, fault.ErrNotFound
	}
	if err != nil {
		return Version{}, fmt.Errorf("reading policy version: %w", err)
	}
	return v, nil
}

func listVersions(ctx context.Context, q sqlx.QueryerContext, organizationID, setID string) ([]Version, error) {
	versions := []Version{}
	err := sqlx.SelectContext(ctx, q, &versions, `SELECT `+versionReadColumns+` FROM policy_versions
		WHERE policy_set_id = $1 AND organization_id = $2 ORDER BY number DESC LIMIT 100`, setID, organizationID)
	if err != nil {
		return nil, fmt.Errorf("listing policy versions: %w", err)
	}
	return versions, nil
}

// finishVersion moves a pending version to published or failed. The row
// guard (and a trigger) keep a finished version immutable.
func finishVersion(ctx context.Context, q sqlx.ExtContext, v Version) error {
	res, err := q.ExecContext(ctx, `UPDATE policy_versions SET status = $2, failure_code = $3, bundle_sha256 = $4,
		test_results_sha256 = $5, tests_passed = $6, finished_at = $7 WHERE id = $1 AND status = 'pending'`,
		v.ID, v.Status, v.FailureCode, v.BundleSHA256, v.TestResultsSHA256, v.TestsPassed, v.FinishedAt)
	if err != nil {
		return fmt.Errorf("finishing policy version: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrCompletionConflict
	}
	return nil
}

const artifactColumns = `id, organization_id, policy_version_id, kind, blob_key, size_bytes, sha256, created_at`

func insertArtifact(ctx context.Context, q sqlx.ExtContext, a Artifact) error {
	_, err := sqlx.NamedExecContext(ctx, q, `INSERT INTO policy_artifacts (`+artifactColumns+`) VALUES (
		:id, :organization_id, :policy_version_id, :kind, :blob_key, :size_bytes, :sha256, :created_at)`, a)
	if db.IsUniqueViolation(err, "policy_artifacts_policy_version_id_kind_key") {
		return ErrCompletionConflict
	}
	if err != nil {
		return fmt.Errorf("inserting policy artifact: %w", err)
	}
	return nil
}

func artifactOf(ctx context.Context, q sqlx.QueryerContext, organizationID, versionID, kind string) (Artifact, error) {
	var a Artifact
	err := sqlx.GetContext(ctx, q, &a, `SELECT `+artifactColumns+` FROM policy_artifacts
		WHERE policy_version_id = $1 AND kind = $2 AND organization_id = $3`, versionID, kind, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return Artifact{}, fault.ErrNotFound
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("reading policy artifact: %w", err)
	}
	return a, nil
}

const attachmentColumns = `id, organization_id, policy_set_id, policy_version_id, scope, scope_id, enforcement_mode, status,
	created_by_kind, created_by_id, created_at, detached_at`

func insertAttachment(ctx context.Context, q sqlx.ExtContext, a Attachment) error {
	_, err := sqlx.NamedExecContext(ctx, q, `INSERT INTO policy_attachments (`+attachmentColumns+`) VALUES (
		:id, :organization_id, :policy_set_id, :policy_version_id, :scope, :scope_id, :enforcement_mode, :status,
		:created_by_kind, :created_by_id, :created_at, :detached_at)`, a)
	if db.IsUniqueViolation(err, "policy_attachments_active_key") {
		return ErrAlreadyAttached
	}
	if err != nil {
		return fmt.Errorf("inserting policy attachment: %w", err)
	}
	return nil
}

func attachmentByID(ctx context.Context, q sqlx.QueryerContext, organizationID, attachmentID string) (Attachment, error) {
	var a Attachment
	err := sqlx.GetContext(ctx, q, &a, `SELECT `+attachmentColumns+` FROM policy_attachments
		WHERE id = $1 AND organization_id = $2`, attachmentID, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return Attachment{}, fault.ErrNotFound
	}
	if err != nil {
		return Attachment{}, fmt.Errorf("reading policy attachment: %w", err)
	}
	return a, nil
}

// detachAttachment is the compare-and-set detach: only an active row moves.
func detachAttachment(ctx context.Context, q sqlx.ExtContext, a Attachment, at time.Time) (bool, error) {
	res, err := q.ExecContext(ctx, `UPDATE policy_attachments SET status = 'detached', detached_at = $2
		WHERE id = $1 AND status = 'active'`, a.ID, at)
	if err != nil {
		return false, fmt.Errorf("detaching policy attachment: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// EffectiveAttachment is an active attachment in a workspace's ancestry,
// with what a snapshot and a listing need from its set and version.
type EffectiveAttachment struct {
	Attachment
	PolicySetName string `db:"policy_set_name"`
	VersionNumber int    `db:"version_number"`
	BundleSHA256  []byte `db:"bundle_sha256"`
}

// effectiveAttachments lists the active attachments that apply to a
// workspace, in evaluation order: organization, project, workspace scope,
// then attachment ID.
func effectiveAttachments(ctx context.Context, q sqlx.QueryerContext, organizationID, projectID, workspaceID string) ([]EffectiveAttachment, error) {
	rows := []EffectiveAttachment{}
	err := sqlx.SelectContext(ctx, q, &rows, `SELECT a.id, a.organization_id, a.policy_set_id, a.policy_version_id, a.scope,
		a.scope_id, a.enforcement_mode, a.status, a.created_by_kind, a.created_by_id, a.created_at, a.detached_at,
		s.name AS policy_set_name, v.number AS version_number, v.bundle_sha256
		FROM policy_attachments a
		JOIN policy_sets s ON s.id = a.policy_set_id
		JOIN policy_versions v ON v.id = a.policy_version_id AND v.status = 'published'
		WHERE a.organization_id = $1 AND a.status = 'active' AND (
			(a.scope = 'organization' AND a.scope_id = $1) OR
			(a.scope = 'project' AND a.scope_id = $2) OR
			(a.scope = 'workspace' AND a.scope_id = $3))
		ORDER BY CASE a.scope WHEN 'organization' THEN 1 WHEN 'project' THEN 2 ELSE 3 END, a.id
		LIMIT $4`, organizationID, projectID, workspaceID, MaxAttachmentsPerRun+1)
	if err != nil {
		return nil, fmt.Errorf("listing effective policy attachments: %w", err)
	}
	return rows, nil
}

func insertSnapshot(ctx context.Context, q sqlx.ExtContext, entries []SnapshotEntry) error {
	if len(entries) == 0 {
		return nil
	}
	_, err := sqlx.NamedExecContext(ctx, q, `INSERT INTO run_policy_snapshots (run_id, sequence, attachment_id, policy_set_id,
		policy_version_id, scope, enforcement_mode, bundle_sha256) VALUES (:run_id, :sequence, :attachment_id, :policy_set_id,
		:policy_version_id, :scope, :enforcement_mode, :bundle_sha256)`, entries)
	if err != nil {
		return fmt.Errorf("inserting policy snapshot: %w", err)
	}
	return nil
}

func snapshotOf(ctx context.Context, q sqlx.QueryerContext, runID string) ([]SnapshotEntry, error) {
	entries := []SnapshotEntry{}
	err := sqlx.SelectContext(ctx, q, &entries, `SELECT run_id, sequence, attachment_id, policy_set_id, policy_version_id,
		scope, enforcement_mode, bundle_sha256 FROM run_policy_snapshots WHERE run_id = $1 ORDER BY sequence`, runID)
	if err != nil {
		return nil, fmt.Errorf("reading policy snapshot: %w", err)
	}
	return entries, nil
}

// checkColumns reads a check; a running check has no outcome yet.
const checkColumns = `id, organization_id, run_id, attempt_id, status, plan_digest, input_digest, composition_digest,
	COALESCE(outcome, '') AS outcome, configuration_error, attachments, duration_ms, reserved_at, evaluated_at`

const resultColumns = `id, check_id, run_id, sequence, attachment_id, policy_set_id, policy_version_id, scope, enforcement_mode,
	status, error_code, findings, input_digest, result_digest, duration_ms`

// reserveCheck writes a running check bound to c's plan and attempt, with
// as many attachments as the run snapshotted: a new row, or the running
// row of an attempt that was lost after its plan commit. A completed
// check is never reserved again (ErrCheckCompleted).
func reserveCheck(ctx context.Context, q sqlx.ExtContext, c Check) error {
	res, err := q.ExecContext(ctx, `INSERT INTO policy_checks (id, organization_id, run_id, attempt_id, status, plan_digest,
		attachments, duration_ms, reserved_at)
		VALUES ($1, $2, $3, $4, 'running', $5, (SELECT count(*) FROM run_policy_snapshots WHERE run_id = $3), 0, $6)
		ON CONFLICT (id) DO UPDATE SET attempt_id = EXCLUDED.attempt_id, plan_digest = EXCLUDED.plan_digest,
			attachments = EXCLUDED.attachments, reserved_at = EXCLUDED.reserved_at
		WHERE policy_checks.status = 'running' AND policy_checks.run_id = EXCLUDED.run_id`,
		c.ID, c.OrganizationID, c.RunID, c.AttemptID, c.PlanDigest, c.ReservedAt)
	if err != nil {
		return fmt.Errorf("reserving policy check: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrCheckCompleted
	}
	return nil
}

// completeCheck records c's evaluation and results on its running row,
// which must still be bound to c's attempt and plan.
func completeCheck(ctx context.Context, q sqlx.ExtContext, c Check, results []Result) error {
	res, err := q.ExecContext(ctx, `UPDATE policy_checks SET status = 'completed', input_digest = $4, composition_digest = $5,
		outcome = $6, configuration_error = $7, attachments = $8, duration_ms = $9, evaluated_at = $10
		WHERE id = $1 AND status = 'running' AND attempt_id = $2 AND plan_digest = $3`,
		c.ID, c.AttemptID, c.PlanDigest, c.InputDigest, c.CompositionDigest, c.Outcome, c.ConfigurationError, c.Attachments,
		c.DurationMS, c.EvaluatedAt)
	if err != nil {
		return fmt.Errorf("completing policy check: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrEvaluationConflict
	}
	for _, r := range results {
		if _, err := q.ExecContext(ctx, `INSERT INTO policy_results (`+resultColumns+`) VALUES (
			$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
			r.ID, r.CheckID, r.RunID, r.Sequence, r.AttachmentID, r.PolicySetID, r.PolicyVersionID, r.Scope, r.EnforcementMode,
			r.Status, r.ErrorCode, string(r.Findings), r.InputDigest, r.ResultDigest, r.DurationMS); err != nil {
			return fmt.Errorf("inserting policy result: %w", err)
		}
	}
	return nil
}

// checkOfRun reads a run's check, locking it when forUpdate;
// fault.ErrNotFound before its plan commits.
func checkOfRun(ctx context.Context, q sqlx.QueryerContext, runID string, forUpdate bool) (Check, error) {
	query := `SELECT ` + checkColumns + ` FROM policy_checks WHERE run_id = $1`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var c Check
	err := sqlx.GetContext(ctx, q, &c, query, runID)
	if errors.Is(err, sql.ErrNoRows) {
		return Check{}, fault.ErrNotFound
	}
	if err != nil {
		return Check{}, fmt.Errorf("reading policy check: %w", err)
	}
	return c, nil
}

func checkByID(ctx context.Context, q sqlx.QueryerContext, organizationID, checkID string) (Check, error) {
	var c Check
	err := sqlx.GetContext(ctx, q, &c, `SELECT `+checkColumns+` FROM policy_checks WHERE id = $1 AND organization_id = $2`,
		checkID, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return Check{}, fault.ErrNotFound
	}
	if err != nil {
		return Check{}, fmt.Errorf("reading policy check: %w", err)
	}
	return c, nil
}

func resultsOf(ctx context.Context, q sqlx.QueryerContext, checkID string) ([]Result, error) {
	results := []Result{}
	err := sqlx.SelectContext(ctx, q, &results, `SELECT `+resultColumns+` FROM policy_results WHERE check_id = $1 ORDER BY sequence`, checkID)
	if err != nil {
		return nil, fmt.Errorf("reading policy results: %w", err)
	}
	return results, nil
}

const overrideColumns = `id, organization_id, run_id, policy_result_id, plan_digest, policy_version_id, policy_result_digest,
	justification, expires_at, actor_kind, actor_id, request_id, created_at`

func insertOverride(ctx context.Context, q sqlx.ExtContext, o Override) error {
	_, err := sqlx.NamedExecContext(ctx, q, `INSERT INTO policy_overrides (`+overrideColumns+`) VALUES (
		:id, :organization_id, :run_id, :policy_result_id, :plan_digest, :policy_version_id, :policy_result_digest,
		:justification, :expires_at, :actor_kind, :actor_id, :request_id, :created_at)`, o)
	if err != nil {
		return fmt.Errorf("inserting policy override: %w", err)
	}
	return nil
}

// overridesOf lists a run's overrides newest first, at most limit.
func overridesOf(ctx context.Context, q sqlx.QueryerContext, runID string, limit int) ([]Override, error) {
	overrides := []Override{}
	err := sqlx.SelectContext(ctx, q, &overrides, `SELECT `+overrideColumns+` FROM policy_overrides WHERE run_id = $1
		ORDER BY created_at DESC, id DESC LIMIT $2`, runID, limit)
	if err != nil {
		return nil, fmt.Errorf("reading policy overrides: %w", err)
	}
	return overrides, nil
}

// unexpiredOverrides lists the overrides that may still open the gate.
func unexpiredOverrides(ctx context.Context, q sqlx.QueryerContext, runID string, now time.Time) ([]Override, error) {
	overrides := []Override{}
	err := sqlx.SelectContext(ctx, q, &overrides, `SELECT `+overrideColumns+` FROM policy_overrides WHERE run_id = $1
		AND expires_at > $2`, runID, now)
	if err != nil {
		return nil, fmt.Errorf("reading policy overrides: %w", err)
	}
	return overrides, nil
}
