-- +goose Up

-- Whether a state version's resource_count was read from its resources
-- array. A state whose resources Cairn cannot read (OpenTofu's client-side
-- state encryption stores them encrypted) has an unknown count, which the
-- delete rules treat as managing resources rather than none.
ALTER TABLE state_versions ADD COLUMN resources_counted boolean NOT NULL DEFAULT true;

-- +goose Down

ALTER TABLE state_versions DROP COLUMN resources_counted;
