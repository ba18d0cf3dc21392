-- +goose Up

-- The dashboard's own sessions (scs). The data holds the API session token
-- the dashboard presents upstream, so the browser never holds it; rows
-- are removed on sign-out and swept after expiry.
CREATE TABLE dashboard_sessions (
    token  text        PRIMARY KEY,
    data   bytea       NOT NULL,
    expiry timestamptz NOT NULL
);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expiry);

-- +goose Down
DROP TABLE dashboard_sessions;
