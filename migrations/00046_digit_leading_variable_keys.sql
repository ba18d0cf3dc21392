-- +goose Up

-- Variable keys may start with a digit, as HCP Terraform's do (its clients
-- write random UUIDs). No configuration can declare such a variable, so a
-- run skips it with a warning; run variables (-var) stay identifiers.
ALTER TABLE workspace_variables DROP CONSTRAINT workspace_variables_key_check;
ALTER TABLE workspace_variables ADD CONSTRAINT workspace_variables_key_check
    CHECK (key ~ '^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$');
ALTER TABLE variable_set_variables DROP CONSTRAINT variable_set_variables_key_check;
ALTER TABLE variable_set_variables ADD CONSTRAINT variable_set_variables_key_check
    CHECK (key ~ '^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$');

-- +goose Down

-- Rows written since keep their keys: the old rule holds for new rows only.
ALTER TABLE variable_set_variables DROP CONSTRAINT variable_set_variables_key_check;
ALTER TABLE variable_set_variables ADD CONSTRAINT variable_set_variables_key_check
    CHECK (key ~ '^[A-Za-z_][A-Za-z0-9_-]{0,127}$') NOT VALID;
ALTER TABLE workspace_variables DROP CONSTRAINT workspace_variables_key_check;
ALTER TABLE workspace_variables ADD CONSTRAINT workspace_variables_key_check
    CHECK (key ~ '^[A-Za-z_][A-Za-z0-9_-]{0,127}$') NOT VALID;
