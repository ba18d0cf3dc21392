-- +goose Up

-- Organizations choose how a workspace created without an explicit mode
-- (by the CLI through the remote-backend API, or /v1) runs: remote, as
-- HCP Terraform does, so a CLI-created workspace runs managed plans.
ALTER TABLE organizations
    ADD COLUMN default_execution_mode text NOT NULL DEFAULT 'remote'
        CHECK (default_execution_mode IN ('local', 'remote'));

-- The reason a person gave for discarding a run, trimmed and bounded as
-- the API accepts it; null when none was given.
ALTER TABLE runs
    ADD COLUMN decision_reason text CHECK (char_length(decision_reason) BETWEEN 1 AND 500);

-- +goose Down
ALTER TABLE runs DROP COLUMN decision_reason;
ALTER TABLE organizations DROP COLUMN default_execution_mode;
