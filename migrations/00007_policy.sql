-- +goose Up

-- A durable record of every workflow a mutation implies. The River job is
-- inserted in the same transaction; this row is what the reconciler reads
-- to redeliver a dispatch whose job never ran or never finished.
CREATE TABLE workflow_dispatches (
    id              text        PRIMARY KEY,
    kind            text        NOT NULL CHECK (kind IN ('policy-publication')),
    organization_id text        NOT NULL REFERENCES organizations (id),
    subject_id      text        NOT NULL,
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'completed')),
    deliveries      integer     NOT NULL DEFAULT 1 CHECK (deliveries >= 1),
    next_attempt_at timestamptz NOT NULL,
    claimed_until   timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz,
    CHECK ((status = 'completed') = (completed_at IS NOT NULL))
);
CREATE INDEX workflow_dispatches_due ON workflow_dispatches (next_attempt_at) WHERE status = 'pending';

-- A policy set is a stable named identity; its versions carry the code.
CREATE TABLE policy_sets (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    name            text        NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$'),
    description     text        NOT NULL DEFAULT '' CHECK (length(description) <= 2000),
    latest_version  integer     NOT NULL DEFAULT 0,
    created_by_kind text        NOT NULL,
    created_by_id   text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX policy_sets_organization_name_key ON policy_sets (organization_id, lower(name));

-- A policy version is numbered per set, built once, and never edited after
-- it leaves pending. It pins the workspace settings version its build used.
CREATE TABLE policy_versions (
    id                  text        PRIMARY KEY,
    organization_id     text        NOT NULL REFERENCES organizations (id),
    policy_set_id       text        NOT NULL REFERENCES policy_sets (id),
    number              integer     NOT NULL CHECK (number >= 1),
    -- The build workspace and its settings are recorded facts, not a
    -- reference: a version outlives the workspace it was built in.
    workspace_id        text        NOT NULL,
    settings_version    integer     NOT NULL,
    tool_version        text        NOT NULL,
    region              text        NOT NULL,
    status              text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'published', 'failed')),
    failure_code        text,
    source_identity     text        NOT NULL,
    source_sha256       bytea       NOT NULL,
    source_size         bigint      NOT NULL,
    bundle_sha256       bytea,
    test_results_sha256 bytea,
    tests_passed        integer,
    engine_version      text        NOT NULL,
    capabilities_id     text        NOT NULL,
    capabilities_sha256 text        NOT NULL,
    entrypoint          text        NOT NULL,
    created_by_kind     text        NOT NULL,
    created_by_id       text        NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz,
    UNIQUE (policy_set_id, number),
    CHECK (status <> 'failed' OR failure_code IS NOT NULL),
    CHECK (status <> 'published' OR (bundle_sha256 IS NOT NULL AND test_results_sha256 IS NOT NULL AND finished_at IS NOT NULL))
);

-- +goose StatementBegin
CREATE FUNCTION policy_version_is_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status <> 'pending' THEN
        RAISE EXCEPTION 'policy version % is immutable', OLD.id;
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER policy_versions_immutable
    BEFORE UPDATE ON policy_versions
    FOR EACH ROW EXECUTE FUNCTION policy_version_is_immutable();

-- The sealed objects of a version: its source archive, compiled bundle and
-- test results. Publication compares these rows' digests, never a claim.
CREATE TABLE policy_artifacts (
    id                text        PRIMARY KEY,
    organization_id   text        NOT NULL REFERENCES organizations (id),
    policy_version_id text        NOT NULL REFERENCES policy_versions (id),
    kind              text        NOT NULL CHECK (kind IN ('source', 'bundle', 'test_results')),
    blob_key          text        NOT NULL,
    size_bytes        bigint      NOT NULL,
    sha256            bytea       NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (policy_version_id, kind)
);

-- Attachments put one published version of a set in force at a scope.
-- Detaching is a compare-and-set; a set is active at most once per scope.
CREATE TABLE policy_attachments (
    id                text        PRIMARY KEY,
    organization_id   text        NOT NULL REFERENCES organizations (id),
    policy_set_id     text        NOT NULL REFERENCES policy_sets (id),
    policy_version_id text        NOT NULL REFERENCES policy_versions (id),
    scope             text        NOT NULL CHECK (scope IN ('organization', 'project', 'workspace')),
    scope_id          text        NOT NULL,
    enforcement_mode  text        NOT NULL CHECK (enforcement_mode IN ('advisory', 'soft_mandatory', 'hard_mandatory')),
    status            text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'detached')),
    created_by_kind   text        NOT NULL,
    created_by_id     text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    detached_at       timestamptz,
    CHECK ((status = 'detached') = (detached_at IS NOT NULL))
);
CREATE UNIQUE INDEX policy_attachments_active_key ON policy_attachments (policy_set_id, scope, scope_id) WHERE status = 'active';
CREATE INDEX policy_attachments_scope ON policy_attachments (organization_id, scope, scope_id) WHERE status = 'active';

-- The effective attachment list a run was created with. Later attachment
-- or publication changes never reach an existing run.
CREATE TABLE run_policy_snapshots (
    run_id            text     NOT NULL REFERENCES runs (id),
    sequence          integer  NOT NULL CHECK (sequence BETWEEN 1 AND 256),
    attachment_id     text     NOT NULL,
    policy_set_id     text     NOT NULL,
    policy_version_id text     NOT NULL,
    scope             text     NOT NULL,
    enforcement_mode  text     NOT NULL,
    bundle_sha256     bytea    NOT NULL,
    PRIMARY KEY (run_id, sequence)
);

