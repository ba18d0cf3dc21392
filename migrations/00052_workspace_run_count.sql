-- +goose Up

-- How many runs a workspace ever had, which /api/v2 shows on every
-- workspace read (run-count): kept by triggers, so the read is one row
-- instead of a count over the workspace's whole history, and runs written
-- by the previous release's binaries during an upgrade are counted too.
--
-- This runs while the previous release serves. It takes workspaces before
-- runs, the order run creation takes them in, and gives up after 5 s
-- rather than queue every run write behind it: a migration that fails for
-- that is simply run again.
SET LOCAL lock_timeout = '5s';

ALTER TABLE workspaces ADD COLUMN run_count bigint NOT NULL DEFAULT 0;

-- Counted once per statement from its transition table, not once per row:
-- a row trigger would rewrite the same workspace row for every run of a
-- bulk delete (deleting a workspace), each update slower than the last
-- because the transaction's earlier row versions cannot be pruned. The
-- workspaces of one statement are updated in ID order, so two statements
-- that write runs of the same workspaces cannot deadlock on them.
-- +goose StatementBegin
CREATE FUNCTION count_inserted_runs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT workspace_id, count(*) AS n FROM inserted_runs GROUP BY workspace_id ORDER BY workspace_id LOOP
        UPDATE workspaces SET run_count = run_count + c.n WHERE id = c.workspace_id;
    END LOOP;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION count_deleted_runs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT workspace_id, count(*) AS n FROM deleted_runs GROUP BY workspace_id ORDER BY workspace_id LOOP
        UPDATE workspaces SET run_count = run_count - c.n WHERE id = c.workspace_id;
    END LOOP;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER runs_counted_on_insert AFTER INSERT ON runs
    REFERENCING NEW TABLE AS inserted_runs FOR EACH STATEMENT EXECUTE FUNCTION count_inserted_runs();
CREATE TRIGGER runs_counted_on_delete AFTER DELETE ON runs
    REFERENCING OLD TABLE AS deleted_runs FOR EACH STATEMENT EXECUTE FUNCTION count_deleted_runs();

-- Counted after the triggers exist: from here to the commit no run can be
-- written, so the count is exact.
UPDATE workspaces w SET run_count = c.n
    FROM (SELECT workspace_id, count(*) AS n FROM runs GROUP BY workspace_id) c
    WHERE c.workspace_id = w.id;

-- +goose Down

DROP TRIGGER runs_counted_on_delete ON runs;
DROP TRIGGER runs_counted_on_insert ON runs;
DROP FUNCTION count_deleted_runs();
DROP FUNCTION count_inserted_runs();
ALTER TABLE workspaces DROP COLUMN run_count;
