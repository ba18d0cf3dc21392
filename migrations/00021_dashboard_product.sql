-- +goose Up

-- Organizations choose how a workspace created without an explicit mode
-- (by the CLI through the remote-backend API, or /v1) runs: remote, as
-- HCP Terraform does, so a CLI-created workspace runs managed plans.
ALTER TABLE organizations
    ADD COLUMN default_execution_mode text NOT NULL DEFAULT 'remote'
        CHECK (default_execution_mode IN ('local', 'remote'));

-- The reason a person gave for discarding a run, trimmed and bounded as
-- the API accepts it; null when none was given.
ALTER TABLE runs
    ADD COLUMN decision_reason text CHECK (char_length(decision_reason) BETWEEN 1 AND 500);

-- The live run channel is pushed, not polled: a new log chunk or a run
-- status change notifies cairn_run_events with the run ID when its
-- transaction commits (PostgreSQL folds repeats of one payload in one
-- transaction), whichever code path wrote it.
-- +goose StatementBegin
CREATE FUNCTION notify_run_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Each branch is planned only when it runs: a runs row has no run_id.
    IF TG_TABLE_NAME = 'runs' THEN
        PERFORM pg_notify('cairn_run_events', NEW.id);
    ELSE
        PERFORM pg_notify('cairn_run_events', NEW.run_id);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER run_log_chunks_notify AFTER INSERT ON run_log_chunks
    FOR EACH ROW EXECUTE FUNCTION notify_run_event();
CREATE TRIGGER runs_status_notify AFTER UPDATE OF status, plan_status, apply_status ON runs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.plan_status IS DISTINCT FROM NEW.plan_status
        OR OLD.apply_status IS DISTINCT FROM NEW.apply_status)
    EXECUTE FUNCTION notify_run_event();

-- +goose Down
DROP TRIGGER runs_status_notify ON runs;
DROP TRIGGER run_log_chunks_notify ON run_log_chunks;
DROP FUNCTION notify_run_event();
ALTER TABLE runs DROP COLUMN decision_reason;
ALTER TABLE organizations DROP COLUMN default_execution_mode;
