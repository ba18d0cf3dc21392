-- +goose Up

-- The policy stage has a log of its own, between the plan's and the
-- apply's: which attachments it evaluates in order, each result with its
-- enforcement, and the outcome. Its chunks stream on the live run channel
-- like the plan's and the apply's, and it is sealed into segments by the
-- same rule (a policy log that outgrew the table).
--
-- This runs while the previous release serves, which writes plan and
-- apply chunks only. The wider checks are added NOT VALID: every existing
-- row passed the narrower one, so the table is not scanned under its lock,
-- and new rows are checked all the same. Waiting at most 5 s for the lock
-- keeps log writes from queueing behind it; a migration that gives up is
-- simply run again.
SET LOCAL lock_timeout = '5s';

ALTER TABLE run_log_chunks DROP CONSTRAINT run_log_chunks_phase_check,
    ADD CONSTRAINT run_log_chunks_phase_check CHECK (phase IN ('plan', 'policy', 'apply')) NOT VALID;
ALTER TABLE run_log_segments DROP CONSTRAINT run_log_segments_phase_check,
    ADD CONSTRAINT run_log_segments_phase_check CHECK (phase IN ('plan', 'policy', 'apply')) NOT VALID;

-- +goose Down

-- Policy chunks written since stay: the old rule holds for new rows only.
ALTER TABLE run_log_segments DROP CONSTRAINT run_log_segments_phase_check,
    ADD CONSTRAINT run_log_segments_phase_check CHECK (phase IN ('plan', 'apply')) NOT VALID;
ALTER TABLE run_log_chunks DROP CONSTRAINT run_log_chunks_phase_check,
    ADD CONSTRAINT run_log_chunks_phase_check CHECK (phase IN ('plan', 'apply')) NOT VALID;
