package run

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/workspace"
)

const configurationColumns = `id, organization_id, workspace_id, status, source, speculative, auto_queue_runs, error_code,
	blob_key, size_bytes, sha256, lock_file_sha256, entries, expanded_bytes, created_by_kind, created_by_id, created_by_agent, created_at, uploaded_at,
	provisional, current_since, archived_at`

func insertConfigurationVersion(ctx context.Context, q sqlx.ExtContext, cv ConfigurationVersion) error {
	_, err := sqlx.NamedExecContext(ctx, q, `INSERT INTO configuration_versions (`+configurationColumns+`) VALUES (
		:id, :organization_id, :workspace_id, :status, :source, :speculative, :auto_queue_runs, :error_code,
		:blob_key, :size_bytes, :sha256, :lock_file_sha256, :entries, :expanded_bytes, :created_by_kind, :created_by_id, :created_by_agent, :created_at, :uploaded_at,
		:provisional, :current_since, :archived_at)`, cv)
	if err != nil {
		return fmt.Errorf("inserting configuration version: %w", err)
	}
	return nil
}

// configurationVersionByID reads a version of an organization; an empty
// organization reads by ID alone (capability uploads, the runner).
func configurationVersionByID(ctx context.Context, q sqlx.QueryerContext, organizationID, cvID string) (ConfigurationVersion, error) {
	var cv ConfigurationVersion
	err := sqlx.GetContext(ctx, q, &cv, `SELECT `+configurationColumns+` FROM configuration_versions
		WHERE id = $1 AND ($2 = '' OR organization_id = $2)`, cvID, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return ConfigurationVersion{}, fault.ErrNotFound
	}
	if err != nil {
		return ConfigurationVersion{}, fmt.Errorf("reading configuration version: %w", err)
	}
	return cv, nil
}

