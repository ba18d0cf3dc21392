-- +goose Up

CREATE TABLE users (
    id            text        PRIMARY KEY,
    email         text        NOT NULL CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
    name          text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    -- argon2id in PHC string form: the parameters travel with the hash.
    password_hash text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    banned_at     timestamptz
);
CREATE UNIQUE INDEX users_email_key ON users (email);

CREATE TABLE organizations (
    id         text        PRIMARY KEY,
    name       text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    -- The slug is also the organization name of the remote-backend API, so
    -- it is fixed at creation.
    slug       text        NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX organizations_slug_key ON organizations (slug);

CREATE TABLE memberships (
    organization_id text        NOT NULL REFERENCES organizations (id),
    user_id         text        NOT NULL REFERENCES users (id),
    role            text        NOT NULL CHECK (role IN ('owner', 'admin', 'writer', 'reader')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);

-- Server-side sessions. Only a keyed hash of the token is stored, so a
-- database read does not yield usable cookies.
CREATE TABLE sessions (
    id                     text        PRIMARY KEY,
    token_hash             bytea       NOT NULL,
    user_id                text        NOT NULL REFERENCES users (id),
    active_organization_id text        REFERENCES organizations (id),
    created_at             timestamptz NOT NULL DEFAULT now(),
    expires_at             timestamptz NOT NULL,
    -- Last password entry for this session: sign-in or step-up.
    reauthenticated_at     timestamptz NOT NULL DEFAULT now(),
    revoked_at             timestamptz
);
CREATE UNIQUE INDEX sessions_token_hash_key ON sessions (token_hash);
CREATE INDEX sessions_user ON sessions (user_id) WHERE revoked_at IS NULL;

-- Failed sign-ins, kept briefly for rate limiting across API replicas.
-- Subjects are keyed hashes (of an e-mail) or client addresses, never raw
-- e-mails, so the table does not reveal who tried which account.
CREATE TABLE sign_in_failures (
    id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subject   text        NOT NULL,
    failed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sign_in_failures_recent ON sign_in_failures (subject, failed_at);

-- audit_events and idempotency_records deliberately have no foreign key to
-- organizations: they are append-heavy logs written by every mutation, their
-- organization always comes from an authenticated principal, organizations
-- are never deleted, and a key-share lock on the organization row from each
-- of them made concurrent mutations of one tenant contend on that row.

-- +goose Down
DROP TABLE sign_in_failures;
DROP TABLE sessions;
DROP TABLE memberships;
DROP TABLE organizations;
DROP TABLE users;
