-- +goose Up

-- Idempotency records make a retried mutation return the first answer instead
-- of acting twice. A record is written in the same transaction as the
-- mutation it describes, so it exists exactly when the mutation committed.
-- Keys are scoped to one principal in one organization.
CREATE TABLE idempotency_records (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    organization_id  text        NOT NULL,
    principal_id     text        NOT NULL,
    idempotency_key  text        NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    -- HMAC over principal, tenant, method, route and canonical body: the
    -- stored value cannot be used to guess a secret that was in the body.
    fingerprint      bytea       NOT NULL,
    method           text        NOT NULL,
    route            text        NOT NULL,
    response_status  integer     NOT NULL CHECK (response_status BETWEEN 200 AND 299),
    -- The exact serialized domain body (the envelope's data), kept as bytes so
    -- a replay is byte-identical to the first answer.
    response_body    bytea       NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,
    CONSTRAINT idempotency_records_scope_key UNIQUE (organization_id, principal_id, idempotency_key)
);
CREATE INDEX idempotency_records_expiry ON idempotency_records (expires_at);

-- Audit events are append-only evidence of every mutation, written in the
-- mutation's transaction. Evidence holds sanitized identifiers and enums only.
CREATE TABLE audit_events (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL,
    action          text        NOT NULL CHECK (action ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$'),
    actor_type      text        NOT NULL CHECK (actor_type IN ('user', 'service_account', 'operator', 'system', 'run')),
    actor_id        text        NOT NULL,
    target_type     text        NOT NULL DEFAULT '',
    target_id       text        NOT NULL DEFAULT '',
    request_id      text        NOT NULL DEFAULT '',
    evidence        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    -- clock_timestamp, not now(): several events of one transaction still
    -- order the way they were appended.
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX audit_events_newest_first ON audit_events (organization_id, created_at DESC, id DESC);

-- +goose StatementBegin
CREATE FUNCTION audit_events_are_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_events_append_only
    BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_are_immutable();

-- +goose Down
DROP TABLE audit_events;
DROP FUNCTION audit_events_are_immutable();
DROP TABLE idempotency_records;
