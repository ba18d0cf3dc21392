-- +goose Up

-- Sealed log segments: a run's oldest log chunks, moved out of
-- run_log_chunks into one sealed blob once the table holds more than a
-- threshold of them. A segment is one phase's chunks first_sequence through
-- last_sequence; phase_offset is where its bytes start in that phase's log,
-- so a byte range of the log is served without reading what precedes it.
CREATE TABLE run_log_segments (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    run_id          text        NOT NULL REFERENCES runs (id),
    phase           text        NOT NULL CHECK (phase IN ('plan', 'apply')),
    first_sequence  bigint      NOT NULL CHECK (first_sequence >= 1),
    last_sequence   bigint      NOT NULL CHECK (last_sequence >= first_sequence),
    chunk_count     integer     NOT NULL CHECK (chunk_count >= 1),
    phase_offset    bigint      NOT NULL CHECK (phase_offset >= 0),
    text_bytes      bigint      NOT NULL CHECK (text_bytes >= 0),
    blob_key        text        NOT NULL UNIQUE,
    sha256          bytea       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, first_sequence)
);
CREATE INDEX run_log_segments_phase ON run_log_segments (run_id, phase, first_sequence);

-- Set once any of a run's output was dropped at a log cap; the log itself
-- carries a line saying so where the cut happened.
ALTER TABLE runs ADD COLUMN log_truncated boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE runs DROP COLUMN log_truncated;
DROP TABLE run_log_segments;
