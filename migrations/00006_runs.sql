-- +goose Up

-- A configuration version is one uploaded .tar.gz of OpenTofu configuration.
-- It is created pending, receives its bytes once (validated and sealed), and
-- is immutable from then on: runs pin its digests.
CREATE TABLE configuration_versions (
    id               text        PRIMARY KEY,
    organization_id  text        NOT NULL REFERENCES organizations (id),
    workspace_id     text        NOT NULL REFERENCES workspaces (id),
    status           text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'uploaded', 'errored')),
    source           text        NOT NULL CHECK (source IN ('api', 'tfe')),
    speculative      boolean     NOT NULL DEFAULT false,
    auto_queue_runs  boolean     NOT NULL DEFAULT false,
    error_code       text,
    blob_key         text,
    size_bytes       bigint,
    sha256           bytea,
    -- Digest of the root .terraform.lock.hcl; NULL when the archive has none.
    lock_file_sha256 bytea,
    entries          integer,
    expanded_bytes   bigint,
    created_by_kind  text        NOT NULL,
    created_by_id    text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    uploaded_at      timestamptz,
    CHECK (status <> 'uploaded' OR (blob_key IS NOT NULL AND sha256 IS NOT NULL AND size_bytes IS NOT NULL AND uploaded_at IS NOT NULL)),
    CHECK (status <> 'errored' OR error_code IS NOT NULL)
);
CREATE INDEX configuration_versions_workspace ON configuration_versions (workspace_id, created_at DESC);

-- +goose StatementBegin
CREATE FUNCTION configuration_version_is_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status <> 'pending' THEN
        RAISE EXCEPTION 'configuration version % is immutable', OLD.id;
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER configuration_versions_immutable
    BEFORE UPDATE ON configuration_versions
    FOR EACH ROW EXECUTE FUNCTION configuration_version_is_immutable();

-- A run evaluates one configuration version and input snapshot through
-- plan, policy, approval and apply. Everything it pins is copied here at
-- creation, so later workspace changes never alter it.
CREATE TABLE runs (
    id                           text        PRIMARY KEY,
    organization_id              text        NOT NULL REFERENCES organizations (id),
    project_id                   text        NOT NULL,
    workspace_id                 text        NOT NULL REFERENCES workspaces (id),
    kind                         text        NOT NULL CHECK (kind IN ('plan_and_apply', 'plan_only', 'speculative')),
    status                       text        NOT NULL,
    message                      text        NOT NULL DEFAULT '' CHECK (length(message) <= 2000),
    source                       text        NOT NULL CHECK (source IN ('api', 'tfe')),
    -- Cairn never applies without a human decision, and never destroys.
    auto_apply                   boolean     NOT NULL DEFAULT false CHECK (auto_apply = false),
    is_destroy                   boolean     NOT NULL DEFAULT false CHECK (is_destroy = false),
    configuration_version_id     text        NOT NULL REFERENCES configuration_versions (id),
    configuration_digest         bytea       NOT NULL,
    dependency_lock_digest       bytea       NOT NULL,
    input_snapshot               jsonb       NOT NULL,
    input_snapshot_digest        bytea       NOT NULL,
    settings_version             integer     NOT NULL,
    tool_version                 text        NOT NULL,
    region                       text        NOT NULL CHECK (region IN ('us', 'eu')),
    platform                     text        NOT NULL,
    runner_release               text        NOT NULL,
    created_by_kind              text        NOT NULL,
    created_by_id                text        NOT NULL,
    plan_status                  text        NOT NULL DEFAULT 'pending'
        CHECK (plan_status IN ('pending', 'running', 'finished', 'errored', 'canceled')),
    apply_status                 text        NOT NULL DEFAULT 'pending'
        CHECK (apply_status IN ('pending', 'running', 'finished', 'errored', 'canceled', 'interrupted')),
    has_changes                  boolean,
    resource_additions           integer,
    resource_changes             integer,
    resource_destructions        integer,
    plan_digest                  bytea,
    predecessor_state_version_id text,
    policy_outcome               text        CHECK (policy_outcome IN ('pass', 'error')),
    policy_result_digest         bytea,
    approval_deadline            timestamptz,
    decision_action              text        CHECK (decision_action IN ('approved', 'rejected', 'canceled')),
    decision_actor_kind          text,
    decision_actor_id            text,
    decided_at                   timestamptz,
    terminal_reason              text,
    state_version_id             text,
    -- Time each status was entered, keyed by status name.
    status_timestamps            jsonb       NOT NULL DEFAULT '{}',
    created_at                   timestamptz NOT NULL DEFAULT now(),
    updated_at                   timestamptz NOT NULL DEFAULT now(),
    CHECK ((decision_action IS NULL) = (decided_at IS NULL))
);
CREATE INDEX runs_newest_first ON runs (organization_id, created_at DESC, id DESC);
CREATE INDEX runs_workspace_newest_first ON runs (workspace_id, created_at DESC, id DESC);