func listConfigurationVersions(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string, number, size int) ([]ConfigurationVersion, int, error) {
	var total int
	if err := sqlx.GetContext(ctx, q, &total, `SELECT count(*) FROM configuration_versions
		WHERE organization_id = $1 AND workspace_id = $2`, organizationID, workspaceID); err != nil {
		return nil, 0, fmt.Errorf("counting configuration versions: %w", err)
	}
	var out []ConfigurationVersion
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT `+configurationColumns+` FROM configuration_versions
		WHERE organization_id = $1 AND workspace_id = $2 ORDER BY created_at DESC, id DESC LIMIT $3 OFFSET $4`,
		organizationID, workspaceID, size, (number-1)*size); err != nil {
		return nil, 0, fmt.Errorf("listing configuration versions: %w", err)
	}
	return out, total, nil
}

// currentConfiguration is the newest version that became current and is
// the workspace's own: a speculative version (the CLI's plan) and a pull
// request's (a fork's or a branch's code nobody merged) are proposals,
// never what a run without a named version (a run trigger's, a person's
// "start run") plans with the workspace's credentials and applies.
func currentConfiguration(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) (*ConfigurationVersion, error) {
	var cv ConfigurationVersion
	err := sqlx.GetContext(ctx, q, &cv, `SELECT `+configurationColumns+` FROM configuration_versions cv
		WHERE organization_id = $1 AND workspace_id = $2 AND current_since IS NOT NULL AND NOT speculative
		AND NOT EXISTS (SELECT 1 FROM source_ingestions si
			WHERE si.configuration_version_id = cv.id AND si.trigger = 'pull_request')
		ORDER BY current_since DESC, created_at DESC, id DESC LIMIT 1`, organizationID, workspaceID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading current configuration version: %w", err)
	}
	return &cv, nil
}

// promoteConfiguration makes a provisional version current the first time
// a run uses it.
func promoteConfiguration(ctx context.Context, q sqlx.ExecerContext, cvID string, now time.Time) error {
	if _, err := q.ExecContext(ctx, `UPDATE configuration_versions SET current_since = $2
		WHERE id = $1 AND current_since IS NULL`, cvID, now); err != nil {
		return fmt.Errorf("promoting configuration version: %w", err)
	}
	return nil
}

// finishConfigurationVersion moves a pending version to its final status;
// the row guard (and a trigger) keep a finished version immutable.
func finishConfigurationVersion(ctx context.Context, q sqlx.ExtContext, cv ConfigurationVersion) error {
	res, err := q.ExecContext(ctx, `UPDATE configuration_versions SET status = $2, error_code = $3, blob_key = $4,
		size_bytes = $5, sha256 = $6, lock_file_sha256 = $7, entries = $8, expanded_bytes = $9, uploaded_at = $10
		WHERE id = $1 AND status = 'pending'`,
		cv.ID, cv.Status, cv.ErrorCode, cv.BlobKey, cv.SizeBytes, cv.SHA256, cv.LockFileSHA256, cv.Entries, cv.ExpandedBytes, cv.UploadedAt)
	if err != nil {
		return fmt.Errorf("finishing configuration version: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConfigurationUploaded
	}
	return nil
}

// runColumns read a run; its input snapshot comes without the variable
// references (variableRefs reads those), from the copy that leaves them
// out where the run has one (migration 00058). A workspace with twenty
// variable sets of a hundred variables pins 2,100 references, about 700
// KB of the snapshot, and only the resolution of a phase's inputs uses
// them: a review, a list page and each transition's locked read carried
// them all.
const runColumns = `id, organization_id, project_id, workspace_id, kind, status, message, source, auto_apply, is_destroy,
	configuration_version_id, configuration_digest, dependency_lock_digest,
	coalesce(input_snapshot_without_variables, input_snapshot - 'variables') AS input_snapshot, input_snapshot_digest,
	settings_version, tool_version, region, platform, runner_release, created_by_kind, created_by_id, plan_status,
	apply_status, has_changes, resource_additions, resource_changes, resource_destructions, plan_digest,
	predecessor_state_version_id, policy_outcome, policy_result_digest, policy_gate_until, policy_snapshot_error, credential_snapshot_error, approval_deadline, approved_binding, decision_action,
	decision_actor_kind, decision_actor_id, decided_at, decision_reason, terminal_reason, state_version_id, status_timestamps,
	log_truncated, created_at, updated_at, force_canceled_at, target_addrs, replace_addrs, refresh, refresh_only, allow_empty_apply,
	save_plan, run_variables, initiator, untrusted_reason, released_run_id, released_by_kind, released_by_id, released_at,
	released_from_run_id, triggered_by_run_id`

func insertRun(ctx context.Context, q sqlx.ExtContext, r Run) error {
	_, err := q.ExecContext(ctx, `INSERT INTO runs (id, organization_id, project_id, workspace_id, kind, status, message,
		source, configuration_version_id, configuration_digest, dependency_lock_digest, input_snapshot, input_snapshot_digest,
		settings_version, tool_version, region, platform, runner_release, created_by_kind, created_by_id, status_timestamps,
		created_at, updated_at, credential_snapshot_error, target_addrs, replace_addrs, refresh, refresh_only, allow_empty_apply,
		save_plan, run_variables, initiator, untrusted_reason, released_from_run_id, triggered_by_run_id,
		input_snapshot_without_variables)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $22, $23,
		$24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $12::jsonb - 'variables')`,
		r.ID, r.OrganizationID, r.ProjectID, r.WorkspaceID, r.Kind, r.Status, r.Message, r.Source, r.ConfigurationVersionID,
		r.ConfigurationDigest, r.DependencyLockDigest, string(r.InputSnapshot), r.InputSnapshotDigest, r.SettingsVersion,
		r.ToolVersion, r.Region, r.Platform, r.RunnerRelease, r.CreatedByKind, r.CreatedByID, r.StatusTimestamps, r.CreatedAt,
		r.CredentialSnapshotError, pqStrings(r.TargetAddrs), pqStrings(r.ReplaceAddrs), r.Refresh, r.RefreshOnly,
		r.AllowEmptyApply, r.SavePlan, r.Variables, r.Initiator, r.UntrustedReason, r.ReleasedFromRunID, r.TriggeredByRunID)
	if err != nil {
		return fmt.Errorf("inserting run: %w", err)
	}
	return nil
}

// variableRefs reads the variable references a run's input snapshot
// pinned.
func variableRefs(ctx context.Context, q sqlx.QueryerContext, organizationID, runID string) ([]workspace.VariableRef, error) {
	var raw []byte
	err := sqlx.GetContext(ctx, q, &raw, `SELECT coalesce(input_snapshot->'variables', 'null') FROM runs
		WHERE id = $1 AND organization_id = $2`, runID, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fault.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading variable references: %w", err)
	}
	var refs []workspace.VariableRef
	if err := json.Unmarshal(raw, &refs); err != nil {
		return nil, fmt.Errorf("decoding variable references: %w", err)
	}
	return refs, nil
}

// transitionLock is the row lock a transition of a run or an attempt
// holds until it commits. It excludes every other transition and a
// deletion as FOR UPDATE would, but not the key-share lock PostgreSQL
// takes on the row for an insert that references it: a phase's log
// chunks, artifacts and tokens are written while a commit of the same run
// is in flight (the policy log while the plan commits), and under FOR
// UPDATE each such insert waited for that commit.
const transitionLock = `FOR NO KEY UPDATE`

// runByID reads a run of an organization (any organization when empty);
// forUpdate takes the row lock every transition holds (transitionLock).
func runByID(ctx context.Context, q sqlx.QueryerContext, organizationID, runID string, forUpdate bool) (Run, error) {
	query := `SELECT ` + runColumns + ` FROM runs WHERE id = $1 AND ($2 = '' OR organization_id = $2)`
	if forUpdate {
		query += ` ` + transitionLock
	}
	var r Run
	err := sqlx.GetContext(ctx, q, &r, query, runID, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fault.ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("reading run: %w", err)
	}
	return r, nil
}

// runOfAttemptForUpdate reads and locks the run an attempt belongs to, in
// one statement.
func runOfAttemptForUpdate(ctx context.Context, q sqlx.QueryerContext, attemptID string) (Run, error) {
	var r Run
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+runColumns+` FROM runs
		WHERE id = (SELECT run_id FROM run_attempts WHERE id = $1) `+transitionLock, attemptID)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fault.ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("reading run of attempt: %w", err)
	}
	return r, nil
}

// saveRun writes every mutable column of a run.
func saveRun(ctx context.Context, q sqlx.ExtContext, r Run) error {
	_, err := q.ExecContext(ctx, `UPDATE runs SET status = $2, plan_status = $3, apply_status = $4, has_changes = $5,
		resource_additions = $6, resource_changes = $7, resource_destructions = $8, plan_digest = $9,
		predecessor_state_version_id = $10, policy_outcome = $11, policy_result_digest = $12, approval_deadline = $13,
		decision_action = $14, decision_actor_kind = $15, decision_actor_id = $16, decided_at = $17, terminal_reason = $18,
		state_version_id = $19, status_timestamps = $20, updated_at = $21, policy_gate_until = $22, policy_snapshot_error = $23,
		approved_binding = $24, decision_reason = $25, force_canceled_at = $26 WHERE id = $1`,
		r.ID, r.Status, r.PlanStatus, r.ApplyStatus, r.HasChanges, r.ResourceAdditions, r.ResourceChanges,
		r.ResourceDestructions, r.PlanDigest, r.PredecessorStateVersionID, r.PolicyOutcome, r.PolicyResultDigest,
		r.ApprovalDeadline, r.DecisionAction, r.DecisionActorKind, r.DecisionActorID, r.DecidedAt, r.TerminalReason,
		r.StateVersionID, r.StatusTimestamps, r.UpdatedAt, r.PolicyGateUntil, r.PolicySnapshotError, r.ApprovedBinding,
		r.DecisionReason, r.ForceCanceledAt)
	if err != nil {
		return fmt.Errorf("writing run: %w", err)
	}
	return nil
}

// saveRelease records that a person released the run as another: the
// release columns are written once, never by saveRun.
func saveRelease(ctx context.Context, q sqlx.ExecerContext, r Run) error {
	res, err := q.ExecContext(ctx, `UPDATE runs SET released_run_id = $2, released_by_kind = $3, released_by_id = $4,
		released_at = $5, updated_at = $5 WHERE id = $1 AND released_run_id IS NULL`,
		r.ID, r.ReleasedRunID, r.ReleasedByKind, r.ReleasedByID, r.ReleasedAt)
	if err != nil {
		return fmt.Errorf("recording run release: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return errors.Join(ErrAlreadyReleased, err)
	}
	return nil
}

// RunFilter narrows a run list.
type RunFilter struct {
	WorkspaceID string
	// Statuses, when set, keeps runs in one of these statuses.
	Statuses []string
	// WorkspaceNames, when set, keeps runs of workspaces with one of these
	// remote-backend names (compared case-insensitively).
	WorkspaceNames []string
	// Kinds, when set, keeps runs of one of these kinds.
	Kinds []string
	// SavedPlans narrows the awaiting_approval runs Statuses keeps:
	// SavedPlansOnly keeps only saved plans, SavedPlansExcluded only the
	// others; the zero value keeps both.
	SavedPlans SavedPlanFilter
	// Nothing matches: a filter named only values no run can have.
	Nothing bool
}

// SavedPlanFilter says which awaiting_approval runs a RunFilter keeps.
type SavedPlanFilter string

const (
	SavedPlansAny      SavedPlanFilter = ""
	SavedPlansOnly     SavedPlanFilter = "only"
	SavedPlansExcluded SavedPlanFilter = "excluded"
)

// listRuns reads one page of an organization's runs. Only the conditions
// that apply are written into the statement: each combination is then its
// own prepared statement whose cached generic plan fits it (a workspace's
// runs walk the workspace's index), where "($2 = ” OR workspace_id = $2)"
// would leave one generic plan for all of them that walks every run of
// the organization to find one rare workspace's.
func listRuns(ctx context.Context, q sqlx.QueryerContext, organizationID string, f RunFilter, boundary boundary, page cursor.Page) ([]Run, error) {
	where, args := `organization_id = $1`, []any{organizationID}
	add := func(cond string, value any) {
		args = append(args, value)
		where += fmt.Sprintf(" AND "+cond, len(args))
	}
	if f.WorkspaceID != "" {
		add("workspace_id = $%d", f.WorkspaceID)
	}
	if boundary.projectID != "" {
		add("project_id = $%d", boundary.projectID)
	}
	if boundary.workspaceID != "" {
		add("workspace_id = $%d", boundary.workspaceID)
	}
	if len(f.Statuses) > 0 {
		add("status = ANY($%d::text[])", pqStrings(f.Statuses))
	}
	if !boundary.scope.All {
		args = append(args, pqStrings(boundary.scope.WorkspaceIDs), pqStrings(boundary.scope.ProjectIDs))
		where += fmt.Sprintf(" AND (workspace_id = ANY($%d::text[]) OR project_id = ANY($%d::text[]))", len(args)-1, len(args))
	}
	keyset, args := page.Keyset(args, "created_at", "id")
	if one := cmp.Or(f.WorkspaceID, boundary.workspaceID); one != "" && len(f.Statuses) == 0 {
		// One workspace's page is picked from its index alone (an
		// index-only scan) before its rows are read. A cached generic plan
		// assumes every workspace has the average few runs and reads them
		// all with a bitmap scan and a sort, which for a workspace with
		// tens of thousands is a scan of its history on every page. The
		// remaining conditions hold for all of one workspace's runs or
		// for none (its project, the caller's scope and organization), so
		// applying them to the picked page changes no answer.
		// Each picked run is then read by its primary key (a lateral
		// subquery the LIMIT keeps the planner from flattening): joined
		// plainly, the planner may read the whole workspace and probe the
		// picked ids, as it judges a workspace by the average one.
		args = append(args, one)
		query := fmt.Sprintf(`SELECT r.* FROM (SELECT id FROM runs WHERE workspace_id = $%d`, len(args)) + keyset +
			page.OrderLimit("created_at", "id") + `) picked, LATERAL (SELECT ` + runColumns + ` FROM runs
			WHERE id = picked.id AND ` + where + ` LIMIT 1) r ORDER BY r.created_at DESC, r.id DESC`
		var out []Run
		if err := sqlx.SelectContext(ctx, q, &out, query, args...); err != nil {
			return nil, fmt.Errorf("listing runs: %w", err)
		}
		return out, nil
	}
	query := `SELECT ` + runColumns + ` FROM runs WHERE ` + where + keyset + page.OrderLimit("created_at", "id")
	var out []Run
	if err := sqlx.SelectContext(ctx, q, &out, query, args...); err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	return out, nil
}

// nextQueuedRun is the oldest pending run of a workspace that may start
// now that nothing holds the workspace queue.
func nextPendingRun(ctx context.Context, tx *sqlx.Tx, workspaceID string) (*Run, error) {
	var r Run
	err := tx.GetContext(ctx, &r, `SELECT `+runColumns+` FROM runs WHERE workspace_id = $1 AND status = 'pending'
		ORDER BY created_at, id LIMIT 1 `+transitionLock, workspaceID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading next pending run: %w", err)
	}
	return &r, nil
}

// unappliedSavedPlan matches a saved plan that was not applied: it holds
// neither the workspace queue nor the current-run place until then.
const unappliedSavedPlan = `(save_plan AND status IN ('pending', 'plan_queued', 'planning', 'awaiting_approval', 'policy_override'))`

// queueHeld reports whether a non-speculative run other than exceptID holds
// the workspace's run queue.
func queueHeld(ctx context.Context, q sqlx.QueryerContext, workspaceID, exceptID string) (bool, error) {
	var held bool
	err := sqlx.GetContext(ctx, q, &held, `SELECT EXISTS (SELECT 1 FROM runs WHERE workspace_id = $1 AND id <> $2
		AND kind <> 'speculative' AND NOT `+unappliedSavedPlan+` AND status NOT IN (`+terminalList()+`, 'pending'))`, workspaceID, exceptID)
	if err != nil {
		return false, fmt.Errorf("reading workspace queue: %w", err)
	}
	return held, nil
}

// unfinishedRuns reads the unfinished non-speculative runs of workspaces
// in queue order (oldest first); forUpdate locks them in that order.
func unfinishedRuns(ctx context.Context, q sqlx.QueryerContext, workspaceIDs []string, forUpdate bool) ([]Run, error) {
	query := `SELECT ` + runColumns + ` FROM runs WHERE workspace_id = ANY($1::text[]) AND kind <> 'speculative'
		AND status NOT IN (` + terminalList() + `) ORDER BY created_at, id`
	if forUpdate {
		query += ` ` + transitionLock
	}
	var out []Run
	if err := sqlx.SelectContext(ctx, q, &out, query, pqStrings(workspaceIDs)); err != nil {
		return nil, fmt.Errorf("reading the workspace queue: %w", err)
	}
	return out, nil
}

// connectionLostBefore reports whether a plan attempt of the run other
// than attemptID ended on a lost connection.
func connectionLostBefore(ctx context.Context, q sqlx.QueryerContext, runID, attemptID string) (bool, error) {
	var lost bool
	err := sqlx.GetContext(ctx, q, &lost, `SELECT EXISTS (SELECT 1 FROM run_attempts WHERE run_id = $1 AND id <> $2
		AND phase = 'plan' AND terminal_classification = $3)`, runID, attemptID, FailureConnectionLost)
	if err != nil {
		return false, fmt.Errorf("reading the run's earlier attempts: %w", err)
	}
	return lost, nil
}

// awaitingDecision locks, oldest first, a workspace's runs whose plan
// waits for a decision (an approval or a policy override).
func awaitingDecision(ctx context.Context, tx *sqlx.Tx, organizationID, workspaceID string) ([]Run, error) {
	var out []Run
	err := sqlx.SelectContext(ctx, tx, &out, `SELECT `+runColumns+` FROM runs WHERE organization_id = $1 AND workspace_id = $2
		AND kind <> 'speculative' AND status IN ('awaiting_approval', 'policy_override') ORDER BY created_at, id `+transitionLock,
		organizationID, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("reading the runs awaiting a decision: %w", err)
	}
	return out, nil
}

func countUnfinished(ctx context.Context, q sqlx.QueryerContext, workspaceID string) (int, error) {
	var n int
	err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM runs WHERE workspace_id = $1 AND status NOT IN (`+terminalList()+`)`, workspaceID)
	if err != nil {
		return 0, fmt.Errorf("counting unfinished runs: %w", err)
	}
	return n, nil
}

