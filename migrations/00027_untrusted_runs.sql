-- +goose Up

-- Who started a run, and whether its configuration is code no trusted
-- person has looked at. initiator is where the change came from (a person,
-- an agent acting for one, a service-account token, the code host, the
-- operator, a run trigger); workload-identity tokens carry it as
-- run_initiator so a cloud's trust policy can tell them apart.
--
-- An untrusted run (an agent's proposal, a fork's pull request) plans
-- without the workspace's state, its sensitive variables, its credential
-- profiles and a run token: it can never wait for approval or apply, which
-- the status check below holds whatever the code does. A person releases an
-- agent's run by starting a new run of the same configuration with them
-- (released_run_id here, released_from_run_id there).
ALTER TABLE runs
    ADD COLUMN initiator            text NOT NULL DEFAULT 'user'
        CHECK (initiator IN ('user', 'agent', 'service_account', 'code_host', 'operator', 'trigger')),
    ADD COLUMN untrusted_reason     text CHECK (untrusted_reason IN ('agent', 'fork_pull_request')),
    ADD COLUMN released_run_id      text REFERENCES runs (id),
    ADD COLUMN released_by_kind     text,
    ADD COLUMN released_by_id       text,
    ADD COLUMN released_at          timestamptz,
    ADD COLUMN released_from_run_id text REFERENCES runs (id),
    ADD CONSTRAINT runs_release_complete CHECK (
        (released_run_id IS NULL) = (released_at IS NULL) AND
        (released_run_id IS NULL) = (released_by_kind IS NULL) AND
        (released_run_id IS NULL) = (released_by_id IS NULL)),
    ADD CONSTRAINT runs_release_of_agent_runs CHECK (released_run_id IS NULL OR untrusted_reason = 'agent'),
    ADD CONSTRAINT runs_untrusted_never_apply CHECK (untrusted_reason IS NULL OR status NOT IN
        ('awaiting_approval', 'policy_override', 'apply_queued', 'applying', 'applied', 'recovery_required', 'recovered'));

-- The agent (its OAuth client) that uploaded a configuration. Its code is
-- untrusted wherever it runs: a person's run of it (the workspace's
-- current configuration, say) plans as the agent's own would, until a
-- person releases it.
ALTER TABLE configuration_versions ADD COLUMN created_by_agent text;

-- Runs from before this migration: the creating principal says enough
-- (agents acted as their user and stay recorded as people).
UPDATE runs SET initiator = CASE created_by_kind
    WHEN 'service_account' THEN 'service_account'
    WHEN 'code_host' THEN 'code_host'
    WHEN 'operator' THEN 'operator'
    ELSE 'user' END;

-- A run is released at most once.
CREATE UNIQUE INDEX runs_released_from ON runs (released_from_run_id) WHERE released_from_run_id IS NOT NULL;

-- +goose Down
ALTER TABLE configuration_versions DROP COLUMN created_by_agent;
DROP INDEX runs_released_from;
ALTER TABLE runs
    DROP CONSTRAINT runs_untrusted_never_apply,
    DROP CONSTRAINT runs_release_of_agent_runs,
    DROP CONSTRAINT runs_release_complete,
    DROP COLUMN released_from_run_id,
    DROP COLUMN released_at,
    DROP COLUMN released_by_id,
    DROP COLUMN released_by_kind,
    DROP COLUMN released_run_id,
    DROP COLUMN untrusted_reason,
    DROP COLUMN initiator;
