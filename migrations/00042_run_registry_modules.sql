-- +goose Up

-- The registry module versions a run's sandboxed CLI downloaded, one row per
-- attempt and version, written by the modules.v1 download endpoint when a
-- run token asks. It is evidence: it names the version by its address,
-- string, ID and archive digest as they were when downloaded, and refers to
-- no registry row, so revoking or deleting the version never removes it.
-- deprecation_reason is the version's deprecation at that moment (null: not
-- deprecated), which the runner turns into a warning in the run's log.
CREATE TABLE run_registry_modules (
    attempt_id          text        NOT NULL REFERENCES run_attempts (id),
    version_id          text        NOT NULL,
    run_id              text        NOT NULL REFERENCES runs (id),
    organization_id     text        NOT NULL REFERENCES organizations (id),
    module_address      text        NOT NULL CHECK (length(module_address) <= 400),
    version             text        NOT NULL CHECK (length(version) <= 200),
    archive_sha256      text        NOT NULL CHECK (archive_sha256 ~ '^[0-9a-f]{64}$'),
    deprecated          boolean     NOT NULL,
    deprecation_reason  text        CHECK (length(deprecation_reason) <= 1000),
    downloaded_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (attempt_id, version_id)
);
CREATE INDEX run_registry_modules_run ON run_registry_modules (run_id, downloaded_at);

-- +goose Down
DROP TABLE run_registry_modules;