// hasOutboundTriggers reports whether a run trigger names the workspace
// as its source.
func hasOutboundTriggers(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) (bool, error) {
	var found bool
	err := sqlx.GetContext(ctx, q, &found, `SELECT EXISTS (SELECT 1 FROM run_triggers
		WHERE organization_id = $1 AND source_workspace_id = $2)`, organizationID, workspaceID)
	if err != nil {
		return false, fmt.Errorf("reading run triggers: %w", err)
	}
	return found, nil
}

// TriggeredRun is the run a trigger already created in a workspace for a
// source run, or nil.
func TriggeredRun(ctx context.Context, q sqlx.QueryerContext, workspaceID, sourceRunID string) (*string, error) {
	var id string
	err := sqlx.GetContext(ctx, q, &id, `SELECT id FROM runs WHERE triggered_by_run_id = $1 AND workspace_id = $2`,
		sourceRunID, workspaceID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading triggered run: %w", err)
	}
	return &id, nil
}

// currentRun is the workspace's newest non-terminal run.
func currentRun(ctx context.Context, q sqlx.QueryerContext, workspaceID string) (*Run, error) {
	var r Run
	// Picked by ID, then read: runColumns compute the input snapshot they
	// return, so they do not name the columns of a subquery's output.
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+runColumns+` FROM runs WHERE id = (`+newestUnfinished("id", "$1")+`)`, workspaceID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading current run: %w", err)
	}
	return &r, nil
}

