-- +goose Up

-- The variable values a run pinned, copied in the transaction that created
-- it, so editing or deleting a variable never changes or breaks a queued or
-- approved run. Sensitive values are sealed again under CAIRN_MASTER_KEY
-- with the run and variable as associated data, so a copy cannot be moved
-- to another run. There is no foreign key to the variable on purpose: the
-- copy outlives it. Rows go when the run ends (or with the run).
CREATE TABLE run_variable_values (
    run_id          text    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    organization_id text    NOT NULL REFERENCES organizations (id),
    variable_id     text    NOT NULL,
    value_version   integer NOT NULL,
    -- Exactly one of value (plain) and sealed_value (sensitive) is set.
    value           text,
    sealed_value    bytea,
    PRIMARY KEY (run_id, variable_id),
    CHECK ((value IS NULL) <> (sealed_value IS NULL))
);

-- The review binding an approval named. Starting the apply compares the
-- run's binding and policy gate with it again: an approval authorizes
-- exactly that plan and policy result, and nothing that replaced them.
ALTER TABLE runs ADD COLUMN approved_binding jsonb;
-- Runs approved before this column existed carry their current review,
-- which their approval matched exactly.
UPDATE runs SET approved_binding = jsonb_build_object(
    'plan_digest', encode(plan_digest, 'hex'),
    'policy_result_digest', encode(policy_result_digest, 'hex'),
    'predecessor_state_version_id', predecessor_state_version_id,
    'dependency_lock_digest', encode(dependency_lock_digest, 'hex'))
WHERE status = 'apply_queued' AND decision_action = 'approved';

-- +goose Down
ALTER TABLE runs DROP COLUMN approved_binding;
DROP TABLE run_variable_values;