-- One row per phase attempt. The attempt row is the fence a job checks:
-- a replayed or rescued job whose attempt is no longer current does nothing.
CREATE TABLE run_attempts (
    id                      text        PRIMARY KEY,
    organization_id         text        NOT NULL REFERENCES organizations (id),
    run_id                  text        NOT NULL REFERENCES runs (id),
    phase                   text        NOT NULL CHECK (phase IN ('plan', 'apply')),
    attempt                 integer     NOT NULL CHECK (attempt >= 1),
    status                  text        NOT NULL DEFAULT 'queued'
        CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'canceled', 'lost')),
    region                  text        NOT NULL,
    sandbox_driver          text,
    sandbox_id              text,
    sandbox_name            text,
    worker_id               text,
    exit_code               integer,
    terminal_classification text,
    timings                 jsonb       NOT NULL DEFAULT '{}',
    queued_at               timestamptz NOT NULL DEFAULT now(),
    started_at              timestamptz,
    heartbeat_at            timestamptz,
    finished_at             timestamptz,
    UNIQUE (run_id, phase, attempt)
);
CREATE INDEX run_attempts_running ON run_attempts (heartbeat_at) WHERE status = 'running';

-- Regional capacity: a lease per sandbox, granted under a row lock on the
-- region so concurrent grants cannot pass the ceiling together. One lease
-- per attempt, so a replayed attempt never reserves twice.
CREATE TABLE capacity_regions (
    region text PRIMARY KEY
);
INSERT INTO capacity_regions (region) VALUES ('us'), ('eu');

CREATE TABLE capacity_leases (
    id          text        PRIMARY KEY,
    region      text        NOT NULL REFERENCES capacity_regions (region),
    attempt_id  text        NOT NULL UNIQUE REFERENCES run_attempts (id),
    acquired_at timestamptz NOT NULL DEFAULT now(),
    released_at timestamptz,
    CHECK (released_at IS NULL OR released_at >= acquired_at)
);
CREATE INDEX capacity_leases_active ON capacity_leases (region) WHERE released_at IS NULL;

-- Sanitized log output, in order. Secrets are masked before a chunk is
-- written; nothing unmasked is ever stored.
CREATE TABLE run_log_chunks (
    run_id     text        NOT NULL REFERENCES runs (id),
    sequence   bigint      NOT NULL CHECK (sequence >= 1),
    phase      text        NOT NULL CHECK (phase IN ('plan', 'apply')),
    body       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, sequence)
);

-- Sealed run artifacts: the saved plan, its JSON, the redacted plan diff,
-- and an emergency state a failed apply could not publish.
CREATE TABLE run_artifacts (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    run_id          text        NOT NULL REFERENCES runs (id),
    attempt_id      text        NOT NULL REFERENCES run_attempts (id),
    kind            text        NOT NULL CHECK (kind IN ('plan_file', 'plan_json', 'plan_diff', 'emergency_state')),
    blob_key        text        NOT NULL,
    size_bytes      bigint      NOT NULL,
    sha256          bytea       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, kind)
);

-- Run tokens (rat_) let the sandboxed CLI read and write this workspace's
-- state through /api/v2 for one phase attempt. Only a keyed hash is kept.
CREATE TABLE run_tokens (
    id              text        PRIMARY KEY,
    token_hash      bytea       NOT NULL UNIQUE,
    organization_id text        NOT NULL REFERENCES organizations (id),
    workspace_id    text        NOT NULL REFERENCES workspaces (id),
    run_id          text        NOT NULL REFERENCES runs (id),
    attempt_id      text        NOT NULL REFERENCES run_attempts (id),
    phase           text        NOT NULL CHECK (phase IN ('plan', 'apply')),
    expires_at      timestamptz NOT NULL,
    revoked_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- Recovery of an apply whose outcome is uncertain. The lease belongs to one
-- principal for 15 minutes; a takeover after expiry fences the previous one.
CREATE TABLE run_recoveries (
    id               text        PRIMARY KEY,
    organization_id  text        NOT NULL REFERENCES organizations (id),
    run_id           text        NOT NULL UNIQUE REFERENCES runs (id),
    resolution       text        NOT NULL CHECK (resolution IN ('current_state_verified', 'import_emergency_state')),
    evidence_digest  bytea       NOT NULL,
    holder_id        text        NOT NULL,
    fence            integer     NOT NULL DEFAULT 1,
    lease_expires_at timestamptz NOT NULL,
    status           text        NOT NULL DEFAULT 'prepared' CHECK (status IN ('prepared', 'resolved')),
    target_state_version_id text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    resolved_at      timestamptz
);

-- +goose Down
DROP TABLE run_recoveries;
DROP TABLE run_tokens;
DROP TABLE run_artifacts;
DROP TABLE run_log_chunks;
DROP TABLE capacity_leases;
DROP TABLE capacity_regions;
DROP TABLE run_attempts;
DROP TABLE runs;
DROP TABLE configuration_versions;
DROP FUNCTION configuration_version_is_immutable();
