-- +goose NO TRANSACTION
-- +goose Up

-- An index on the referencing side of every foreign key whose parent rows
-- Cairn deletes. PostgreSQL checks each deleted parent row by looking for
-- children, and without an index on the child's column that look is a
-- scan of the whole child table: deleting a workspace with 20 runs in an
-- organization of 200,000 scanned the runs table once per deleted run
-- (runs.released_run_id) and per configuration version, and the attempts'
-- artifacts and policy checks once per attempt, all while holding the
-- workspace's locks. Foreign keys to organizations and users are left out:
-- an organization is deleted one row at a time, and users never are.
-- schema_test.go keeps every new foreign key to this rule. Columns that
-- are mostly NULL get partial indexes, which the checks (col = $1) can use.
-- Built CONCURRENTLY, each dropped first, for the reasons 00051 gives.
DROP INDEX CONCURRENTLY IF EXISTS runs_by_configuration_version;
CREATE INDEX CONCURRENTLY runs_by_configuration_version ON runs (configuration_version_id);
DROP INDEX CONCURRENTLY IF EXISTS runs_by_released_run;
CREATE INDEX CONCURRENTLY runs_by_released_run ON runs (released_run_id) WHERE released_run_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS run_artifacts_by_attempt;
CREATE INDEX CONCURRENTLY run_artifacts_by_attempt ON run_artifacts (attempt_id);
DROP INDEX CONCURRENTLY IF EXISTS policy_checks_by_attempt;
CREATE INDEX CONCURRENTLY policy_checks_by_attempt ON policy_checks (attempt_id) WHERE attempt_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS policy_overrides_by_result;
CREATE INDEX CONCURRENTLY policy_overrides_by_result ON policy_overrides (policy_result_id);
DROP INDEX CONCURRENTLY IF EXISTS policy_attachments_by_version;
CREATE INDEX CONCURRENTLY policy_attachments_by_version ON policy_attachments (policy_version_id);
DROP INDEX CONCURRENTLY IF EXISTS run_events_by_comment;
CREATE INDEX CONCURRENTLY run_events_by_comment ON run_events (comment_id) WHERE comment_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS run_tokens_by_workspace;
CREATE INDEX CONCURRENTLY run_tokens_by_workspace ON run_tokens (workspace_id);
DROP INDEX CONCURRENTLY IF EXISTS source_ingestions_by_configuration_version;
CREATE INDEX CONCURRENTLY source_ingestions_by_configuration_version ON source_ingestions (configuration_version_id)
    WHERE configuration_version_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS source_ingestions_by_source_settings;
CREATE INDEX CONCURRENTLY source_ingestions_by_source_settings ON source_ingestions (source_settings_id);
DROP INDEX CONCURRENTLY IF EXISTS source_ingestion_deliveries_by_ingestion;
CREATE INDEX CONCURRENTLY source_ingestion_deliveries_by_ingestion ON source_ingestion_deliveries (ingestion_id);
DROP INDEX CONCURRENTLY IF EXISTS sign_in_codes_by_session;
CREATE INDEX CONCURRENTLY sign_in_codes_by_session ON sign_in_codes (session_id);
DROP INDEX CONCURRENTLY IF EXISTS service_account_tokens_by_account;
CREATE INDEX CONCURRENTLY service_account_tokens_by_account ON service_account_tokens (service_account_id);
DROP INDEX CONCURRENTLY IF EXISTS credential_profiles_by_current_version;
CREATE INDEX CONCURRENTLY credential_profiles_by_current_version ON credential_profiles (current_version_id)
    WHERE current_version_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS oauth_grants_by_client;
CREATE INDEX CONCURRENTLY oauth_grants_by_client ON oauth_grants (client_id);
DROP INDEX CONCURRENTLY IF EXISTS registry_module_ingestions_by_version;
CREATE INDEX CONCURRENTLY registry_module_ingestions_by_version ON registry_module_ingestions (version_id)
    WHERE version_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS registry_module_ingestions_by_delivery;
CREATE INDEX CONCURRENTLY registry_module_ingestions_by_delivery ON registry_module_ingestions (delivery_id)
    WHERE delivery_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS sso_test_results_by_provider;
CREATE INDEX CONCURRENTLY sso_test_results_by_provider ON sso_test_results (provider_id);

-- +goose Down

DROP INDEX CONCURRENTLY IF EXISTS sso_test_results_by_provider;
DROP INDEX CONCURRENTLY IF EXISTS registry_module_ingestions_by_delivery;
DROP INDEX CONCURRENTLY IF EXISTS registry_module_ingestions_by_version;
DROP INDEX CONCURRENTLY IF EXISTS oauth_grants_by_client;
DROP INDEX CONCURRENTLY IF EXISTS credential_profiles_by_current_version;
DROP INDEX CONCURRENTLY IF EXISTS service_account_tokens_by_account;
DROP INDEX CONCURRENTLY IF EXISTS sign_in_codes_by_session;
DROP INDEX CONCURRENTLY IF EXISTS source_ingestion_deliveries_by_ingestion;
DROP INDEX CONCURRENTLY IF EXISTS source_ingestions_by_source_settings;
DROP INDEX CONCURRENTLY IF EXISTS source_ingestions_by_configuration_version;
DROP INDEX CONCURRENTLY IF EXISTS run_tokens_by_workspace;
DROP INDEX CONCURRENTLY IF EXISTS run_events_by_comment;
DROP INDEX CONCURRENTLY IF EXISTS policy_attachments_by_version;
DROP INDEX CONCURRENTLY IF EXISTS policy_overrides_by_result;
DROP INDEX CONCURRENTLY IF EXISTS policy_checks_by_attempt;
DROP INDEX CONCURRENTLY IF EXISTS run_artifacts_by_attempt;
DROP INDEX CONCURRENTLY IF EXISTS runs_by_released_run;
DROP INDEX CONCURRENTLY IF EXISTS runs_by_configuration_version;
