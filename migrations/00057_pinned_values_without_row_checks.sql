-- +goose Up

-- A run pins one row per effective variable in the transaction that creates
-- it (workspace.PinValues), and each row's two foreign keys (to the run and
-- to the organization) made PostgreSQL fire a check per row: a lookup of the
-- parent and a share lock on it. With twenty variable sets of a hundred
-- variables, 2,100 rows and 4,200 checks of the same two parents took most
-- of the run's creation. The rows are only ever written by the code that
-- has just inserted their run, in the same transaction, with the run's own
-- organization, so the checks proved nothing the writer does not; what the
-- foreign key still did for these rows was go with their run. A trigger now
-- does that, once per statement that deletes runs (cascades from a
-- workspace or an organization included), so no pinned value, sealed or
-- plain, outlives its run.
ALTER TABLE run_variable_values
    DROP CONSTRAINT run_variable_values_run_id_fkey,
    DROP CONSTRAINT run_variable_values_organization_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION run_variable_values_go_with_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM run_variable_values v USING deleted_runs d WHERE v.run_id = d.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER runs_delete_pinned_values
    AFTER DELETE ON runs REFERENCING OLD TABLE AS deleted_runs
    FOR EACH STATEMENT EXECUTE FUNCTION run_variable_values_go_with_runs();

-- +goose Down
DROP TRIGGER runs_delete_pinned_values ON runs;
DROP FUNCTION run_variable_values_go_with_runs();
DELETE FROM run_variable_values v WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = v.run_id);
ALTER TABLE run_variable_values
    ADD CONSTRAINT run_variable_values_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE CASCADE,
    ADD CONSTRAINT run_variable_values_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id);