// currentRuns returns the current run of each of the organization's
// workspaces in workspaceIDs that has one, by workspace ID: the same rule as
// currentRun, in one query for a page of workspaces.
func currentRuns(ctx context.Context, q sqlx.QueryerContext, organizationID string, workspaceIDs []string) (map[string]Run, error) {
	var rows []Run
	err := sqlx.SelectContext(ctx, q, &rows, `SELECT DISTINCT ON (workspace_id) `+runColumns+` FROM runs
		WHERE organization_id = $1 AND workspace_id = ANY($2) AND status NOT IN (`+terminalList()+`) AND NOT `+unappliedSavedPlan+`
		ORDER BY workspace_id, created_at DESC, id DESC`, organizationID, pq.Array(workspaceIDs))
	if err != nil {
		return nil, fmt.Errorf("reading current runs: %w", err)
	}
	out := make(map[string]Run, len(rows))
	for _, r := range rows {
		out[r.WorkspaceID] = r
	}
	return out, nil
}

// CurrentRunLateral is the subquery, for a LEFT JOIN LATERAL, that selects
// the id and status of the current run of the workspace whose ID is the
// SQL expression workspaceID: the run currentRuns reads, found through
// the index of unfinished runs.
func CurrentRunLateral(workspaceID string) string {
	return newestUnfinished("id, status", workspaceID)
}

