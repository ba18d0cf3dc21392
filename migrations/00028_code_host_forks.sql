-- +goose Up

-- Pull requests from forks are code nobody trusted has looked at. A
-- workspace's source settings say whether they are planned automatically
-- (plan) or held for a person (hold, the default).
ALTER TABLE workspace_source_settings
    ADD COLUMN fork_pull_requests text NOT NULL DEFAULT 'hold' CHECK (fork_pull_requests IN ('hold', 'plan'));

-- A held ingestion waits for a person: no archive was downloaded and no
-- run exists. held_reason says why (a fork pull request, or the
-- repository's hourly fork-run throttle); it stays as history when a
-- person plans the exact head commit, which records who and when and
-- moves the ingestion back to pending. head_repository_owner and
-- head_repository_name name the pull request's head repository (the fork)
-- as the delivery reported it.
ALTER TABLE source_ingestions
    DROP CONSTRAINT source_ingestions_status_check,
    ADD CONSTRAINT source_ingestions_status_check CHECK (status IN ('pending', 'held', 'ready', 'skipped', 'failed')),
    ADD COLUMN held_reason           text CHECK (held_reason IN ('fork_pull_request', 'fork_runs_throttled')),
    ADD COLUMN held_at               timestamptz,
    ADD COLUMN plan_approved_by      text,
    ADD COLUMN plan_approved_at      timestamptz,
    ADD COLUMN head_repository_owner text CHECK (length(head_repository_owner) <= 100),
    ADD COLUMN head_repository_name  text CHECK (length(head_repository_name) <= 100),
    ADD CONSTRAINT source_ingestions_held_reason CHECK (status <> 'held' OR (held_reason IS NOT NULL AND held_at IS NOT NULL)),
    ADD CONSTRAINT source_ingestions_plan_approval CHECK ((plan_approved_by IS NULL) = (plan_approved_at IS NULL)),
    ADD CONSTRAINT source_ingestions_approval_is_forks CHECK (plan_approved_by IS NULL OR fork);
CREATE INDEX source_ingestions_held ON source_ingestions (workspace_id, held_at DESC, id DESC) WHERE status = 'held';
-- The fork-run throttle counts a repository's automatic fork runs of the
-- last hour.
CREATE INDEX source_ingestions_fork_runs ON source_ingestions (repository_id, settled_at)
    WHERE fork AND run_id IS NOT NULL AND plan_approved_by IS NULL;

-- A check run publication belongs to a run or, for an ingestion held
-- before any run exists, to that ingestion; external_id is the owner's ID
-- either way, and what the code host's check carries.
ALTER TABLE check_run_publications ADD COLUMN external_id text;
UPDATE check_run_publications SET external_id = run_id;
ALTER TABLE check_run_publications
    DROP CONSTRAINT check_run_publications_pkey,
    ALTER COLUMN external_id SET NOT NULL,
    ADD CONSTRAINT check_run_publications_pkey PRIMARY KEY (external_id),
    ALTER COLUMN run_id DROP NOT NULL,
    ADD CONSTRAINT check_run_publications_run_key UNIQUE (run_id),
    ADD COLUMN ingestion_id text UNIQUE REFERENCES source_ingestions (id) ON DELETE CASCADE,
    ADD CONSTRAINT check_run_publications_one_owner CHECK ((run_id IS NULL) <> (ingestion_id IS NULL)),
    ADD CONSTRAINT check_run_publications_external_id CHECK (external_id = coalesce(run_id, ingestion_id));

-- Source ingestions get the durable dispatch record policy builds have,
-- so the reconciler redelivers one whose job was lost or exhausted. The
-- ingestions already waiting get theirs now.
ALTER TABLE workflow_dispatches DROP CONSTRAINT workflow_dispatches_kind_check,
    ADD CONSTRAINT workflow_dispatches_kind_check CHECK (kind IN ('policy-publication', 'source-ingestion'));
INSERT INTO workflow_dispatches (id, kind, organization_id, subject_id, status, next_attempt_at, created_at)
SELECT 'source-ingestion-' || id, 'source-ingestion', organization_id, id, 'pending', now(), now()
FROM source_ingestions WHERE status = 'pending'
ON CONFLICT (id) DO NOTHING;

-- +goose Down
DELETE FROM workflow_dispatches WHERE kind = 'source-ingestion';
ALTER TABLE workflow_dispatches DROP CONSTRAINT workflow_dispatches_kind_check,
    ADD CONSTRAINT workflow_dispatches_kind_check CHECK (kind IN ('policy-publication'));
DELETE FROM check_run_publications WHERE run_id IS NULL;
ALTER TABLE check_run_publications
    DROP CONSTRAINT check_run_publications_external_id,
    DROP CONSTRAINT check_run_publications_one_owner,
    DROP COLUMN ingestion_id,
    DROP CONSTRAINT check_run_publications_run_key,
    DROP CONSTRAINT check_run_publications_pkey,
    ALTER COLUMN run_id SET NOT NULL,
    ADD CONSTRAINT check_run_publications_pkey PRIMARY KEY (run_id),
    DROP COLUMN external_id;
DROP INDEX source_ingestions_fork_runs;
DROP INDEX source_ingestions_held;
UPDATE source_ingestions SET status = 'pending' WHERE status = 'held';
ALTER TABLE source_ingestions
    DROP CONSTRAINT source_ingestions_approval_is_forks,
    DROP CONSTRAINT source_ingestions_plan_approval,
    DROP CONSTRAINT source_ingestions_held_reason,
    DROP COLUMN head_repository_name,
    DROP COLUMN head_repository_owner,
    DROP COLUMN plan_approved_at,
    DROP COLUMN plan_approved_by,
    DROP COLUMN held_at,
    DROP COLUMN held_reason,
    DROP CONSTRAINT source_ingestions_status_check,
    ADD CONSTRAINT source_ingestions_status_check CHECK (status IN ('pending', 'ready', 'skipped', 'failed'));
ALTER TABLE workspace_source_settings DROP COLUMN fork_pull_requests;
