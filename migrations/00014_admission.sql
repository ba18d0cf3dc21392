-- +goose Up

-- Organization-wide launches are gone: while the public gate is closed only
-- exact organization-and-workspace pairs pass (SPEC §1 rule 5). A stored
-- control that still lists launched organizations would fail strict parsing
-- and admit nothing; rather than leave the installation closed by a parse
-- error, a new version without the list is appended (history stays
-- append-only, and the previous document is its before-evidence). Those
-- organizations are closed, never silently admitted. Workflow routing now
-- names exactly the run and policy workflows; a missing entry gets the
-- workflow's own queue.
INSERT INTO launch_control_versions (version, document, actor, request_id, reason, idempotency_key, before_document)
SELECT version + 1,
       (document - 'launched_organizations') || jsonb_build_object('workflow_routing', jsonb_build_object(
           'run', COALESCE(document -> 'workflow_routing' -> 'run', '"runs"'::jsonb),
           'policy', COALESCE(document -> 'workflow_routing' -> 'policy', '"policy"'::jsonb))),
       'migration:00014', 'migration-00014',
       'organization-wide launches removed (only exact organization-and-workspace canaries pass a closed gate); workflow routing completed',
       'migration-00014-launch-control', document
FROM launch_control_versions
WHERE version = (SELECT max(version) FROM launch_control_versions)
  AND jsonb_typeof(document) = 'object'
  AND (document ? 'launched_organizations'
       OR NOT COALESCE(document -> 'workflow_routing' ?& ARRAY['run', 'policy'], false)
       OR (SELECT count(*) FROM jsonb_object_keys(CASE WHEN jsonb_typeof(document -> 'workflow_routing') = 'object'
                                                       THEN document -> 'workflow_routing' ELSE '{}'::jsonb END)) <> 2);

-- Suspensions become a versioned, append-only history per tenant subject
-- (an organization, or one workspace of it): every suspend and lift names
-- the version it replaces and records the state before and after with its
-- actor, request and private reason (SPEC §1 rule 8). There is no foreign
-- key to the tenant: deleting a workspace or an organization keeps its
-- suspension history. workspace_id is '' for the whole organization.
CREATE TABLE suspension_changes (
    id               text        PRIMARY KEY,
    organization_id  text        NOT NULL,
    workspace_id     text        NOT NULL DEFAULT '',
    version          integer     NOT NULL CHECK (version >= 1),
    suspended_before boolean     NOT NULL,
    suspended        boolean     NOT NULL,
    reason           text        NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
    actor            text        NOT NULL,
    request_id       text        NOT NULL,
    idempotency_key  text        NOT NULL UNIQUE,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, workspace_id, version),
    CHECK (suspended <> suspended_before)
);

-- +goose StatementBegin
CREATE FUNCTION suspension_change_is_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'suspension changes are immutable';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER suspension_changes_immutable
    BEFORE UPDATE OR DELETE ON suspension_changes
    FOR EACH ROW EXECUTE FUNCTION suspension_change_is_immutable();

-- The old rows become that history: each suspension and each lift is an
-- event, a subject is suspended while any of its suspensions is active, and
-- only the events that changed that state are kept, numbered in order.
INSERT INTO suspension_changes (id, organization_id, workspace_id, version, suspended_before, suspended, reason, actor,
                                request_id, idempotency_key, created_at)
SELECT id, organization_id, workspace_id,
       row_number() OVER (PARTITION BY organization_id, workspace_id ORDER BY at, delta DESC, id),
       active - delta > 0, active > 0, reason, actor, request_id, idempotency_key, at
FROM (
    SELECT *, sum(delta) OVER (PARTITION BY organization_id, workspace_id ORDER BY at, delta DESC, id) AS active
    FROM (
        SELECT id, organization_id, COALESCE(workspace_id, '') AS workspace_id, created_at AS at, 1 AS delta,
               reason, actor, request_id, idempotency_key
        FROM suspensions
        UNION ALL
        SELECT id || '_lift', organization_id, COALESCE(workspace_id, ''), lifted_at, -1,
               'lifted (recorded before suspensions were versioned)', COALESCE(lifted_by, 'unknown'), 'migration-00014',
               'migration-00014-lift-' || id
        FROM suspensions WHERE lifted_at IS NOT NULL
    ) events
) counted
WHERE (active > 0) <> (active - delta > 0);

DROP TABLE suspensions;

-- Policy builds run in sandboxes too, so they hold regional capacity leases
-- like run phase attempts (SPEC §1 rule 9): a lease belongs to exactly one
-- attempt or one policy version, and each can hold at most one.
ALTER TABLE capacity_leases ALTER COLUMN attempt_id DROP NOT NULL;
ALTER TABLE capacity_leases ADD COLUMN policy_version_id text UNIQUE REFERENCES policy_versions (id);
ALTER TABLE capacity_leases ADD CONSTRAINT capacity_leases_one_holder CHECK (num_nonnulls(attempt_id, policy_version_id) = 1);

-- +goose Down
DELETE FROM capacity_leases WHERE policy_version_id IS NOT NULL;
ALTER TABLE capacity_leases DROP CONSTRAINT capacity_leases_one_holder;
ALTER TABLE capacity_leases DROP COLUMN policy_version_id;
ALTER TABLE capacity_leases ALTER COLUMN attempt_id SET NOT NULL;

CREATE TABLE suspensions (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    workspace_id    text        REFERENCES workspaces (id),
    reason          text        NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
    actor           text        NOT NULL,
    request_id      text        NOT NULL,
    idempotency_key text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    lifted_at       timestamptz,
    lifted_by       text
);
CREATE UNIQUE INDEX suspensions_idempotency_key ON suspensions (idempotency_key);
CREATE INDEX suspensions_active ON suspensions (organization_id) WHERE lifted_at IS NULL;
-- Only subjects suspended now, and still existing, come back.
INSERT INTO suspensions (id, organization_id, workspace_id, reason, actor, request_id, idempotency_key, created_at)
SELECT c.id, c.organization_id, NULLIF(c.workspace_id, ''), c.reason, c.actor, c.request_id, c.idempotency_key, c.created_at
FROM suspension_changes c
WHERE c.suspended
  AND c.version = (SELECT max(version) FROM suspension_changes l
                   WHERE l.organization_id = c.organization_id AND l.workspace_id = c.workspace_id)
  AND EXISTS (SELECT 1 FROM organizations o WHERE o.id = c.organization_id)
  AND (c.workspace_id = '' OR EXISTS (SELECT 1 FROM workspaces w WHERE w.id = c.workspace_id));
DROP TABLE suspension_changes;
DROP FUNCTION suspension_change_is_immutable();
