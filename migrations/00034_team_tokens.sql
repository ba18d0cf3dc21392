-- +goose Up

-- A team's API token (HCP's legacy single team token): a principal whose
-- permissions are exactly its team's grants, resolved on every request.
-- One per team, a new one replaces it; only a keyed hash of the plaintext
-- is kept. Deleting the team deletes its token.
CREATE TABLE team_tokens (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL,
    team_id         text        NOT NULL UNIQUE,
    token_hash      bytea       NOT NULL UNIQUE,
    created_by_kind text        NOT NULL,
    created_by      text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    last_used_at    timestamptz,
    FOREIGN KEY (team_id, organization_id) REFERENCES teams (id, organization_id) ON DELETE CASCADE
);

-- A team token holds workspace locks and appears in audit evidence as its
-- team.
ALTER TABLE workspaces DROP CONSTRAINT workspaces_locked_by_kind_check,
    ADD CONSTRAINT workspaces_locked_by_kind_check
        CHECK (locked_by_kind IN ('user', 'service_account', 'operator', 'run', 'team'));
ALTER TABLE audit_events DROP CONSTRAINT audit_events_actor_type_check,
    ADD CONSTRAINT audit_events_actor_type_check
        CHECK (actor_type IN ('user', 'service_account', 'operator', 'system', 'run', 'team'));

-- Projects carry HCP's description.
ALTER TABLE projects ADD COLUMN description text NOT NULL DEFAULT '' CHECK (length(description) <= 2000);

-- +goose Down
ALTER TABLE projects DROP COLUMN description;
UPDATE workspaces SET locked_by_kind = NULL, locked_by_id = NULL, locked_at = NULL, lock_reason = ''
    WHERE locked_by_kind = 'team';
ALTER TABLE workspaces DROP CONSTRAINT workspaces_locked_by_kind_check,
    ADD CONSTRAINT workspaces_locked_by_kind_check
        CHECK (locked_by_kind IN ('user', 'service_account', 'operator', 'run'));
-- Audit events are append-only: the team events stay, new ones are refused.
ALTER TABLE audit_events DROP CONSTRAINT audit_events_actor_type_check,
    ADD CONSTRAINT audit_events_actor_type_check
        CHECK (actor_type IN ('user', 'service_account', 'operator', 'system', 'run')) NOT VALID;
DROP TABLE team_tokens;
