-- +goose Up

-- No bearer secret at rest in clear. A stored idempotent answer may carry a
-- token shown only once (user and service-account token issuance), so
-- answers are now sealed to their record; answers stored before were in
-- clear and are dropped (a retry of such a request runs it again).
DELETE FROM idempotency_records;
ALTER TABLE idempotency_records RENAME COLUMN response_body TO response_sealed;
COMMENT ON COLUMN idempotency_records.response_sealed IS
    'The serialized domain body, sealed and bound to organization, principal, key and fingerprint.';
COMMENT ON COLUMN idempotency_records.fingerprint IS
    'HMAC over tenant, principal, method, route template, resolved path, canonical query and canonical body.';

-- The dashboard's sessions are keyed by a keyed hash of the cookie's token
-- and their data (which holds the API session token the dashboard presents
-- upstream) is sealed to that row. Sessions stored in clear are dropped:
-- their users sign in again.
DROP TABLE dashboard_sessions;
CREATE TABLE dashboard_sessions (
    token_hash bytea       PRIMARY KEY,
    data       bytea       NOT NULL,
    expiry     timestamptz NOT NULL
);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expiry);

-- +goose Down
DROP TABLE dashboard_sessions;
CREATE TABLE dashboard_sessions (
    token  text        PRIMARY KEY,
    data   bytea       NOT NULL,
    expiry timestamptz NOT NULL
);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expiry);

DELETE FROM idempotency_records;
ALTER TABLE idempotency_records RENAME COLUMN response_sealed TO response_body;
COMMENT ON COLUMN idempotency_records.response_body IS NULL;
COMMENT ON COLUMN idempotency_records.fingerprint IS NULL;