-- One policy check per run, written with the plan evidence. configuration_error
-- records an effective list that could not be evaluated (a set attached at
-- two scopes, or more than 256 attachments): the outcome is then error.
CREATE TABLE policy_checks (
    id                  text        PRIMARY KEY,
    organization_id     text        NOT NULL REFERENCES organizations (id),
    run_id              text        NOT NULL UNIQUE REFERENCES runs (id),
    plan_digest         bytea       NOT NULL,
    input_digest        bytea,
    composition_digest  bytea       NOT NULL,
    outcome             text        NOT NULL CHECK (outcome IN ('pass', 'advisory_failed', 'soft_failed', 'hard_failed', 'error')),
    configuration_error text,
    attachments         integer     NOT NULL,
    duration_ms         integer     NOT NULL,
    evaluated_at        timestamptz NOT NULL DEFAULT now()
);

-- One persisted evaluation per snapshotted attachment.
CREATE TABLE policy_results (
    id                text        PRIMARY KEY,
    check_id          text        NOT NULL REFERENCES policy_checks (id),
    run_id            text        NOT NULL REFERENCES runs (id),
    sequence          integer     NOT NULL,
    attachment_id     text        NOT NULL,
    policy_set_id     text        NOT NULL,
    policy_version_id text        NOT NULL,
    scope             text        NOT NULL,
    enforcement_mode  text        NOT NULL,
    status            text        NOT NULL CHECK (status IN ('passed', 'failed', 'error')),
    error_code        text,
    findings          jsonb       NOT NULL DEFAULT '[]',
    input_digest      bytea,
    result_digest     bytea       NOT NULL,
    duration_ms       integer     NOT NULL,
    UNIQUE (check_id, sequence),
    CHECK ((status = 'error') = (error_code IS NOT NULL))
);
CREATE INDEX policy_results_digest ON policy_results (run_id, result_digest);

-- Soft overrides are immutable: bound to one run, plan digest, policy
-- version and result digest, and valid only until they expire. Only the
-- deletion of their workspace removes them.
CREATE TABLE policy_overrides (
    id                   text        PRIMARY KEY,
    organization_id      text        NOT NULL REFERENCES organizations (id),
    run_id               text        NOT NULL REFERENCES runs (id),
    policy_result_id     text        NOT NULL REFERENCES policy_results (id),
    plan_digest          bytea       NOT NULL,
    policy_version_id    text        NOT NULL,
    policy_result_digest bytea       NOT NULL,
    justification        text        NOT NULL CHECK (length(justification) BETWEEN 1 AND 2000),
    expires_at           timestamptz NOT NULL,
    actor_kind           text        NOT NULL,
    actor_id             text        NOT NULL,
    request_id           text        NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    CHECK (expires_at > created_at AND expires_at <= created_at + interval '24 hours')
);
CREATE INDEX policy_overrides_run ON policy_overrides (run_id, created_at DESC);

-- +goose StatementBegin
CREATE FUNCTION policy_override_is_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'policy overrides are immutable';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER policy_overrides_immutable
    BEFORE UPDATE ON policy_overrides
    FOR EACH ROW EXECUTE FUNCTION policy_override_is_immutable();

-- Runs record their policy outcome in full now, and until when the gate is
-- open: far in the future for a passing outcome, the earliest covering
-- override's expiry for an overridden soft failure, NULL while closed.
-- policy_snapshot_error records an effective attachment list that cannot be
-- evaluated (a set attached at two scopes): the run's outcome is then error.
ALTER TABLE runs DROP CONSTRAINT runs_policy_outcome_check;
ALTER TABLE runs ADD CONSTRAINT runs_policy_outcome_check
    CHECK (policy_outcome IN ('pass', 'advisory_failed', 'soft_failed', 'hard_failed', 'error'));
ALTER TABLE runs ADD COLUMN policy_gate_until timestamptz;
ALTER TABLE runs ADD COLUMN policy_snapshot_error text;
UPDATE runs SET policy_gate_until = '9999-12-31T00:00:00Z' WHERE policy_outcome = 'pass';

-- +goose Down
ALTER TABLE runs DROP COLUMN policy_gate_until;
ALTER TABLE runs DROP COLUMN policy_snapshot_error;
ALTER TABLE runs DROP CONSTRAINT runs_policy_outcome_check;
UPDATE runs SET policy_outcome = 'error' WHERE policy_outcome NOT IN ('pass', 'error');
ALTER TABLE runs ADD CONSTRAINT runs_policy_outcome_check CHECK (policy_outcome IN ('pass', 'error'));
DROP TABLE policy_overrides;
DROP FUNCTION policy_override_is_immutable();
DROP TABLE policy_results;
DROP TABLE policy_checks;
DROP TABLE run_policy_snapshots;
DROP TABLE policy_attachments;
DROP TABLE policy_artifacts;
DROP TABLE policy_versions;
DROP FUNCTION policy_version_is_immutable();
DROP TABLE policy_sets;
DROP TABLE workflow_dispatches;
