-- +goose Up

-- What each attempt's sandbox really applied, as its worker recorded it:
-- the driver, the isolation (namespaces, none, or unavailable with a
-- reason code), the namespaces, and each resource ceiling with the
-- mechanism that enforced it. The review derives the run's sandbox base
-- profile from these rows. NULL until the attempt creates (or refuses)
-- its sandbox, and for attempts recorded before this migration.
ALTER TABLE run_attempts ADD COLUMN sandbox_profile jsonb;

-- +goose Down
ALTER TABLE run_attempts DROP COLUMN sandbox_profile;