// newestUnfinished selects columns of the current run of the workspace
// whose ID is the SQL expression workspaceID: its newest unfinished run
// that holds the place. The workspace's unfinished runs are read whole,
// behind an OFFSET 0 fence, and sorted after: planned under the LIMIT, a
// prepared statement's plan could settle on the workspace's newest-first
// index of all its runs, expecting an unfinished one within a few rows, and
// in a workspace with a long ended history read all of it (20,000 runs,
// 7 ms, in every /api/v2 workspace read of the growth bench). Read whole,
// the index of unfinished runs is always the cheaper path, and a
// workspace's queue is a handful of runs.
func newestUnfinished(columns, workspaceID string) string {
	return `SELECT ` + columns + ` FROM (SELECT ` + columns + `, created_at AS newest_at, id AS newest_id FROM runs
		WHERE workspace_id = ` + workspaceID + ` AND status NOT IN (` + terminalList() + `) AND NOT ` + unappliedSavedPlan + `
		OFFSET 0) unfinished ORDER BY newest_at DESC, newest_id DESC LIMIT 1`
}

func terminalList() string {
	out := ""
	for i, s := range terminalStatuses {
		if i > 0 {
			out += ", "
		}
		out += "'" + string(s) + "'"
	}
	return out
}

const attemptColumns = `id, organization_id, run_id, phase, attempt, status, region, sandbox_driver, sandbox_id,
	sandbox_name, sandbox_profile, worker_identity, worker_id, exit_code, terminal_classification, timings, queued_at, started_at,
	heartbeat_at, finished_at`

