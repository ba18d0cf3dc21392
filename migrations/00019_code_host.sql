-- +goose Up

-- The code-host app. Installation access tokens are never stored: the
-- worker exchanges the app's key for one when it needs it.

-- The installation fence: every lifecycle delivery advances it, bound or
-- not, so a reader that fetched an installation from the provider can tell
-- whether a lifecycle event landed meanwhile. Revocation is monotonic: once
-- revoked_at is set nothing clears it.
CREATE TABLE github_installation_fences (
    installation_id bigint      PRIMARY KEY CHECK (installation_id > 0),
    fence           bigint      NOT NULL DEFAULT 0 CHECK (fence >= 0),
    revoked_at      timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- An installation bound to an organization, only ever by the installation
-- callback. An organization has at most one live installation.
CREATE TABLE github_installations (
    installation_id bigint      PRIMARY KEY REFERENCES github_installation_fences (installation_id),
    organization_id text        NOT NULL REFERENCES organizations (id),
    account_login   text        NOT NULL CHECK (length(account_login) BETWEEN 1 AND 100),
    account_id      bigint      NOT NULL,
    status          text        NOT NULL CHECK (status IN ('connected', 'suspended', 'revoked')),
    connected_at    timestamptz NOT NULL,
    suspended_at    timestamptz,
    revoked_at      timestamptz,
    updated_at      timestamptz NOT NULL,
    CHECK ((status = 'revoked') = (revoked_at IS NOT NULL))
);
CREATE UNIQUE INDEX github_installations_live_per_organization ON github_installations (organization_id)
    WHERE status <> 'revoked';

-- Repositories an installation was granted. A repository belongs to one
-- organization for good: a grant from another organization's installation
-- fails closed instead of moving it. Deselected rows stay as history.
CREATE TABLE github_repositories (
    repository_id   bigint      PRIMARY KEY CHECK (repository_id > 0),
    installation_id bigint      NOT NULL REFERENCES github_installations (installation_id),
    organization_id text        NOT NULL REFERENCES organizations (id),
    owner           text        NOT NULL CHECK (length(owner) BETWEEN 1 AND 100),
    name            text        NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    selected        boolean     NOT NULL,
    updated_at      timestamptz NOT NULL
);
CREATE INDEX github_repositories_installation ON github_repositories (installation_id) WHERE selected;

-- Installation states: single use, ten minutes, bound to the organization
-- and the principal that started the flow. The signed state names the row.
CREATE TABLE github_install_states (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    principal_kind  text        NOT NULL,
    principal_id    text        NOT NULL,
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    consumed_at     timestamptz,
    installation_id bigint
);

-- The tenant-free delivery record (SPEC §6 rule 2): the provider's
-- delivery ID is the global replay identity of every signed delivery. The
-- raw payload is never kept, only its digest and what it meant.
CREATE TABLE github_deliveries (
    delivery_id     text        PRIMARY KEY CHECK (length(delivery_id) BETWEEN 1 AND 100),
    kind            text        NOT NULL CHECK (kind IN ('source', 'lifecycle', 'other')),
    event           text        NOT NULL CHECK (length(event) BETWEEN 1 AND 100),
    action          text        CHECK (length(action) <= 100),
    installation_id bigint,
    repository_id   bigint,
    payload_sha256  bytea       NOT NULL CHECK (length(payload_sha256) = 32),
    result          text        NOT NULL CHECK (result IN ('accepted', 'ignored')),
    -- Why: the bound outcome of a source delivery, or why it was ignored.
    outcome         text        NOT NULL CHECK (length(outcome) <= 100),
    ingestion_ids   text[]      NOT NULL DEFAULT '{}',
    received_at     timestamptz NOT NULL,
    settled_at      timestamptz NOT NULL
);

-- Immutable, numbered source settings versions of a workspace. Racing
-- writers allocating one number collide on the unique key.
CREATE TABLE workspace_source_settings (
    id                                text        PRIMARY KEY,
    organization_id                   text        NOT NULL REFERENCES organizations (id),
    workspace_id                      text        NOT NULL REFERENCES workspaces (id),
    version                           integer     NOT NULL CHECK (version >= 1),
    installation_id                   bigint      NOT NULL,
    repository_id                     bigint      NOT NULL,
    repository_owner                  text        NOT NULL,
    repository_name                   text        NOT NULL,
    tracked_branch                    text        NOT NULL CHECK (length(tracked_branch) BETWEEN 1 AND 255),
    working_directory                 text        NOT NULL CHECK (length(working_directory) <= 1024),
    trigger_paths                     text[]      NOT NULL CHECK (cardinality(trigger_paths) <= 100),
    speculative_credential_version_id text,
    created_by_kind                   text        NOT NULL,
    created_by_id                     text        NOT NULL,
    created_at                        timestamptz NOT NULL,
    CONSTRAINT workspace_source_settings_version UNIQUE (workspace_id, version)
);
CREATE INDEX workspace_source_settings_repository ON workspace_source_settings (repository_id, workspace_id, version DESC);

-- A workspace-scoped source ingestion: one per workspace and source event
-- (redeliveries of the event reuse it). The run, plan and check identities
-- derive from its ID; only a ready ingestion with a verified archive digest
-- may create a run.
CREATE TABLE source_ingestions (
    id                       text        PRIMARY KEY,
    organization_id          text        NOT NULL REFERENCES organizations (id),
    workspace_id             text        NOT NULL REFERENCES workspaces (id),
    identity                 text        NOT NULL CHECK (length(identity) <= 400),
    source_settings_id       text        NOT NULL REFERENCES workspace_source_settings (id),
    trigger                  text        NOT NULL CHECK (trigger IN ('push', 'pull_request')),
    installation_id          bigint      NOT NULL,
    repository_id            bigint      NOT NULL,
    repository_owner         text        NOT NULL,
    repository_name          text        NOT NULL,
    ref                      text        NOT NULL,
    head_sha                 text        NOT NULL CHECK (head_sha ~ '^[0-9a-f]{40}$'),
    -- Push: the commit lists' paths, NULL when they cannot be trusted to
    -- be complete (capped, created branch, rewritten history).
    pushed_paths             text[],
    pull_number              integer,
    base_ref                 text,
    head_ref                 text,
    fork                     boolean     NOT NULL DEFAULT false,
    status                   text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'ready', 'skipped', 'failed')),
    failure_code             text,
    commit_sha               text        CHECK (commit_sha ~ '^[0-9a-f]{40}$'),
    commit_message           text        CHECK (length(commit_message) <= 2000),
    configuration_version_id text        REFERENCES configuration_versions (id),
    archive_sha256           bytea,
    run_id                   text        UNIQUE REFERENCES runs (id),
    created_at               timestamptz NOT NULL,
    settled_at               timestamptz,
    CONSTRAINT source_ingestions_identity UNIQUE (workspace_id, identity),
    CHECK (status <> 'ready' OR (commit_sha IS NOT NULL AND configuration_version_id IS NOT NULL AND archive_sha256 IS NOT NULL)),
    CHECK (status <> 'failed' OR failure_code IS NOT NULL)
);

