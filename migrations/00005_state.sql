-- +goose Up

-- User API tokens ("cloud credentials") for the remote-backend API: what a
-- person's `tofu` CLI presents. Bound to the organization they were created
-- in; only a keyed hash of the cut_ plaintext is stored.
CREATE TABLE user_tokens (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    user_id         text        NOT NULL REFERENCES users (id),
    token_hash      bytea       NOT NULL,
    description     text        NOT NULL DEFAULT '' CHECK (length(description) <= 200),
    expires_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_used_at    timestamptz,
    revoked_at      timestamptz
);
CREATE UNIQUE INDEX user_tokens_hash_key ON user_tokens (token_hash);
CREATE INDEX user_tokens_user ON user_tokens (user_id);

-- A workspace lock names its holder; only the holder writes state, and
-- only the holder (or force-unlock) releases it.
ALTER TABLE workspaces
    -- How the remote-backend CLI runs operations: 'local' keeps only state
    -- here, 'remote' runs plans and applies in Cairn's sandboxes.
    ADD COLUMN execution_mode text NOT NULL DEFAULT 'local' CHECK (execution_mode IN ('local', 'remote')),
    ADD COLUMN updated_at     timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN locked_by_kind text CHECK (locked_by_kind IN ('user', 'service_account', 'operator', 'run')),
    ADD COLUMN locked_by_id   text,
    ADD COLUMN lock_reason    text NOT NULL DEFAULT '',
    ADD COLUMN locked_at      timestamptz,
    ADD CONSTRAINT workspaces_lock_complete CHECK ((locked_by_kind IS NULL) = (locked_by_id IS NULL) AND (locked_by_id IS NULL) = (locked_at IS NULL));

-- State versions are immutable once finalized. A version is created
-- pending, receives its bytes through a signed upload URL, and is
-- finalized (numbered, current) only when the bytes match the declared MD5.
CREATE TABLE state_versions (
    id                  text        PRIMARY KEY,
    organization_id     text        NOT NULL REFERENCES organizations (id),
    workspace_id        text        NOT NULL REFERENCES workspaces (id),
    -- Per-workspace version number, assigned at finalization.
    number              integer,
    serial              bigint      NOT NULL CHECK (serial >= 0),
    lineage             text        NOT NULL CHECK (length(lineage) <= 200),
    md5                 text        NOT NULL CHECK (md5 ~ '^[0-9a-f]{32}$'),
    force               boolean     NOT NULL DEFAULT false,
    status              text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'finalized')),
    sha256              bytea,
    size_bytes          bigint,
    blob_key            text,
    json_blob_key       text,
    tool_version        text        NOT NULL DEFAULT '',
    resource_count      integer     NOT NULL DEFAULT 0,
    created_by_kind     text        NOT NULL,
    created_by_id       text        NOT NULL,
    run_id              text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    finalized_at        timestamptz,
    CHECK ((status = 'finalized') = (number IS NOT NULL)),
    CHECK (status = 'pending' OR (sha256 IS NOT NULL AND size_bytes IS NOT NULL AND blob_key IS NOT NULL))
);
CREATE UNIQUE INDEX state_versions_workspace_number_key ON state_versions (workspace_id, number);
CREATE INDEX state_versions_newest_first ON state_versions (workspace_id, created_at DESC, id DESC);

-- Outputs parsed from a finalized state. A sensitive output's value is not
-- kept here at all: it exists only inside the sealed state.
CREATE TABLE state_version_outputs (
    id               text    PRIMARY KEY,
    state_version_id text    NOT NULL REFERENCES state_versions (id),
    name             text    NOT NULL,
    sensitive        boolean NOT NULL,
    type_json        text    NOT NULL,
    value_json       text,
    CHECK (NOT sensitive OR value_json IS NULL)
);
CREATE UNIQUE INDEX state_version_outputs_name_key ON state_version_outputs (state_version_id, name);

-- +goose Down
DROP TABLE state_version_outputs;
DROP TABLE state_versions;
ALTER TABLE workspaces DROP CONSTRAINT workspaces_lock_complete,
    DROP COLUMN execution_mode, DROP COLUMN updated_at, DROP COLUMN locked_by_kind, DROP COLUMN locked_by_id, DROP COLUMN lock_reason, DROP COLUMN locked_at;
DROP TABLE user_tokens;
