-- +goose Up

-- Configuration versions as HCP Terraform clients know them: a provisional
-- version becomes the workspace's current configuration only once a run
-- uses it (current_since, set once), and an uploaded version that is not
-- current can be archived (its archive deleted, its row kept).
ALTER TABLE configuration_versions
    ADD COLUMN provisional   boolean     NOT NULL DEFAULT false,
    ADD COLUMN current_since timestamptz,
    ADD COLUMN archived_at   timestamptz;
UPDATE configuration_versions SET current_since = created_at;
ALTER TABLE configuration_versions DROP CONSTRAINT configuration_versions_status_check;
ALTER TABLE configuration_versions ADD CONSTRAINT configuration_versions_status_check
    CHECK (status IN ('pending', 'uploaded', 'errored', 'archived'));
ALTER TABLE configuration_versions ADD CONSTRAINT configuration_versions_archived_check
    CHECK ((status = 'archived') = (archived_at IS NOT NULL) AND (status <> 'archived' OR blob_key IS NULL));
CREATE INDEX configuration_versions_current ON configuration_versions (workspace_id, current_since DESC)
    WHERE current_since IS NOT NULL;

-- A finished version stays immutable except for the two changes above:
-- becoming current once, and an uploaded one being archived.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION configuration_version_is_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = 'pending' THEN
        RETURN NEW;
    END IF;
    IF NEW.id = OLD.id AND NEW.organization_id = OLD.organization_id AND NEW.workspace_id = OLD.workspace_id
        AND NEW.source = OLD.source AND NEW.speculative = OLD.speculative AND NEW.provisional = OLD.provisional
        AND NEW.error_code IS NOT DISTINCT FROM OLD.error_code AND NEW.size_bytes IS NOT DISTINCT FROM OLD.size_bytes
        AND NEW.sha256 IS NOT DISTINCT FROM OLD.sha256 AND NEW.lock_file_sha256 IS NOT DISTINCT FROM OLD.lock_file_sha256
        AND NEW.uploaded_at IS NOT DISTINCT FROM OLD.uploaded_at AND NEW.created_at = OLD.created_at
        AND (OLD.current_since IS NULL OR NEW.current_since = OLD.current_since)
        AND ((NEW.status = OLD.status AND NEW.blob_key IS NOT DISTINCT FROM OLD.blob_key AND NEW.archived_at IS NOT DISTINCT FROM OLD.archived_at)
             OR (OLD.status = 'uploaded' AND NEW.status = 'archived'))
    THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'configuration version % is immutable', OLD.id;
END;
$$;
-- +goose StatementEnd

-- Comments on runs (HCP Terraform's run comments; an apply, discard or
-- cancel may carry one). Bodies are bounded; they are never secrets.
CREATE TABLE run_comments (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    run_id          text        NOT NULL REFERENCES runs (id),
    body            text        NOT NULL CHECK (length(body) BETWEEN 1 AND 10000),
    actor_kind      text        NOT NULL,
    actor_id        text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX run_comments_run ON run_comments (run_id, created_at, id);

-- A run's history, one event per status it entered and per comment, in
-- the order they happened. Status events are written by the trigger below
-- in the transaction that changes the status, so no transition can go
-- unrecorded; the actor is the run's creator or the decision's actor.
CREATE TABLE run_events (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    run_id          text        NOT NULL REFERENCES runs (id),
    action          text        NOT NULL,
    actor_kind      text,
    actor_id        text,
    comment_id      text        REFERENCES run_comments (id),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX run_events_run ON run_events (run_id, created_at, id);

-- +goose StatementBegin
CREATE FUNCTION run_status_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kind text;
    actor text;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.status = OLD.status THEN
        RETURN NEW;
    END IF;
    IF NEW.decision_action IS NOT NULL AND (TG_OP = 'INSERT' OR OLD.decision_action IS NULL) THEN
        kind := NEW.decision_actor_kind;
        actor := NEW.decision_actor_id;
    ELSIF NEW.status = 'pending' THEN
        kind := NEW.created_by_kind;
        actor := NEW.created_by_id;
    END IF;
    INSERT INTO run_events (id, organization_id, run_id, action, actor_kind, actor_id)
    VALUES ('rev_' || replace(gen_random_uuid()::text, '-', ''), NEW.organization_id, NEW.id, NEW.status, kind, actor);
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER runs_status_event AFTER INSERT OR UPDATE OF status ON runs
    FOR EACH ROW EXECUTE FUNCTION run_status_event();

-- Runs that existed before have their history from their status stamps.
INSERT INTO run_events (id, organization_id, run_id, action, actor_kind, actor_id, created_at)
SELECT 'rev_' || replace(gen_random_uuid()::text, '-', ''), r.organization_id, r.id, s.key,
       CASE WHEN s.key = 'pending' THEN r.created_by_kind END,
       CASE WHEN s.key = 'pending' THEN r.created_by_id END,
       (s.value #>> '{}')::timestamptz
FROM runs r, jsonb_each(r.status_timestamps) AS s;

-- +goose Down
DROP TRIGGER runs_status_event ON runs;
DROP FUNCTION run_status_event();
DROP TABLE run_events;
DROP TABLE run_comments;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION configuration_version_is_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status <> 'pending' THEN
        RAISE EXCEPTION 'configuration version % is immutable', OLD.id;
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
DROP INDEX configuration_versions_current;
ALTER TABLE configuration_versions DROP CONSTRAINT configuration_versions_archived_check;
ALTER TABLE configuration_versions DROP CONSTRAINT configuration_versions_status_check;
ALTER TABLE configuration_versions ADD CONSTRAINT configuration_versions_status_check
    CHECK (status IN ('pending', 'uploaded', 'errored'));
ALTER TABLE configuration_versions DROP COLUMN archived_at, DROP COLUMN current_since, DROP COLUMN provisional;
