-- +goose Up

-- What the worker that ran an attempt really was, as that worker recorded
-- it when the attempt started: the River job that ran it (the workflow),
-- the source revision and the SHA-256 of the worker executable it was
-- built from and as, its version, the state protocol its runner speaks and
-- the policy engine linked into it. The run review's evidence identities
-- derive from these rows, never from constants; NULL for attempts started
-- before this migration, or whose worker could not record it, which the
-- review reports as not recorded.
ALTER TABLE run_attempts ADD COLUMN worker_identity jsonb;

-- +goose Down
ALTER TABLE run_attempts DROP COLUMN worker_identity;
