-- +goose Up

-- Run triggers: workspace_id (the destination) gets a new plan_and_apply
-- run whenever a run of source_workspace_id applies. Both ends belong to
-- the trigger's organization; deleting either workspace removes the
-- trigger. A destination has at most 20 sources (HCP's limit, enforced by
-- the service under the organization's advisory lock, as cycles are).
CREATE TABLE run_triggers (
    id                  text        PRIMARY KEY,
    organization_id     text        NOT NULL REFERENCES organizations (id),
    workspace_id        text        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    source_workspace_id text        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    created_by_kind     text        NOT NULL,
    created_by_id       text        NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT run_triggers_not_self CHECK (workspace_id <> source_workspace_id),
    CONSTRAINT run_triggers_once UNIQUE (workspace_id, source_workspace_id)
);
CREATE INDEX run_triggers_by_source ON run_triggers (source_workspace_id, created_at);

-- The applied run of a source workspace a triggered run was created for.
-- One run per (source run, destination): a retried fan-out job finds the
-- run it made before instead of making another. It names the run and
-- refers to no row: deleting the source workspace (and its runs) keeps the
-- record of why the destination's run exists.
ALTER TABLE runs ADD COLUMN triggered_by_run_id text;
CREATE UNIQUE INDEX runs_triggered_once ON runs (triggered_by_run_id, workspace_id) WHERE triggered_by_run_id IS NOT NULL;

-- +goose Down
DROP INDEX runs_triggered_once;
ALTER TABLE runs DROP COLUMN triggered_by_run_id;
DROP TABLE run_triggers;
