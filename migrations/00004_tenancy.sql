-- +goose Up

CREATE TABLE projects (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    name            text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_by      text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX projects_organization_name_key ON projects (organization_id, lower(name));
CREATE INDEX projects_newest_first ON projects (organization_id, created_at DESC, id DESC);

CREATE TABLE workspaces (
    id                       text        PRIMARY KEY,
    organization_id          text        NOT NULL REFERENCES organizations (id),
    project_id               text        NOT NULL REFERENCES projects (id),
    name                     text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    -- slug and cloud_name are derived once at creation and never change.
    slug                     text        NOT NULL CHECK (slug ~ '^[a-z0-9]([a-z0-9-]{0,88}[a-z0-9])?$'),
    cloud_name               text        NOT NULL CHECK (cloud_name ~ '^[A-Za-z0-9_-]{1,90}$'),
    current_settings_version integer     NOT NULL,
    created_by               text        NOT NULL,
    created_at               timestamptz NOT NULL DEFAULT now()
);
-- Display names are unique per organization regardless of case, so "Prod"
-- and "prod" cannot confuse anyone; the index also settles creation races.
CREATE UNIQUE INDEX workspaces_organization_name_key ON workspaces (organization_id, lower(name));
CREATE UNIQUE INDEX workspaces_organization_slug_key ON workspaces (organization_id, slug);
CREATE UNIQUE INDEX workspaces_organization_cloud_name_key ON workspaces (organization_id, lower(cloud_name));
CREATE INDEX workspaces_newest_first ON workspaces (organization_id, created_at DESC, id DESC);
CREATE INDEX workspaces_project ON workspaces (project_id);

-- Execution settings are immutable numbered versions; a workspace points at
-- its current one and runs pin the version current at their creation.
CREATE TABLE workspace_settings_versions (
    workspace_id text        NOT NULL REFERENCES workspaces (id),
    version      integer     NOT NULL CHECK (version >= 1),
    tool_version text        NOT NULL,
    region       text        NOT NULL CHECK (region IN ('us', 'eu')),
    platform     text        NOT NULL,
    created_by   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, version)
);
ALTER TABLE workspaces ADD CONSTRAINT workspaces_current_settings_fkey
    FOREIGN KEY (id, current_settings_version) REFERENCES workspace_settings_versions (workspace_id, version)
    DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE workspace_variables (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    workspace_id    text        NOT NULL REFERENCES workspaces (id),
    key             text        NOT NULL CHECK (key ~ '^[A-Za-z_][A-Za-z0-9_-]{0,127}$'),
    -- Exactly one of value (plain) and sealed_value (sensitive) is set.
    value           text,
    sealed_value    bytea,
    sensitive       boolean     NOT NULL,
    hcl             boolean     NOT NULL DEFAULT false,
    description     text        NOT NULL DEFAULT '' CHECK (length(description) <= 2000),
    -- The value's version and keyed digest change only with the value.
    value_version   integer     NOT NULL DEFAULT 1,
    value_digest    bytea       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CHECK ((sensitive AND value IS NULL AND sealed_value IS NOT NULL) OR
           (NOT sensitive AND value IS NOT NULL AND sealed_value IS NULL))
);
CREATE UNIQUE INDEX workspace_variables_workspace_key_key ON workspace_variables (workspace_id, key);

CREATE TABLE service_accounts (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    name            text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    description     text        NOT NULL DEFAULT '',
    created_by      text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX service_accounts_organization_name_key ON service_accounts (organization_id, lower(name));

CREATE TABLE service_account_tokens (
    id                 text        PRIMARY KEY,
    organization_id    text        NOT NULL REFERENCES organizations (id),
    service_account_id text        NOT NULL REFERENCES service_accounts (id),
    -- Keyed hash of the sst_ plaintext, which is shown once and never stored.
    token_hash         bytea       NOT NULL,
    permissions        text[]      NOT NULL,
    -- Boundaries are plain IDs, not foreign keys: deleting a workspace
    -- revokes the tokens bound to it, and IDs are never reused.
    project_id         text,
    workspace_id       text,
    expires_at         timestamptz NOT NULL,
    created_by         text        NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    revoked_at         timestamptz,
    CHECK (expires_at <= created_at + interval '365 days')
);
CREATE UNIQUE INDEX service_account_tokens_hash_key ON service_account_tokens (token_hash);

-- Launch control: each version of the control document is an immutable row;
-- the highest version is in force. Evidence of who changed what, why, and
-- the before and after documents is written in the same transaction.
CREATE TABLE launch_control_versions (
    version         integer     PRIMARY KEY CHECK (version >= 1),
    document        jsonb       NOT NULL,
    actor           text        NOT NULL,
    request_id      text        NOT NULL,
    reason          text        NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
    idempotency_key text        NOT NULL,
    before_document jsonb,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX launch_control_versions_idempotency_key ON launch_control_versions (idempotency_key);

CREATE TABLE suspensions (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    -- NULL suspends the whole organization.
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

-- +goose StatementBegin
CREATE FUNCTION launch_control_is_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'launch control versions are immutable';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER launch_control_versions_immutable
    BEFORE UPDATE OR DELETE ON launch_control_versions
    FOR EACH ROW EXECUTE FUNCTION launch_control_is_immutable();

-- +goose Down
DROP TABLE suspensions;
DROP TABLE launch_control_versions;
DROP FUNCTION launch_control_is_immutable();
DROP TABLE service_account_tokens;
DROP TABLE service_accounts;
DROP TABLE workspace_variables;
ALTER TABLE workspaces DROP CONSTRAINT workspaces_current_settings_fkey;
DROP TABLE workspace_settings_versions;
DROP TABLE workspaces;
DROP TABLE projects;
