-- +goose Up

-- The member role: belongs to the organization and reaches only what its
-- teams grant. It is the default for invitations.
ALTER TABLE memberships DROP CONSTRAINT memberships_role_check,
    ADD CONSTRAINT memberships_role_check CHECK (role IN ('owner', 'admin', 'writer', 'reader', 'member'));
ALTER TABLE invitations DROP CONSTRAINT invitations_role_check,
    ADD CONSTRAINT invitations_role_check CHECK (role IN ('owner', 'admin', 'writer', 'reader', 'member'));

-- Teams are the unit of access below the organization (HCP semantics). The
-- organization-access flags are HCP's, stored even where Cairn has nothing
-- they govern yet, so that clients read back what they set. owners marks
-- the built-in team of every organization: it holds every permission,
-- cannot be deleted and always keeps a member.
CREATE TABLE teams (
    id                            text        PRIMARY KEY,
    organization_id               text        NOT NULL REFERENCES organizations (id),
    name                          text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    sso_team_id                   text        CHECK (length(sso_team_id) BETWEEN 1 AND 200),
    visibility                    text        NOT NULL DEFAULT 'secret' CHECK (visibility IN ('secret', 'organization')),
    owners                        boolean     NOT NULL DEFAULT false,
    allow_member_token_management boolean     NOT NULL DEFAULT true,
    manage_policies               boolean     NOT NULL DEFAULT false,
    manage_policy_overrides       boolean     NOT NULL DEFAULT false,
    manage_workspaces             boolean     NOT NULL DEFAULT false,
    manage_projects               boolean     NOT NULL DEFAULT false,
    manage_vcs_settings           boolean     NOT NULL DEFAULT false,
    manage_providers              boolean     NOT NULL DEFAULT false,
    manage_modules                boolean     NOT NULL DEFAULT false,
    manage_run_tasks              boolean     NOT NULL DEFAULT false,
    read_workspaces               boolean     NOT NULL DEFAULT false,
    read_projects                 boolean     NOT NULL DEFAULT false,
    manage_membership             boolean     NOT NULL DEFAULT false,
    manage_teams                  boolean     NOT NULL DEFAULT false,
    manage_organization_access    boolean     NOT NULL DEFAULT false,
    access_secret_teams           boolean     NOT NULL DEFAULT false,
    manage_agent_pools            boolean     NOT NULL DEFAULT false,
    created_by                    text        NOT NULL,
    created_at                    timestamptz NOT NULL DEFAULT now(),
    updated_at                    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, organization_id)
);
CREATE UNIQUE INDEX teams_organization_name_key ON teams (organization_id, lower(name));
CREATE UNIQUE INDEX teams_organization_owners_key ON teams (organization_id) WHERE owners;
CREATE UNIQUE INDEX teams_organization_sso_key ON teams (organization_id, sso_team_id) WHERE sso_team_id IS NOT NULL;

-- Team members are members of the organization: ending the membership
-- ends every team membership with it.
CREATE TABLE team_members (
    team_id         text        NOT NULL,
    organization_id text        NOT NULL,
    user_id         text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, user_id),
    FOREIGN KEY (team_id, organization_id) REFERENCES teams (id, organization_id) ON DELETE CASCADE,
    FOREIGN KEY (organization_id, user_id) REFERENCES memberships (organization_id, user_id) ON DELETE CASCADE
);
-- The per-request grant lookup starts here.
CREATE INDEX team_members_user ON team_members (user_id, organization_id);

-- Workspace access: a fixed level, or custom with HCP's attributes. For a
-- fixed level the attributes hold the implied values.
CREATE TABLE team_workspace_access (
    id                text        PRIMARY KEY,
    organization_id   text        NOT NULL,
    team_id           text        NOT NULL,
    workspace_id      text        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    access            text        NOT NULL CHECK (access IN ('read', 'plan', 'write', 'admin', 'custom')),
    runs              text        NOT NULL CHECK (runs IN ('read', 'plan', 'apply')),
    variables         text        NOT NULL CHECK (variables IN ('none', 'read', 'write')),
    state_versions    text        NOT NULL CHECK (state_versions IN ('none', 'read-outputs', 'read', 'write')),
    sentinel_mocks    text        NOT NULL CHECK (sentinel_mocks IN ('none', 'read')),
    workspace_locking boolean     NOT NULL,
    run_tasks         boolean     NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (team_id, organization_id) REFERENCES teams (id, organization_id) ON DELETE CASCADE,
    UNIQUE (team_id, workspace_id)
);
CREATE INDEX team_workspace_access_workspace ON team_workspace_access (workspace_id);

