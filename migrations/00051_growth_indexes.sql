-- +goose NO TRANSACTION
-- +goose Up

-- Built CONCURRENTLY, outside a transaction, because migrations run while
-- the previous release's binaries keep serving (docs/operating/upgrades.md):
-- a plain CREATE INDEX on runs would stop every run write for the whole
-- build and, held to the end of a transaction, deadlock with run creation,
-- which locks its workspace before it writes runs. Each index is dropped
-- first: a build that failed halfway leaves an invalid index behind, which
-- IF NOT EXISTS would keep.

-- A workspace's unfinished runs, the only ones its queue, its current run,
-- the runs awaiting a decision (read on every state publication) and the
-- organization's capacity counts look at. Ended runs pile up by the
-- hundred thousand while unfinished ones stay a handful, so these reads
-- walk this small index instead of every run the workspace ever had. The
-- predicate lists run.terminalStatuses; a query's own status condition
-- must imply it for the planner to use the index.
DROP INDEX CONCURRENTLY IF EXISTS runs_workspace_unfinished;
CREATE INDEX CONCURRENTLY runs_workspace_unfinished ON runs (workspace_id, created_at, id)
    WHERE status NOT IN ('applied', 'planned_and_finished', 'errored', 'rejected', 'canceled', 'expired', 'recovered',
                         'plan_credentials_required', 'policy_soft_failed');
DROP INDEX CONCURRENTLY IF EXISTS runs_organization_unfinished;
CREATE INDEX CONCURRENTLY runs_organization_unfinished ON runs (organization_id)
    WHERE status NOT IN ('applied', 'planned_and_finished', 'errored', 'rejected', 'canceled', 'expired', 'recovered',
                         'plan_credentials_required', 'policy_soft_failed');

-- Run tokens are one per attempt; revoking a run's tokens, checking that a
-- run still writes state and deleting a workspace's runs find them by run,
-- and ending an attempt by attempt.
DROP INDEX CONCURRENTLY IF EXISTS run_tokens_run;
CREATE INDEX CONCURRENTLY run_tokens_run ON run_tokens (run_id);
DROP INDEX CONCURRENTLY IF EXISTS run_tokens_attempt;
CREATE INDEX CONCURRENTLY run_tokens_attempt ON run_tokens (attempt_id);

-- +goose Down

DROP INDEX CONCURRENTLY IF EXISTS run_tokens_attempt;
DROP INDEX CONCURRENTLY IF EXISTS run_tokens_run;
DROP INDEX CONCURRENTLY IF EXISTS runs_organization_unfinished;
DROP INDEX CONCURRENTLY IF EXISTS runs_workspace_unfinished;
