-- +goose Up

-- A run's policy check is reserved with its plan evidence, before the
-- evaluation ends (SPEC §3): status running, bound to the plan and to the
-- plan attempt that reserved it, with no input digest, composition digest,
-- outcome or evaluation time. The policy commit completes it once: from
-- then on the row never changes, so its input digest binds exactly once.
-- A check left running by a run that ended is reported errored.
ALTER TABLE policy_checks
    ADD COLUMN status      text NOT NULL DEFAULT 'completed' CHECK (status IN ('running', 'completed')),
    ADD COLUMN attempt_id  text REFERENCES run_attempts (id),
    ADD COLUMN reserved_at timestamptz;
UPDATE policy_checks SET reserved_at = evaluated_at;
ALTER TABLE policy_checks
    ALTER COLUMN status DROP DEFAULT,
    ALTER COLUMN reserved_at SET NOT NULL,
    ALTER COLUMN reserved_at SET DEFAULT now(),
    ALTER COLUMN composition_digest DROP NOT NULL,
    ALTER COLUMN outcome DROP NOT NULL,
    ALTER COLUMN evaluated_at DROP NOT NULL,
    ALTER COLUMN evaluated_at DROP DEFAULT,
    ADD CONSTRAINT policy_checks_evidence CHECK (
        (status = 'running' AND input_digest IS NULL AND composition_digest IS NULL AND outcome IS NULL AND evaluated_at IS NULL) OR
        (status = 'completed' AND composition_digest IS NOT NULL AND outcome IS NOT NULL AND evaluated_at IS NOT NULL));

-- +goose StatementBegin
CREATE FUNCTION policy_check_completes_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status <> 'running' THEN
        RAISE EXCEPTION 'policy check % is complete', OLD.id;
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER policy_checks_complete_once
    BEFORE UPDATE ON policy_checks
    FOR EACH ROW EXECUTE FUNCTION policy_check_completes_once();

-- +goose Down
DROP TRIGGER policy_checks_complete_once ON policy_checks;
DROP FUNCTION policy_check_completes_once();
DELETE FROM policy_checks WHERE status = 'running';
ALTER TABLE policy_checks
    DROP CONSTRAINT policy_checks_evidence,
    ALTER COLUMN composition_digest SET NOT NULL,
    ALTER COLUMN outcome SET NOT NULL,
    ALTER COLUMN evaluated_at SET NOT NULL,
    ALTER COLUMN evaluated_at SET DEFAULT now(),
    DROP COLUMN reserved_at,
    DROP COLUMN attempt_id,
    DROP COLUMN status;