-- Which deliveries led to which ingestions.
CREATE TABLE source_ingestion_deliveries (
    delivery_id  text NOT NULL REFERENCES github_deliveries (delivery_id),
    ingestion_id text NOT NULL REFERENCES source_ingestions (id),
    PRIMARY KEY (delivery_id, ingestion_id)
);

-- Runs and configuration versions can now come from the code host.
ALTER TABLE runs DROP CONSTRAINT runs_source_check,
    ADD CONSTRAINT runs_source_check CHECK (source IN ('api', 'tfe', 'vcs'));
ALTER TABLE configuration_versions DROP CONSTRAINT configuration_versions_source_check,
    ADD CONSTRAINT configuration_versions_source_check CHECK (source IN ('api', 'tfe', 'vcs'));

-- +goose Down
ALTER TABLE configuration_versions DROP CONSTRAINT configuration_versions_source_check,
    ADD CONSTRAINT configuration_versions_source_check CHECK (source IN ('api', 'tfe'));
ALTER TABLE runs DROP CONSTRAINT runs_source_check,
    ADD CONSTRAINT runs_source_check CHECK (source IN ('api', 'tfe'));
DROP TABLE source_ingestion_deliveries;
DROP TABLE source_ingestions;
DROP TABLE workspace_source_settings;
DROP TABLE github_deliveries;
DROP TABLE github_install_states;
DROP TABLE github_repositories;
DROP TABLE github_installations;
DROP TABLE github_installation_fences;