-- Project access: reaches every workspace of the project.
CREATE TABLE team_project_access (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL,
    team_id         text        NOT NULL,
    project_id      text        NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    access          text        NOT NULL CHECK (access IN ('admin', 'maintain', 'write', 'read', 'custom')),
    settings        text        NOT NULL CHECK (settings IN ('read', 'update', 'delete')),
    teams           text        NOT NULL CHECK (teams IN ('none', 'read', 'manage')),
    variable_sets   text        NOT NULL CHECK (variable_sets IN ('none', 'read', 'write')),
    runs            text        NOT NULL CHECK (runs IN ('read', 'plan', 'apply')),
    variables       text        NOT NULL CHECK (variables IN ('none', 'read', 'write')),
    state_versions  text        NOT NULL CHECK (state_versions IN ('none', 'read-outputs', 'read', 'write')),
    sentinel_mocks  text        NOT NULL CHECK (sentinel_mocks IN ('none', 'read')),
    create_workspaces boolean   NOT NULL,
    locking         boolean     NOT NULL,
    move_workspaces boolean     NOT NULL,
    delete_workspaces boolean   NOT NULL,
    run_tasks       boolean     NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (team_id, organization_id) REFERENCES teams (id, organization_id) ON DELETE CASCADE,
    UNIQUE (team_id, project_id)
);
CREATE INDEX team_project_access_project ON team_project_access (project_id);

-- The owners team never ends up empty: checked at commit, so a change that
-- adds a member and removes another in one transaction passes, and
-- deleting the team (with its organization) does too.
-- +goose StatementBegin
CREATE FUNCTION owners_team_keeps_a_member() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM teams t WHERE t.id = OLD.team_id AND t.owners)
       AND NOT EXISTS (SELECT 1 FROM team_members m WHERE m.team_id = OLD.team_id) THEN
        RAISE EXCEPTION 'the owners team keeps at least one member' USING ERRCODE = 'check_violation',
            CONSTRAINT = 'owners_team_keeps_a_member';
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE CONSTRAINT TRIGGER owners_team_keeps_a_member AFTER DELETE ON team_members
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION owners_team_keeps_a_member();

-- Every existing organization gets its owners team, its owners as members.
-- The ID is shaped like id.New("team"): 26 characters of base32.
INSERT INTO teams (id, organization_id, name, owners, visibility, created_by)
SELECT 'team_' || substr(translate(lower(encode(decode(md5(o.id || random()::text) || md5(random()::text || o.id), 'hex'), 'base64')),
                                   '0189+/=', 'abcdefg'), 1, 26),
       o.id, 'owners', true, 'organization', 'system'
FROM organizations o;
INSERT INTO team_members (team_id, organization_id, user_id)
SELECT t.id, m.organization_id, m.user_id
FROM memberships m JOIN teams t ON t.organization_id = m.organization_id AND t.owners
WHERE m.role = 'owner';

-- +goose Down
DROP TABLE team_project_access;
DROP TABLE team_workspace_access;
DROP TABLE team_members;
DROP TABLE teams;
DROP FUNCTION owners_team_keeps_a_member();
UPDATE memberships SET role = 'reader' WHERE role = 'member';
ALTER TABLE memberships DROP CONSTRAINT memberships_role_check,
    ADD CONSTRAINT memberships_role_check CHECK (role IN ('owner', 'admin', 'writer', 'reader'));
DELETE FROM invitations WHERE role = 'member';
ALTER TABLE invitations DROP CONSTRAINT invitations_role_check,
    ADD CONSTRAINT invitations_role_check CHECK (role IN ('owner', 'admin', 'writer', 'reader'));
