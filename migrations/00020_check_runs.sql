-- +goose Up

-- One code-host check run per managed run (SPEC §6 "Outbound effects").
-- The row is the publication's reservation: it exists before any provider
-- write, keyed by organization, repository and run. desired is the payload
-- the run's current state calls for; published_digest is the digest of the
-- last payload the provider accepted; pending says they differ and a sync is
-- owed. check_run_id is written only from a verified provider answer. The
-- lease keeps two workers from creating the same check at once; create_sent
-- records that a create may have reached the provider, so a later attempt
-- searches the commit's checks by external_id before creating again.
CREATE TABLE check_run_publications (
    run_id           text PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    organization_id  text NOT NULL,
    installation_id  bigint NOT NULL CHECK (installation_id > 0),
    repository_id    bigint NOT NULL CHECK (repository_id > 0),
    repository_owner text NOT NULL CHECK (repository_owner <> '' AND length(repository_owner) <= 100),
    repository_name  text NOT NULL CHECK (repository_name <> '' AND length(repository_name) <= 100),
    head_sha         text NOT NULL CHECK (head_sha ~ '^[0-9a-f]{40}$'),
    check_name       text NOT NULL CHECK (check_name <> '' AND length(check_name) <= 200),
    check_run_id     bigint CHECK (check_run_id > 0),
    desired          jsonb NOT NULL,
    desired_digest   bytea NOT NULL CHECK (length(desired_digest) = 32),
    published_digest bytea CHECK (length(published_digest) = 32),
    pending          boolean NOT NULL,
    create_sent      boolean NOT NULL DEFAULT false,
    lease_token      text,
    lease_expires_at timestamptz,
    failures         integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
    last_error       text CHECK (length(last_error) <= 200),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, repository_id, run_id),
    CHECK ((lease_token IS NULL) = (lease_expires_at IS NULL))
);

-- The reconciler reads only pending publications.
CREATE INDEX check_run_publications_pending ON check_run_publications (updated_at) WHERE pending;

-- +goose Down
DROP TABLE check_run_publications;
