-- +goose Up

-- An organization's contact e-mail, as the remote-backend API's
-- organizations carry one ('' when none was given).
ALTER TABLE organizations ADD COLUMN email text NOT NULL DEFAULT '' CHECK (length(email) <= 254);

-- Workspace tags: names of the organization's own, bound to any of its
-- workspaces; the remote-backend API lists and filters workspaces by them.
-- A tag outlives its last workspace (HCP keeps it, and it keeps its ID).
CREATE TABLE workspace_tags (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    name            text        NOT NULL CHECK (name ~ '^[A-Za-z0-9:_-]{1,255}$'),
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workspace_tags_organization_name_key UNIQUE (organization_id, name)
);
CREATE TABLE workspace_tag_bindings (
    workspace_id text        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    tag_id       text        NOT NULL REFERENCES workspace_tags (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, tag_id)
);
CREATE INDEX workspace_tag_bindings_by_tag ON workspace_tag_bindings (tag_id);

-- +goose Down
DROP TABLE workspace_tag_bindings;
DROP TABLE workspace_tags;
ALTER TABLE organizations DROP COLUMN email;
