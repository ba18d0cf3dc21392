-- +goose Up

-- Per-run options a run is created with, as HCP Terraform clients send
-- them: resource targets and forced replacements, the refresh mode,
-- whether an empty plan still goes on to an apply, whether the run is a
-- saved plan (it plans without holding the workspace queue and waits for
-- an explicit apply), and run variables (non-sensitive HCL expressions
-- that override workspace variables of the same key for this run only).
-- They are fixed at creation: the run's input snapshot records them, so
-- its digest changes with them, and the runner checks them against it.
ALTER TABLE runs
    ADD COLUMN target_addrs      text[]  NOT NULL DEFAULT '{}' CHECK (cardinality(target_addrs) <= 100),
    ADD COLUMN replace_addrs     text[]  NOT NULL DEFAULT '{}' CHECK (cardinality(replace_addrs) <= 100),
    ADD COLUMN refresh           boolean NOT NULL DEFAULT true,
    ADD COLUMN refresh_only      boolean NOT NULL DEFAULT false,
    ADD COLUMN allow_empty_apply boolean NOT NULL DEFAULT false,
    ADD COLUMN save_plan         boolean NOT NULL DEFAULT false,
    ADD COLUMN run_variables     jsonb   NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(run_variables) = 'array' AND jsonb_array_length(run_variables) <= 100),
    -- Refreshing is what a refresh-only plan does.
    ADD CONSTRAINT runs_refresh_only_refreshes CHECK (NOT refresh_only OR refresh),
    -- Only a run that can apply has anything to save or to apply empty.
    ADD CONSTRAINT runs_apply_options_need_apply CHECK ((NOT save_plan AND NOT allow_empty_apply) OR kind = 'plan_and_apply');

-- +goose Down
ALTER TABLE runs
    DROP CONSTRAINT runs_apply_options_need_apply,
    DROP CONSTRAINT runs_refresh_only_refreshes,
    DROP COLUMN run_variables,
    DROP COLUMN save_plan,
    DROP COLUMN allow_empty_apply,
    DROP COLUMN refresh_only,
    DROP COLUMN refresh,
    DROP COLUMN replace_addrs,
    DROP COLUMN target_addrs;
