-- +goose Up

-- A dispatch is delivered when its job really starts, not when the
-- reconciler finds it still queued behind a backlog: starts counts the
-- builds that began (the failure bound applies to it), checks counts the
-- reconciler's visits (the backoff follows it).
ALTER TABLE workflow_dispatches
    ADD COLUMN starts integer NOT NULL DEFAULT 0 CHECK (starts >= 0),
    ADD COLUMN checks integer NOT NULL DEFAULT 0 CHECK (checks >= 0);

-- +goose Down
ALTER TABLE workflow_dispatches DROP COLUMN starts, DROP COLUMN checks;