func insertAttempt(ctx context.Context, q sqlx.ExtContext, a Attempt) error {
	_, err := q.ExecContext(ctx, `INSERT INTO run_attempts (id, organization_id, run_id, phase, attempt, status, region, queued_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, a.ID, a.OrganizationID, a.RunID, a.Phase, a.Number, a.Status, a.Region, a.QueuedAt)
	if err != nil {
		return fmt.Errorf("inserting attempt: %w", err)
	}
	return nil
}

func attemptByID(ctx context.Context, q sqlx.QueryerContext, attemptID string, forUpdate bool) (Attempt, error) {
	query := `SELECT ` + attemptColumns + ` FROM run_attempts WHERE id = $1`
	if forUpdate {
		query += ` ` + transitionLock
	}
	var a Attempt
	err := sqlx.GetContext(ctx, q, &a, query, attemptID)
	if errors.Is(err, sql.ErrNoRows) {
		return Attempt{}, fault.ErrNotFound
	}
	if err != nil {
		return Attempt{}, fmt.Errorf("reading attempt: %w", err)
	}
	return a, nil
}

func attemptsOf(ctx context.Context, q sqlx.QueryerContext, runID string) ([]Attempt, error) {
	var out []Attempt
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT `+attemptColumns+` FROM run_attempts WHERE run_id = $1
		ORDER BY queued_at, phase DESC, attempt`, runID); err != nil {
		return nil, fmt.Errorf("listing attempts: %w", err)
	}
	return out, nil
}

func saveAttempt(ctx context.Context, q sqlx.ExtContext, a Attempt) error {
	_, err := q.ExecContext(ctx, `UPDATE run_attempts SET status = $2, sandbox_driver = $3, sandbox_id = $4, sandbox_name = $5,
		worker_id = $6, exit_code = $7, terminal_classification = $8, timings = $9, started_at = $10, heartbeat_at = $11,
		finished_at = $12 WHERE id = $1`,
		a.ID, a.Status, a.SandboxDriver, a.SandboxID, a.SandboxName, a.WorkerID, a.ExitCode, a.TerminalClassification,
		a.Timings, a.StartedAt, a.HeartbeatAt, a.FinishedAt)
	if err != nil {
		return fmt.Errorf("writing attempt: %w", err)
	}
	return nil
}

