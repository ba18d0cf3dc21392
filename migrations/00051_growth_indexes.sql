-- +goose Up

-- A workspace's unfinished runs, the only ones its queue, its current run,
-- the runs awaiting a decision (read on every state publication) and the
-- organization's capacity counts look at. Ended runs pile up by the
-- hundred thousand while unfinished ones stay a handful, so these reads
-- walk this small index instead of every run the workspace ever had. The
-- predicate lists run.terminalStatuses; a query's own status condition
-- must imply it for the planner to use the index.
CREATE INDEX runs_workspace_unfinished ON runs (workspace_id, created_at, id)
    WHERE status NOT IN ('applied', 'planned_and_finished', 'errored', 'rejected', 'canceled', 'expired', 'recovered',
                         'plan_credentials_required', 'policy_soft_failed');
CREATE INDEX runs_organization_unfinished ON runs (organization_id)
    WHERE status NOT IN ('applied', 'planned_and_finished', 'errored', 'rejected', 'canceled', 'expired', 'recovered',
                         'plan_credentials_required', 'policy_soft_failed');

-- Run tokens are one per attempt; revoking a run's tokens, checking that a
-- run still writes state and deleting a workspace's runs find them by run,
-- and ending an attempt by attempt.
CREATE INDEX run_tokens_run ON run_tokens (run_id);
CREATE INDEX run_tokens_attempt ON run_tokens (attempt_id);

-- How many runs a workspace ever had, which /api/v2 shows on every
-- workspace read (run-count): kept by a trigger, so the read is one row
-- instead of a count over the workspace's whole history, and runs written
-- by the previous release's binaries during an upgrade are counted too.
ALTER TABLE workspaces ADD COLUMN run_count bigint NOT NULL DEFAULT 0;
UPDATE workspaces w SET run_count = c.n
    FROM (SELECT workspace_id, count(*) AS n FROM runs GROUP BY workspace_id) c
    WHERE c.workspace_id = w.id;

-- +goose StatementBegin
CREATE FUNCTION count_workspace_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE workspaces SET run_count = run_count + 1 WHERE id = NEW.workspace_id;
    ELSE
        UPDATE workspaces SET run_count = run_count - 1 WHERE id = OLD.workspace_id;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER runs_counted AFTER INSERT OR DELETE ON runs
    FOR EACH ROW EXECUTE FUNCTION count_workspace_runs();

-- +goose Down

DROP TRIGGER runs_counted ON runs;
DROP FUNCTION count_workspace_runs();
ALTER TABLE workspaces DROP COLUMN run_count;

DROP INDEX run_tokens_attempt;
DROP INDEX run_tokens_run;
DROP INDEX runs_organization_unfinished;
DROP INDEX runs_workspace_unfinished;
