-- +goose Up

-- One SCIM bearer token per organization, for its identity provider's
-- provisioning client. Only a keyed hash is kept: the plaintext is shown
-- once, and generating a new one replaces the row.
CREATE TABLE scim_tokens (
    organization_id text        PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    token_hash      bytea       NOT NULL,
    created_by      text        NOT NULL,
    created_at      timestamptz NOT NULL,
    last_used_at    timestamptz
);
CREATE UNIQUE INDEX scim_tokens_hash_key ON scim_tokens (token_hash);

-- The people an organization's SCIM client provisioned: the organization
-- owns the account (SCIM never reaches anyone else), and the row keeps the
-- SCIM attributes the client sent so that reads give them back. Active is
-- not stored here: it is the account's banned state. A deleted resource
-- keeps its row (deleted_at) as the record of who owned the account.
CREATE TABLE scim_users (
    user_id         text        PRIMARY KEY REFERENCES users (id),
    organization_id text        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_name       text        NOT NULL CHECK (length(user_name) BETWEEN 1 AND 256),
    external_id     text        CHECK (length(external_id) BETWEEN 1 AND 256),
    display_name    text        CHECK (length(display_name) <= 256),
    attributes      jsonb       NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    deleted_at      timestamptz
);
-- userName is unique per organization and compared case-insensitively (RFC
-- 7643 §4.1.1); the provisioning client's lookup before every create,
-- userName eq "…", is this index.
CREATE UNIQUE INDEX scim_users_user_name_key ON scim_users (organization_id, lower(user_name)) WHERE deleted_at IS NULL;
CREATE INDEX scim_users_external_id ON scim_users (organization_id, external_id) WHERE deleted_at IS NULL;
CREATE INDEX scim_users_created ON scim_users (organization_id, created_at, user_id) WHERE deleted_at IS NULL;

-- A team's SCIM externalId, when its client sent one. Teams are SCIM's
-- groups; the row goes with the team.
CREATE TABLE scim_groups (
    team_id         text NOT NULL PRIMARY KEY,
    organization_id text NOT NULL,
    external_id     text CHECK (length(external_id) BETWEEN 1 AND 256),
    FOREIGN KEY (team_id, organization_id) REFERENCES teams (id, organization_id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE scim_groups;
DROP TABLE scim_users;
DROP TABLE scim_tokens;