// releaseLease ends an attempt's capacity lease with the attempt.
func releaseLease(ctx context.Context, q sqlx.ExtContext, attemptID string) error {
	return launch.ReleaseLease(ctx, q, launch.LeaseHolder{AttemptID: attemptID})
}

// Artifact is a sealed run artifact's metadata.
type Artifact struct {
	ID             string    `db:"id"`
	OrganizationID string    `db:"organization_id"`
	RunID          string    `db:"run_id"`
	AttemptID      string    `db:"attempt_id"`
	Kind           string    `db:"kind"`
	BlobKey        string    `db:"blob_key"`
	SizeBytes      int64     `db:"size_bytes"`
	SHA256         []byte    `db:"sha256"`
	CreatedAt      time.Time `db:"created_at"`
}

// Artifact kinds.
const (
	ArtifactPlanFile       = "plan_file"
	ArtifactPlanJSON       = "plan_json"
	ArtifactPlanDiff       = "plan_diff"
	ArtifactEmergencyState = "emergency_state"
	// ArtifactPlanJSONRedacted is a saved plan's JSON without anything
	// sensitive, with the provider schemas its rendering needs: what `tofu
	// show` of a saved cloud plan reads.
	ArtifactPlanJSONRedacted = "plan_json_redacted"
)

// MaxPlanJSONBytes bounds a plan's JSON export (SPEC §8: 100 MB), the
// plan_json artifact and the redacted one served to the CLI.
const MaxPlanJSONBytes = 100_000_000

// kindLimits are the size limits an artifact kind carries whatever the
// caller asks for: a plan JSON over its limit is refused when stored, so it
// can never be exported.
var kindLimits = map[string]int64{ArtifactPlanJSON: MaxPlanJSONBytes, ArtifactPlanJSONRedacted: MaxPlanJSONBytes}

func insertArtifact(ctx context.Context, q sqlx.ExtContext, a Artifact) error {
	return insertArtifacts(ctx, q, []Artifact{a})
}

// insertArtifacts writes a phase's artifacts in one statement.
func insertArtifacts(ctx context.Context, q sqlx.ExtContext, arts []Artifact) error {
	if len(arts) == 0 {
		return nil
	}
	_, err := sqlx.NamedExecContext(ctx, q, `INSERT INTO run_artifacts (id, organization_id, run_id, attempt_id, kind, blob_key,
		size_bytes, sha256, created_at) VALUES (:id, :organization_id, :run_id, :attempt_id, :kind, :blob_key, :size_bytes, :sha256, :created_at)`, arts)
	if err != nil {
		return fmt.Errorf("inserting artifacts: %w", err)
	}
	return nil
}

// deletePlanArtifacts deletes the rows of a run's plan evidence that an
// earlier attempt committed and returns them, so the caller deletes their
// objects once the deletion committed.
func deletePlanArtifacts(ctx context.Context, q sqlx.QueryerContext, runID string) ([]Artifact, error) {
	arts := []Artifact{}
	err := sqlx.SelectContext(ctx, q, &arts, `DELETE FROM run_artifacts WHERE run_id = $1 AND kind = ANY($2)
		RETURNING id, organization_id, run_id, attempt_id, kind, blob_key, size_bytes, sha256, created_at`,
		runID, pq.Array([]string{ArtifactPlanFile, ArtifactPlanJSON, ArtifactPlanDiff, ArtifactPlanJSONRedacted}))
	if err != nil {
		return nil, fmt.Errorf("deleting superseded plan artifacts: %w", err)
	}
	return arts, nil
}

func artifactOf(ctx context.Context, q sqlx.QueryerContext, runID, kind string) (Artifact, error) {
	var a Artifact
	err := sqlx.GetContext(ctx, q, &a, `SELECT id, organization_id, run_id, attempt_id, kind, blob_key, size_bytes, sha256, created_at
		FROM run_artifacts WHERE run_id = $1 AND kind = $2`, runID, kind)
	if errors.Is(err, sql.ErrNoRows) {
		return Artifact{}, ErrArtifactUnavailable
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("reading artifact: %w", err)
	}
	return a, nil
}

func decodeHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

