-- +goose Up

-- A workspace's state is readable by another workspace's runs only when it
-- shares it: with every workspace of its organization (global_remote_state)
-- or with the workspaces it lists as consumers. Existing workspaces share
-- with nobody, as new HCP workspaces do.
ALTER TABLE workspaces ADD COLUMN global_remote_state boolean NOT NULL DEFAULT false;

CREATE TABLE workspace_remote_state_consumers (
    organization_id       text        NOT NULL REFERENCES organizations (id),
    workspace_id          text        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    consumer_workspace_id text        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    created_at            timestamptz NOT NULL DEFAULT now(),
    created_by            text        NOT NULL,
    PRIMARY KEY (workspace_id, consumer_workspace_id),
    CHECK (workspace_id <> consumer_workspace_id)
);
-- "Consumed by" and the consumer's own lookups go by the consumer.
CREATE INDEX workspace_remote_state_consumers_consumer ON workspace_remote_state_consumers (consumer_workspace_id);

-- +goose Down
DROP TABLE workspace_remote_state_consumers;
ALTER TABLE workspaces DROP COLUMN global_remote_state;
