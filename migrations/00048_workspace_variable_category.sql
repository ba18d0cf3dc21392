-- +goose Up

-- A workspace variable is an input variable (terraform) or an environment
-- variable of the run's tofu commands (env), as a variable set's are and
-- as HCP Terraform's are; one key per category.
ALTER TABLE workspace_variables
    ADD COLUMN category text NOT NULL DEFAULT 'terraform' CHECK (category IN ('terraform', 'env'));
DROP INDEX workspace_variables_workspace_key_key;
CREATE UNIQUE INDEX workspace_variables_workspace_category_key_key ON workspace_variables (workspace_id, category, key);

-- +goose Down

DELETE FROM workspace_variables WHERE category = 'env';
DROP INDEX workspace_variables_workspace_category_key_key;
CREATE UNIQUE INDEX workspace_variables_workspace_key_key ON workspace_variables (workspace_id, key);
ALTER TABLE workspace_variables DROP COLUMN category;
