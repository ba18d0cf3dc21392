-- +goose Up

-- The public ID of a code-host run's configuration artifact (SPEC §2 source
-- provenance). The review used to show the last segment of the archive's
-- storage key, and with the organization and configuration version IDs that
-- rebuilt the whole key; this ID is random and names nothing in storage.
-- It is the column's default so that ingestions written by the previous
-- release during an upgrade get one too, and existing rows get theirs here.
SET LOCAL lock_timeout = '5s';

ALTER TABLE source_ingestions
    ADD COLUMN configuration_artifact_id text NOT NULL UNIQUE
        DEFAULT 'cfa_' || replace(gen_random_uuid()::text, '-', '');

-- How far the launch funnel (SPEC §6 product analytics) has read the audit
-- trail: the funnel's steps are audit events of committed mutations, so
-- every surface that creates an organization, a workspace or a run counts
-- the same, and nothing rolled back is ever counted. It starts now: the
-- history before this release is not replayed as analytics.
CREATE TABLE launch_funnel_cursor (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    created_at timestamptz NOT NULL,
    event_id   text        NOT NULL
);
INSERT INTO launch_funnel_cursor (created_at, event_id) VALUES (now(), '');
CREATE INDEX audit_events_launch_funnel ON audit_events (created_at, id)
    WHERE action IN ('organization.created', 'workspace.created', 'github_installation.connected', 'run.created',
                     'run.apply_finished');

-- +goose Down

DROP INDEX audit_events_launch_funnel;
DROP TABLE launch_funnel_cursor;
ALTER TABLE source_ingestions DROP COLUMN configuration_artifact_id;
