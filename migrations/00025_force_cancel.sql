-- +goose Up

-- A force-cancel is recorded on the run: the worker holding the run's
-- attempt reads it with its heartbeat and kills the sandbox at once,
-- without the interrupt grace a cancel gives.
ALTER TABLE runs ADD COLUMN force_canceled_at timestamptz;

-- +goose Down
ALTER TABLE runs DROP COLUMN force_canceled_at;
