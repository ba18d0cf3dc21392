-- +goose NO TRANSACTION
-- +goose Up

-- The organization's unfinished runs, keyed by workspace as well. With
-- runs_organization_unfinished keyed by organization alone, a read of one
-- workspace's unfinished runs that also names the organization (the runs
-- awaiting a decision, read on every state publication) could be planned
-- on that index: when the organization's queue is long and the statistics
-- say the workspace holds a tenth of all runs (its ended history), the
-- planner prefers the organization's index, whose rows lie in heap order,
-- and walks the whole queue of the organization to find none. Keyed by
-- both, the index answers the organization's capacity counts by its first
-- column and a workspace's read by both, so it is never the worse choice.
-- Built CONCURRENTLY for the reasons 00051 gives.
DROP INDEX CONCURRENTLY IF EXISTS runs_organization_workspace_unfinished;
CREATE INDEX CONCURRENTLY runs_organization_workspace_unfinished ON runs (organization_id, workspace_id, created_at, id)
    WHERE status NOT IN ('applied', 'planned_and_finished', 'errored', 'rejected', 'canceled', 'expired', 'recovered',
                         'plan_credentials_required', 'policy_soft_failed');
DROP INDEX CONCURRENTLY IF EXISTS runs_organization_unfinished;

-- +goose Down

DROP INDEX CONCURRENTLY IF EXISTS runs_organization_unfinished;
CREATE INDEX CONCURRENTLY runs_organization_unfinished ON runs (organization_id)
    WHERE status NOT IN ('applied', 'planned_and_finished', 'errored', 'rejected', 'canceled', 'expired', 'recovered',
                         'plan_credentials_required', 'policy_soft_failed');
DROP INDEX CONCURRENTLY IF EXISTS runs_organization_workspace_unfinished;
