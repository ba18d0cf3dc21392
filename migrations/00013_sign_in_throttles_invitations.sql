-- +goose Up

-- Sign-in and sign-up throttles, shared by every API replica. A row is one
-- subject: an (account, client address) pair, a client address, or a client
-- address signing up. Subjects are keyed hashes, so the table names neither
-- e-mails nor addresses. level counts recent attempts and drains over time;
-- the delay a subject must wait grows with it. Rows untouched for a day are
-- swept.
CREATE TABLE sign_in_throttles (
    subject    text             PRIMARY KEY,
    level      double precision NOT NULL CHECK (level >= 0),
    updated_at timestamptz      NOT NULL
);
CREATE INDEX sign_in_throttles_updated ON sign_in_throttles (updated_at);

-- The per-e-mail failure log it replaces locked an account for anyone who
-- knew its address.
DROP TABLE sign_in_failures;

-- Invitations to join an organization. An invitation names an e-mail and a
-- role; only an account with that e-mail that also presents the secret
-- token the inviter handed over can accept it, so registering someone
-- else's address first gains nothing. Only a keyed hash of the token is
-- stored.
CREATE TABLE invitations (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    email           text        NOT NULL CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
    role            text        NOT NULL CHECK (role IN ('owner', 'admin', 'writer', 'reader')),
    token_hash      bytea       NOT NULL,
    inviter_id      text        NOT NULL REFERENCES users (id),
    status          text        NOT NULL DEFAULT 'pending'
                                CHECK (status IN ('pending', 'accepted', 'rejected', 'canceled', 'expired')),
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL CHECK (expires_at > created_at),
    -- Who closed it (the invitee for accepted or rejected, a member for
    -- canceled; nobody for expired) and when.
    closed_by       text        REFERENCES users (id),
    closed_at       timestamptz,
    CHECK ((status = 'pending') = (closed_at IS NULL))
);
-- One open invitation per address and organization: inviting again means
-- canceling first, so an old link never silently grants a newer role.
CREATE UNIQUE INDEX invitations_pending_key ON invitations (organization_id, email) WHERE status = 'pending';
CREATE INDEX invitations_email_pending ON invitations (email) WHERE status = 'pending';
CREATE INDEX invitations_expires ON invitations (expires_at);

-- +goose Down
DROP TABLE invitations;
CREATE TABLE sign_in_failures (
    id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subject   text        NOT NULL,
    failed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sign_in_failures_recent ON sign_in_failures (subject, failed_at);
DROP TABLE sign_in_throttles;
