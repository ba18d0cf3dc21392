-- +goose Up

-- A saved plan also keeps its redacted JSON plan (with the provider schemas
-- its rendering needs): what `tofu show` of a saved cloud plan reads from
-- GET /api/v2/plans/{id}/json-output-redacted.
ALTER TABLE run_artifacts DROP CONSTRAINT run_artifacts_kind_check;
ALTER TABLE run_artifacts ADD CONSTRAINT run_artifacts_kind_check
    CHECK (kind IN ('plan_file', 'plan_json', 'plan_diff', 'emergency_state', 'plan_json_redacted'));

-- +goose Down
-- The objects of the rows removed stay for the orphan sweep.
DELETE FROM run_artifacts WHERE kind = 'plan_json_redacted';
ALTER TABLE run_artifacts DROP CONSTRAINT run_artifacts_kind_check;
ALTER TABLE run_artifacts ADD CONSTRAINT run_artifacts_kind_check
    CHECK (kind IN ('plan_file', 'plan_json', 'plan_diff', 'emergency_state'));