// stateRef names a workspace's current finalized state; ID is nil before
// the first.
type stateRef struct {
	ID     *string `db:"id"`
	SHA256 []byte  `db:"sha256"`
}

func currentState(ctx context.Context, q sqlx.QueryerContext, workspaceID string) (stateRef, error) {
	var ref stateRef
	err := sqlx.GetContext(ctx, q, &ref, `SELECT id, sha256 FROM state_versions WHERE workspace_id = $1 AND status = 'finalized'
		ORDER BY number DESC LIMIT 1`, workspaceID)
	switch {
	case isNoRows(err):
		// sqlx allocates pointer fields before it learns there is no row.
		return stateRef{}, nil
	case err != nil:
		return stateRef{}, fmt.Errorf("reading current state: %w", err)
	}
	return ref, nil
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

func insertComment(ctx context.Context, q sqlx.ExtContext, c Comment) error {
	if _, err := q.ExecContext(ctx, `INSERT INTO run_comments (id, organization_id, run_id, body, actor_kind, actor_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, c.ID, c.OrganizationID, c.RunID, c.Body, c.ActorKind, c.ActorID, c.CreatedAt); err != nil {
		return fmt.Errorf("inserting comment: %w", err)
	}
	// The comment is also an entry of the run's history.
	if _, err := q.ExecContext(ctx, `INSERT INTO run_events (id, organization_id, run_id, action, actor_kind, actor_id, comment_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, id.New("rev"), c.OrganizationID, c.RunID, EventCommented, c.ActorKind, c.ActorID, c.ID); err != nil {
		return fmt.Errorf("recording comment event: %w", err)
	}
	return nil
}

const commentColumns = `id, organization_id, run_id, body, actor_kind, actor_id, created_at`

func commentsOf(ctx context.Context, q sqlx.QueryerContext, runID string) ([]Comment, error) {
	var out []Comment
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT `+commentColumns+` FROM run_comments WHERE run_id = $1
		ORDER BY created_at, id LIMIT $2`, runID, maxRunEvents); err != nil {
		return nil, fmt.Errorf("listing comments: %w", err)
	}
	return out, nil
}

func commentByID(ctx context.Context, q sqlx.QueryerContext, commentID string) (Comment, error) {
	var c Comment
	err := sqlx.GetContext(ctx, q, &c, `SELECT `+commentColumns+` FROM run_comments WHERE id = $1`, commentID)
	if isNoRows(err) {
		return Comment{}, fault.ErrNotFound
	}
	if err != nil {
		return Comment{}, fmt.Errorf("reading comment: %w", err)
	}
	return c, nil
}

func commentsByID(ctx context.Context, q sqlx.QueryerContext, organizationID string, ids []string) (map[string]Comment, error) {
	var rows []Comment
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT `+commentColumns+` FROM run_comments
		WHERE organization_id = $1 AND id = ANY($2::text[])`, organizationID, pqStrings(ids)); err != nil {
		return nil, fmt.Errorf("reading comments: %w", err)
	}
	out := make(map[string]Comment, len(rows))
	for _, c := range rows {
		out[c.ID] = c
	}
	return out, nil
}

const eventColumns = `id, organization_id, run_id, action, actor_kind, actor_id, comment_id, created_at`

func eventsOf(ctx context.Context, q sqlx.QueryerContext, runID string) ([]Event, error) {
	var out []Event
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT `+eventColumns+` FROM run_events WHERE run_id = $1
		ORDER BY created_at, id LIMIT $2`, runID, maxRunEvents); err != nil {
		return nil, fmt.Errorf("listing run events: %w", err)
	}
	return out, nil
}

func eventByID(ctx context.Context, q sqlx.QueryerContext, eventID string) (Event, error) {
	var e Event
	err := sqlx.GetContext(ctx, q, &e, `SELECT `+eventColumns+` FROM run_events WHERE id = $1`, eventID)
	if isNoRows(err) {
		return Event{}, fault.ErrNotFound
	}
	if err != nil {
		return Event{}, fmt.Errorf("reading run event: %w", err)
	}
	return e, nil
}

// insertLogChunk stores one masked chunk of a phase's log.
func insertLogChunk(ctx context.Context, q sqlx.ExecerContext, runID string, sequence int64, phase, body string) error {
	if _, err := q.ExecContext(ctx, `INSERT INTO run_log_chunks (run_id, sequence, phase, body) VALUES ($1, $2, $3, $4)`,
		runID, sequence, phase, body); err != nil {
		return fmt.Errorf("storing log chunk: %w", err)
	}
	return nil
}
